//! Endpoint, credentials and region as the AWS CLI finds them: flags, then
//! the environment, then the shared config files.
//!
//! - Endpoint: `--endpoint`, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`.
//! - Credentials: `--access-key`/`--secret-key`; then, unless `--profile`
//!   was given (an explicit profile wins over the environment, as in the
//!   AWS CLI), `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`; then the
//!   profile's `aws_access_key_id`/`aws_secret_access_key` in the
//!   credentials file, then in the config file.
//! - Region: `--region`, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's
//!   `region`, else `us-east-1`.
//! - Profile: `--profile`, `AWS_PROFILE`, else `default`. Files:
//!   `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`, sections
//!   `[name]`) and `AWS_CONFIG_FILE` (default `~/.aws/config`, sections
//!   `[default]` and `[profile name]`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

/// Flags naming the server and how to sign for it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnArgs {
    /// The S3 endpoint, http://host:port [default: AWS_ENDPOINT_URL, else the
    /// profile's endpoint_url].
    #[arg(long, value_name = "URL")]
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

/// Where to send requests and how to sign them.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `http://host:port`.
    pub endpoint: String,
    /// The SigV4 region.
    pub region: String,
    /// The access key.
    pub access_key: String,
    /// The secret key.
    pub secret_key: String,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish()
    }
}

/// Sections of an INI file: name → (key → value), keys lowercased.
pub type Ini = HashMap<String, HashMap<String, String>>;

/// Parses the AWS shared files' INI dialect: `[section]` headers, `key =
/// value` lines, `#` and `;` comment lines. Indented lines (the nested
/// settings of a key such as `s3 =`) are skipped.
pub fn parse_ini(text: &str) -> Ini {
    let mut out: Ini = HashMap::new();
    let mut section: Option<String> = None;
    for raw in text.lines() {
        let indented = raw.starts_with([' ', '\t']);
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            out.entry(name.clone()).or_default();
            section = Some(name);
            continue;
        }
        if indented {
            continue;
        }
        let (Some(sec), Some((k, v))) = (&section, line.split_once('=')) else {
            continue;
        };
        out.entry(sec.clone())
            .or_default()
            .insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    out
}

fn read_ini(path: &Path) -> anyhow::Result<Option<Ini>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(parse_ini(&t))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!(e).context(format!("reading {}", path.display()))),
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// Resolves with the process's environment and home directory.
pub fn resolve(args: &ConnArgs) -> anyhow::Result<Resolved> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    resolve_with(args, &|k| std::env::var(k).ok(), home.as_deref())
}

