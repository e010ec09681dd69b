//! Endpoint, credentials, region and NIC as the `hipobj` command finds
//! them: arguments, then the environment, then the shared AWS files.
//!
//! A copy of the resolution in `integrations/cli/src/aws.rs` (which lives in
//! the CLI binary, not in a library), without clap and anyhow; keep the two
//! in step until the lead moves it into `hipobj-s3`.
//!
//! - Endpoint: the argument, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`.
//! - Credentials: the arguments; then, unless a profile was given (an
//!   explicit profile wins over the environment, as in the AWS CLI),
//!   `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`; then the profile's
//!   `aws_access_key_id`/`aws_secret_access_key` in the credentials file,
//!   then in the config file.
//! - Region: the argument, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's
//!   `region`, else `us-east-1`.
//! - Profile: the argument, `AWS_PROFILE`, else `default`. Files:
//!   `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`) and
//!   `AWS_CONFIG_FILE` (default `~/.aws/config`, sections `[default]` and
//!   `[profile name]`).
//! - NIC: the argument, `HIPOBJ_NIC`, else `soft0` (as `hipobj cp --nic`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The NIC when neither the argument nor `HIPOBJ_NIC` names one.
pub const DEFAULT_NIC: &str = "soft0";

/// What the caller passed (each may be absent).
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub endpoint: Option<String>,
    pub profile: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub region: Option<String>,
    pub nic: Option<String>,
}

/// Where to send requests, how to sign them, and the NIC.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    pub endpoint: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub nic: String,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("nic", &self.nic)
            .finish()
    }
}

/// Sections of an INI file: name → (key → value), keys lowercased.
type Ini = HashMap<String, HashMap<String, String>>;

/// The AWS shared files' INI dialect: `[section]` headers, `key = value`
/// lines, `#` and `;` comment lines; indented lines (nested settings such
/// as `s3 =`) are skipped.
fn parse_ini(text: &str) -> Ini {
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

fn read_ini(path: &Path) -> Result<Option<Ini>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(parse_ini(&t))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// Resolves with the process's environment and home directory.
pub fn resolve(args: &Args) -> Result<Resolved, String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    resolve_with(args, &|k| std::env::var(k).ok(), home.as_deref())
}

/// Resolves with `env` for the environment and `home` for `~`.
pub fn resolve_with(
    args: &Args,
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<Resolved, String> {
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
        return Err(format!(
            "the profile {profile:?} is in neither the credentials nor the config file"
        ));
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
        .ok_or("no endpoint: pass endpoint=\"http://host:port\", or set AWS_ENDPOINT_URL")?;
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
            return Err("access_key and secret_key go together".into())
        }
        (None, None) => {
            let from_env = match explicit_profile {
                Some(_) => None,
                None => env("AWS_ACCESS_KEY_ID").zip(env("AWS_SECRET_ACCESS_KEY")),
            };
            from_env
                .or_else(|| setting("aws_access_key_id").zip(setting("aws_secret_access_key")))
                .ok_or_else(|| {
                    format!(
                        "no credentials: pass access_key and secret_key, set \
                         AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give the profile \
                         {profile:?} aws_access_key_id and aws_secret_access_key"
                    )
                })?
        }
    };
    let nic = nonempty(args.nic.clone())
        .or_else(|| env("HIPOBJ_NIC"))
        .unwrap_or_else(|| DEFAULT_NIC.into());
    Ok(Resolved {
        endpoint,
        region,
        access_key,
        secret_key,
        nic,
    })
}
