//! The flags naming the server and how to sign for it. They resolve, with
//! the environment and the shared AWS files, as the AWS CLI's do, in
//! [`hipobj_s3::settings`] (shared with the Python package): `--endpoint`,
//! `AWS_ENDPOINT_URL`, the profile's `endpoint_url` (each one endpoint or
//! several separated by commas: gateways in front of one store, the next
//! taking over when one fails); `--access-key` and
//! `--secret-key`, then `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` unless
//! `--profile` was given, then the profile's keys; `--region`,
//! `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, else `us-east-1`.

use hipobj_s3::settings::{self, Args, Resolved, SettingsError};

/// Flags naming the server and how to sign for it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnArgs {
    /// The S3 endpoint, http://host:port, or several separated by commas
    /// (gateways in front of one store: requests move on to the next when
    /// one fails) [default: AWS_ENDPOINT_URL, else the profile's
    /// endpoint_url].
    #[arg(long, value_name = "URL[,URL...]")]
    pub endpoint: Option<String>,
    /// The profile in ~/.aws/credentials and ~/.aws/config [default:
    /// AWS_PROFILE, else "default"].
    #[arg(long)]
    pub profile: Option<String>,
    /// Access key [default: AWS_ACCESS_KEY_ID, else the profile's].
    #[arg(long)]
    pub access_key: Option<String>,
    /// Secret key [default: AWS_SECRET_ACCESS_KEY, else the profile's].
    #[arg(long)]
    pub secret_key: Option<String>,
    /// SigV4 region [default: AWS_REGION, AWS_DEFAULT_REGION, the profile's,
    /// else us-east-1].
    #[arg(long)]
    pub region: Option<String>,
    /// How requests name the bucket: `path` (`host/bucket/key`) or
    /// `virtual` (`bucket.host/key`, for a server with a domain, such as
    /// hipobj-gateway's `--domain`), as the AWS CLI's `addressing_style`.
    #[arg(long, value_enum, default_value_t = AddressingStyle::Path)]
    pub addressing_style: AddressingStyle,
}

/// Path-style or virtual-hosted-style requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AddressingStyle {
    /// `http://host/bucket/key`.
    #[default]
    Path,
    /// `http://bucket.host/key`.
    Virtual,
}

impl ConnArgs {
    /// The flags as [`settings::Args`] (the NIC comes from its own flag).
    pub fn settings_args(&self) -> Args {
        Args {
            endpoint: self.endpoint.clone(),
            profile: self.profile.clone(),
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
            region: self.region.clone(),
            nic: None,
        }
    }
}

/// A resolution error in the words of the flags.
fn flag_error(e: SettingsError) -> anyhow::Error {
    match e {
        SettingsError::NoEndpoint => {
            anyhow::anyhow!(
                "no endpoint: pass --endpoint http://host:port, or set AWS_ENDPOINT_URL"
            )
        }
        SettingsError::BadEndpoint { from, message } => {
            let from = if from == "the endpoint argument" {
                "--endpoint".to_string()
            } else {
                from
            };
            anyhow::anyhow!("{from}: {message}")
        }
        SettingsError::HalfCredentials => {
            anyhow::anyhow!("--access-key and --secret-key go together")
        }
        SettingsError::NoCredentials { profile } => anyhow::anyhow!(
            "no credentials: pass --access-key and --secret-key, set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, or give the profile {profile:?} aws_access_key_id and \
             aws_secret_access_key"
        ),
        other => anyhow::Error::new(other),
    }
}

/// Resolves the flags with the process's environment and home directory.
pub fn resolve(args: &ConnArgs) -> anyhow::Result<Resolved> {
    settings::resolve(&args.settings_args()).map_err(flag_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_flags() {
        let e = flag_error(SettingsError::NoEndpoint).to_string();
        assert!(e.contains("--endpoint"), "{e}");
        let e = flag_error(SettingsError::HalfCredentials).to_string();
        assert_eq!(e, "--access-key and --secret-key go together");
        let e = flag_error(SettingsError::NoCredentials {
            profile: "p".into(),
        })
        .to_string();
        assert!(e.contains("--access-key") && e.contains("\"p\""), "{e}");
        let e = flag_error(SettingsError::BadEndpoint {
            from: "the endpoint argument".into(),
            message: "m".into(),
        })
        .to_string();
        assert_eq!(e, "--endpoint: m");
        let e = flag_error(SettingsError::BadEndpoint {
            from: "AWS_ENDPOINT_URL".into(),
            message: "m".into(),
        })
        .to_string();
        assert_eq!(e, "AWS_ENDPOINT_URL: m");
        let e = flag_error(SettingsError::UnknownProfile("x".into())).to_string();
        assert!(
            e.contains("neither the credentials nor the config file"),
            "{e}"
        );
    }

    #[test]
    fn flags_are_settings_arguments() {
        let c = ConnArgs {
            endpoint: Some("http://e:1".into()),
            profile: Some("p".into()),
            access_key: Some("a".into()),
            secret_key: Some("s".into()),
            region: Some("r".into()),
            addressing_style: AddressingStyle::Virtual,
        };
        assert_eq!(
            c.settings_args(),
            Args {
                endpoint: Some("http://e:1".into()),
                profile: Some("p".into()),
                access_key: Some("a".into()),
                secret_key: Some("s".into()),
                region: Some("r".into()),
                nic: None,
            }
        );
    }
}