/// Resolves with `env` for the environment and `home` for `~`.
pub fn resolve_with(
    args: &ConnArgs,
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> anyhow::Result<Resolved> {
    let env = |k: &str| nonempty(env(k));
    let explicit_profile = nonempty(args.profile.clone());
    let profile = explicit_profile
        .clone()
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let file = |var: &str, name: &str| -> Option<PathBuf> {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".aws").join(name)))
    };
    let creds_file = match file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        Some(p) => read_ini(&p)?,
        None => None,
    };
    let config_file = match file("AWS_CONFIG_FILE", "config") {
        Some(p) => read_ini(&p)?,
        None => None,
    };
    let config_section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    let from_creds = creds_file.as_ref().and_then(|f| f.get(&profile));
    let from_config = config_file.as_ref().and_then(|f| f.get(&config_section));
    if explicit_profile.is_some() && from_creds.is_none() && from_config.is_none() {
        bail!("the profile {profile:?} is in neither the credentials nor the config file");
    }
    let setting = |k: &str| -> Option<String> {
        from_creds
            .and_then(|s| s.get(k))
            .or_else(|| from_config.and_then(|s| s.get(k)))
            .cloned()
            .filter(|v| !v.is_empty())
    };

    let endpoint = nonempty(args.endpoint.clone())
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| setting("endpoint_url"))
        .context("no endpoint: pass --endpoint http://host:port, or set AWS_ENDPOINT_URL")?;
    let region = nonempty(args.region.clone())
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| setting("region"))
        .unwrap_or_else(|| "us-east-1".into());
    let (access_key, secret_key) = match (
        nonempty(args.access_key.clone()),
        nonempty(args.secret_key.clone()),
    ) {
        (Some(a), Some(s)) => (a, s),
        (Some(_), None) | (None, Some(_)) => {
            bail!("--access-key and --secret-key go together")
        }
        (None, None) => {
            let from_env = match explicit_profile {
                Some(_) => None,
                None => env("AWS_ACCESS_KEY_ID").zip(env("AWS_SECRET_ACCESS_KEY")),
            };
            from_env
                .or_else(|| setting("aws_access_key_id").zip(setting("aws_secret_access_key")))
                .with_context(|| {
                    format!(
                        "no credentials: pass --access-key and --secret-key, set \
                         AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give the profile \
                         {profile:?} aws_access_key_id and aws_secret_access_key"
                    )
                })?
        }
    };
    Ok(Resolved {
        endpoint,
        region,
        access_key,
        secret_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn ini() {
        let t = "# c\n[default]\naws_access_key_id = A\n; c\nRegion=eu-west-1\n\n[profile  x]\ns3 =\n  endpoint_url = http://nested\nendpoint_url = http://h:1\nnot a pair\n";
        let i = parse_ini(t);
        assert_eq!(i["default"]["aws_access_key_id"], "A");
        assert_eq!(i["default"]["region"], "eu-west-1");
        assert_eq!(i["profile x"]["endpoint_url"], "http://h:1");
        assert_eq!(i["profile x"]["s3"], "");
        assert_eq!(i["profile x"].len(), 2);
    }

    fn home_with(creds: &str, config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".aws")).unwrap();
        std::fs::write(d.path().join(".aws/credentials"), creds).unwrap();
        std::fs::write(d.path().join(".aws/config"), config).unwrap();
        d
    }

    #[test]
    fn precedence() {
        let home = home_with(
            "[default]\naws_access_key_id = fileA\naws_secret_access_key = fileS\n[p]\naws_access_key_id = pA\naws_secret_access_key = pS\n",
            "[default]\nregion = eu-west-1\nendpoint_url = http://cfg:1\n[profile p]\nregion = ap-south-1\nendpoint_url = http://p:2\n",
        );
        let h = Some(home.path());
        // Files alone.
        let r = resolve_with(&ConnArgs::default(), &env_of(&[]), h).unwrap();
        assert_eq!(
            (
                r.endpoint.as_str(),
                r.region.as_str(),
                r.access_key.as_str(),
                r.secret_key.as_str()
            ),
            ("http://cfg:1", "eu-west-1", "fileA", "fileS")
        );
        // The environment wins over the default profile.
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "envA"),
            ("AWS_SECRET_ACCESS_KEY", "envS"),
            ("AWS_DEFAULT_REGION", "us-west-2"),
            ("AWS_ENDPOINT_URL", "http://env:3"),
        ]);
        let r = resolve_with(&ConnArgs::default(), &env, h).unwrap();
        assert_eq!(
            (
                r.endpoint.as_str(),
                r.region.as_str(),
                r.access_key.as_str()
            ),
            ("http://env:3", "us-west-2", "envA")
        );
        // AWS_PROFILE picks the profile, the env keys still win.
        let env2 = env_of(&[("AWS_PROFILE", "p")]);
        let r = resolve_with(&ConnArgs::default(), &env2, h).unwrap();
        assert_eq!(
            (
                r.endpoint.as_str(),
                r.region.as_str(),
                r.access_key.as_str()
            ),
            ("http://p:2", "ap-south-1", "pA")
        );
        // An explicit --profile wins over the env keys; flags win over all.
        let a = ConnArgs {
            profile: Some("p".into()),
            ..Default::default()
        };
        let r = resolve_with(&a, &env, h).unwrap();
        assert_eq!(
            (r.access_key.as_str(), r.region.as_str()),
            ("pA", "us-west-2")
        );
        let a = ConnArgs {
            endpoint: Some("http://flag:4".into()),
            access_key: Some("fA".into()),
            secret_key: Some("fS".into()),
            region: Some("r".into()),
            ..Default::default()
        };
        let r = resolve_with(&a, &env, h).unwrap();
        assert_eq!(
            (
                r.endpoint.as_str(),
                r.region.as_str(),
                r.access_key.as_str(),
                r.secret_key.as_str()
            ),
            ("http://flag:4", "r", "fA", "fS")
        );
        // AWS_REGION before AWS_DEFAULT_REGION.
        let env3 = env_of(&[("AWS_REGION", "a"), ("AWS_DEFAULT_REGION", "b")]);
        assert_eq!(
            resolve_with(&ConnArgs::default(), &env3, h).unwrap().region,
            "a"
        );
        // A missing explicit profile is an error.
        let a = ConnArgs {
            profile: Some("nope".into()),
            ..Default::default()
        };
        assert!(resolve_with(&a, &env, h).is_err());
    }

    #[test]
    fn missing_pieces() {
        let none = env_of(&[]);
        let e = resolve_with(&ConnArgs::default(), &none, None).unwrap_err();
        assert!(e.to_string().contains("no endpoint"), "{e}");
        let a = ConnArgs {
            endpoint: Some("http://x:1".into()),
            ..Default::default()
        };
        let e = resolve_with(&a, &none, None).unwrap_err();
        assert!(e.to_string().contains("no credentials"), "{e}");
        let r = resolve_with(
            &a,
            &env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]),
            None,
        )
        .unwrap();
        assert_eq!(r.region, "us-east-1");
    }
}
