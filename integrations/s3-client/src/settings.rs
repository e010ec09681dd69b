//! Endpoint, credentials, region and NIC as the AWS CLI finds them: what
//! the caller passed, then the environment, then the shared AWS files. The
//! `hipobj` command and the Python package resolve their settings here.
//!
//! - Endpoint: the argument, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`;
//!   each may be one `http://host:port` or several separated by commas
//!   (gateways in front of one store: the client moves on to the next when
//!   one fails, [`ClientConfig::endpoint`](crate::ClientConfig::endpoint)),
//!   each checked ([`SettingsError::BadEndpoint`] names where it came from).
//! - Credentials: the arguments; then, unless a profile was given (an
//!   explicit profile wins over the environment, as in the AWS CLI),
//!   `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`; then the profile's
//!   `aws_access_key_id`/`aws_secret_access_key` in the credentials file,
//!   then in the config file.
//! - Region: the argument, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's
//!   `region`, else `us-east-1`.
//! - Profile: the argument, `AWS_PROFILE`, else `default`. Files:
//!   `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`, sections
//!   `[name]`) and `AWS_CONFIG_FILE` (default `~/.aws/config`, sections
//!   `[default]` and `[profile name]`).
//! - NIC: the argument, `HIPOBJ_NIC`, else [`DEFAULT_NIC`] (the software
//!   provider).
//!
//! Empty values count as absent everywhere.
//!
//! ```
//! use hipobj_s3::settings::{resolve_with, Args};
//!
//! let args = Args {
//!     endpoint: Some("http://127.0.0.1:9000".into()),
//!     ..Args::default()
//! };
//! let env = |k: &str| match k {
//!     "AWS_ACCESS_KEY_ID" => Some("key".to_string()),
//!     "AWS_SECRET_ACCESS_KEY" => Some("secret".to_string()),
//!     _ => None,
//! };
//! let r = resolve_with(&args, &env, None).unwrap();
//! assert_eq!((r.access_key.as_str(), r.region.as_str(), r.nic.as_str()), ("key", "us-east-1", "soft0"));
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The NIC when neither the argument nor `HIPOBJ_NIC` names one: the
/// software provider's first device.
pub const DEFAULT_NIC: &str = "soft0";

/// The region when nothing names one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// What the caller passed (flags, function arguments); each may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `http://host:port`, or several separated by commas.
    pub endpoint: Option<String>,
    /// The profile in the shared files.
    pub profile: Option<String>,
    /// The access key (with `secret_key`).
    pub access_key: Option<String>,
    /// The secret key (with `access_key`).
    pub secret_key: Option<String>,
    /// The SigV4 region.
    pub region: Option<String>,
    /// The NIC the client library registers buffers with.
    pub nic: Option<String>,
}

/// Where to send requests, how to sign them, and the NIC.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `http://host:port`, or several separated by commas (each checked,
    /// blanks around them removed): what
    /// [`ClientConfig::endpoint`](crate::ClientConfig::endpoint) takes.
    pub endpoint: String,
    /// The SigV4 region.
    pub region: String,
    /// The access key.
    pub access_key: String,
    /// The secret key.
    pub secret_key: String,
    /// The NIC.
    pub nic: String,
}

impl Resolved {
    /// The endpoints, in order (one, or several).
    pub fn endpoints(&self) -> Vec<&str> {
        self.endpoint.split(',').collect()
    }
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

/// Why the settings could not be resolved. The messages name the
/// environment variables and files; a caller with flags or arguments of its
/// own may say how to pass them instead (match the variant).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// No endpoint anywhere.
    #[error("no endpoint: pass one, or set AWS_ENDPOINT_URL")]
    NoEndpoint,
    /// An endpoint (of a list, or the only one) is unusable: not
    /// `http://host[:port]`, or an empty entry in a list.
    #[error("{from}: {message}")]
    BadEndpoint {
        /// Where it came from: `the endpoint argument`,
        /// `AWS_ENDPOINT_URL`, or the profile's `endpoint_url`.
        from: String,
        /// What is wrong with it.
        message: String,
    },
    /// No credentials anywhere.
    #[error(
        "no credentials: pass an access key and a secret key, set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY, or give the profile {profile:?} aws_access_key_id and \
         aws_secret_access_key"
    )]
    NoCredentials {
        /// The profile looked in.
        profile: String,
    },
    /// An access key without a secret key, or the other way round.
    #[error("the access key and the secret key go together")]
    HalfCredentials,
    /// A profile named explicitly is in neither file.
    #[error("the profile {0:?} is in neither the credentials nor the config file")]
    UnknownProfile(String),
    /// A shared file exists but could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A shared file is not in the INI dialect (a `[` without `]`, a `=`
    /// without a key).
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        message: String,
    },
}

/// Sections of an INI file: name → (key → value), keys lowercased.
pub type Ini = HashMap<String, HashMap<String, String>>;

/// The section keys before any `[section]` go to, dropped: the AWS files
/// have none (`configparser` would put them in `default`).
const NO_SECTION: &str = "\0 before any section";

/// The AWS shared files' INI dialect, read by `configparser` (no
/// dependencies; `rust-ini` refuses lines without `=` and the AWS SDK's own
/// profile parser lives in `aws-runtime`, the SDK runtime, which this
/// client does not otherwise need): `[section]` headers, `key = value`
/// lines (`=` the only delimiter, no inline comments), `#` and `;` comment
/// lines, and the nested settings of a key such as `s3 =` (lines indented
/// under it) continuing its value, of which the first line is kept.
fn parse_checked(text: &str) -> Result<Ini, String> {
    let mut defaults = configparser::ini::IniDefault::default();
    defaults.default_section = NO_SECTION.into();
    defaults.comment_symbols = vec!['#', ';'];
    defaults.delimiters = vec!['='];
    defaults.multiline = true;
    defaults.case_sensitive = true;
    defaults.enable_inline_comments = false;
    let mut parser = configparser::ini::Ini::new_from_defaults(defaults);
    let sections = parser.read(text.to_string())?;
    let mut out: Ini = HashMap::new();
    for (name, keys) in sections {
        if name == NO_SECTION {
            continue;
        }
        let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
        let section = out.entry(name).or_default();
        for (k, v) in keys {
            // A line without `=` has no value: not a setting.
            let Some(v) = v else { continue };
            let first = v.lines().next().unwrap_or_default().trim().to_string();
            section.insert(k.to_ascii_lowercase(), first);
        }
    }
    Ok(out)
}

/// Parses the AWS shared files' INI dialect: `[section]` headers (inner
/// whitespace collapsed), `key = value` lines, `#` and `;` comment lines.
/// The nested settings of a key such as `s3 =` (indented lines under it)
/// are left out; so are lines without `=`. Text the parser refuses (a
/// `[` without `]`, a `=` without a key) gives no sections; resolving
/// settings reports it ([`SettingsError::Parse`]).
pub fn parse_ini(text: &str) -> Ini {
    parse_checked(text).unwrap_or_default()
}

fn read_ini(path: &Path) -> Result<Option<Ini>, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(t) => parse_checked(&t)
            .map(Some)
            .map_err(|message| SettingsError::Parse {
                path: path.to_path_buf(),
                message,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SettingsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// The process's environment variable `k`.
fn process_env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// Resolves with the process's environment and home directory.
pub fn resolve(args: &Args) -> Result<Resolved, SettingsError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    resolve_with(args, &process_env, home.as_deref())
}

/// The NIC alone: `arg`, `HIPOBJ_NIC`, else [`DEFAULT_NIC`].
pub fn resolve_nic(arg: Option<&str>) -> String {
    nic_with(arg, &process_env)
}

fn nic_with(arg: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> String {
    nonempty(arg.map(str::to_string))
        .or_else(|| nonempty(env("HIPOBJ_NIC")))
        .unwrap_or_else(|| DEFAULT_NIC.into())
}

/// The environment variable of the RDMA protocol.
pub const ENV_RDMA_PROTOCOL: &str = "HIPOBJ_RDMA_PROTOCOL";

/// The RDMA protocol: `arg`, `HIPOBJ_RDMA_PROTOCOL`, else `auto`. A value
/// that is none of `v2`, `handshake`, `auto` is an error (naming where it
/// came from).
pub fn resolve_rdma_protocol(arg: Option<&str>) -> Result<crate::RdmaProtocol, String> {
    rdma_protocol_with(arg, &process_env)
}

/// [`resolve_rdma_protocol`] with `env` for the environment.
pub fn rdma_protocol_with(
    arg: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<crate::RdmaProtocol, String> {
    if let Some(a) = nonempty(arg.map(str::to_string)) {
        return a.parse().map_err(|e| format!("--rdma-protocol: {e}"));
    }
    match nonempty(env(ENV_RDMA_PROTOCOL)) {
        Some(v) => v.parse().map_err(|e| format!("{ENV_RDMA_PROTOCOL}: {e}")),
        None => Ok(crate::RdmaProtocol::default()),
    }
}

/// One endpoint or a comma-separated list of them, each checked
/// (`http://host[:port]`), blanks around each removed: the list joined by
/// commas, or what is wrong.
///
/// ```
/// use hipobj_s3::settings::endpoint_list;
///
/// assert_eq!(
///     endpoint_list(" http://gw1:9000 , http://gw2:9000").unwrap(),
///     "http://gw1:9000,http://gw2:9000"
/// );
/// assert!(endpoint_list("http://gw1:9000,").is_err());
/// assert!(endpoint_list("http://gw1:9000,https://gw2").is_err());
/// ```
pub fn endpoint_list(s: &str) -> Result<String, String> {
    let v = crate::endpoints::split(s)?;
    for e in &v {
        crate::http::Endpoint::parse(e).map_err(|e| e.to_string())?;
    }
    Ok(v.join(","))
}

/// Resolves with `env` for the environment and `home` for `~`.
pub fn resolve_with(
    args: &Args,
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<Resolved, SettingsError> {
    let var = |k: &str| nonempty(env(k));
    let explicit_profile = nonempty(args.profile.clone());
    let profile = explicit_profile
        .clone()
        .or_else(|| var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let file = |v: &str, name: &str| -> Option<PathBuf> {
        var(v)
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
        return Err(SettingsError::UnknownProfile(profile));
    }
    let setting = |k: &str| -> Option<String> {
        from_creds
            .and_then(|s| s.get(k))
            .or_else(|| from_config.and_then(|s| s.get(k)))
            .cloned()
            .filter(|v| !v.is_empty())
    };

    let (endpoint, from) = nonempty(args.endpoint.clone())
        .map(|e| (e, "the endpoint argument".to_string()))
        .or_else(|| var("AWS_ENDPOINT_URL").map(|e| (e, "AWS_ENDPOINT_URL".to_string())))
        .or_else(|| {
            setting("endpoint_url").map(|e| (e, format!("the profile {profile:?}'s endpoint_url")))
        })
        .ok_or(SettingsError::NoEndpoint)?;
    let endpoint =
        endpoint_list(&endpoint).map_err(|message| SettingsError::BadEndpoint { from, message })?;
    let region = nonempty(args.region.clone())
        .or_else(|| var("AWS_REGION"))
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .or_else(|| setting("region"))
        .unwrap_or_else(|| DEFAULT_REGION.into());
    let (access_key, secret_key) = match (
        nonempty(args.access_key.clone()),
        nonempty(args.secret_key.clone()),
    ) {
        (Some(a), Some(s)) => (a, s),
        (Some(_), None) | (None, Some(_)) => return Err(SettingsError::HalfCredentials),
        (None, None) => {
            let from_env = match explicit_profile {
                Some(_) => None,
                None => var("AWS_ACCESS_KEY_ID").zip(var("AWS_SECRET_ACCESS_KEY")),
            };
            from_env
                .or_else(|| setting("aws_access_key_id").zip(setting("aws_secret_access_key")))
                .ok_or(SettingsError::NoCredentials { profile })?
        }
    };
    Ok(Resolved {
        endpoint,
        region,
        access_key,
        secret_key,
        nic: nic_with(args.nic.as_deref(), env),
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

    fn home_with(creds: &str, config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".aws")).unwrap();
        std::fs::write(d.path().join(".aws/credentials"), creds).unwrap();
        std::fs::write(d.path().join(".aws/config"), config).unwrap();
        d
    }

    /// (endpoint, region, access key, secret key, nic).
    fn all(r: &Resolved) -> (&str, &str, &str, &str, &str) {
        (&r.endpoint, &r.region, &r.access_key, &r.secret_key, &r.nic)
    }

    #[test]
    fn rdma_protocol_precedence_and_values() {
        use crate::RdmaProtocol;
        let none = env_of(&[]);
        assert_eq!(rdma_protocol_with(None, &none), Ok(RdmaProtocol::Auto));
        assert_eq!(rdma_protocol_with(Some(""), &none), Ok(RdmaProtocol::Auto));
        let env = env_of(&[(ENV_RDMA_PROTOCOL, " Handshake ")]);
        assert_eq!(rdma_protocol_with(None, &env), Ok(RdmaProtocol::Handshake));
        // The argument wins over the environment.
        assert_eq!(rdma_protocol_with(Some("v2"), &env), Ok(RdmaProtocol::V2));
        assert_eq!(
            rdma_protocol_with(Some("hipobj-rc-v2"), &none),
            Ok(RdmaProtocol::V2)
        );
        assert_eq!(
            rdma_protocol_with(Some("AUTO"), &env),
            Ok(RdmaProtocol::Auto)
        );
        let e = rdma_protocol_with(Some("v3"), &none).unwrap_err();
        assert!(e.starts_with("--rdma-protocol") && e.contains("v3"), "{e}");
        let bad = env_of(&[(ENV_RDMA_PROTOCOL, "rdma")]);
        let e = rdma_protocol_with(None, &bad).unwrap_err();
        assert!(e.starts_with(ENV_RDMA_PROTOCOL), "{e}");
        for p in [
            RdmaProtocol::V2,
            RdmaProtocol::Handshake,
            RdmaProtocol::Auto,
        ] {
            assert_eq!(p.as_str().parse::<RdmaProtocol>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert!(!RdmaProtocol::Handshake.tries_v2());
        assert!(RdmaProtocol::Auto.tries_v2() && RdmaProtocol::V2.tries_v2());
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
        assert_eq!(i.len(), 2);
    }

    #[test]
    fn ini_edges() {
        // Keys before any section belong to none; `:` is no delimiter, and
        // `;` or `#` inside a value is part of it.
        let i = parse_ini(
            "stray = 1
[default]
a: b
secret = x#y;z
",
        );
        assert_eq!(i.len(), 1);
        assert_eq!(i["default"].len(), 1);
        assert_eq!(i["default"]["secret"], "x#y;z");
        // A file the parser refuses is an error naming it.
        let home = home_with(
            "[default
aws_access_key_id = A
",
            "",
        );
        let e = resolve_with(
            &Args {
                endpoint: Some("http://h:1".into()),
                ..Args::default()
            },
            &env_of(&[]),
            Some(home.path()),
        )
        .unwrap_err();
        assert!(
            matches!(&e, SettingsError::Parse { path, .. } if path.ends_with(".aws/credentials")),
            "{e}"
        );
    }

    #[test]
    fn precedence() {
        let home = home_with(
            "[default]\naws_access_key_id = fileA\naws_secret_access_key = fileS\n[p]\naws_access_key_id = pA\naws_secret_access_key = pS\n",
            "[default]\nregion = eu-west-1\nendpoint_url = http://cfg:1\n[profile p]\nregion = ap-south-1\nendpoint_url = http://p:2\n",
        );
        let h = Some(home.path());
        // Files alone.
        let r = resolve_with(&Args::default(), &env_of(&[]), h).unwrap();
        assert_eq!(
            all(&r),
            ("http://cfg:1", "eu-west-1", "fileA", "fileS", "soft0")
        );
        // The environment wins over the default profile.
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "envA"),
            ("AWS_SECRET_ACCESS_KEY", "envS"),
            ("AWS_DEFAULT_REGION", "us-west-2"),
            ("AWS_ENDPOINT_URL", "http://env:3"),
            ("HIPOBJ_NIC", "soft:127.0.0.1"),
        ]);
        let r = resolve_with(&Args::default(), &env, h).unwrap();
        assert_eq!(
            all(&r),
            (
                "http://env:3",
                "us-west-2",
                "envA",
                "envS",
                "soft:127.0.0.1"
            )
        );
        // AWS_PROFILE picks the profile, the environment's keys still win.
        let r = resolve_with(&Args::default(), &env_of(&[("AWS_PROFILE", "p")]), h).unwrap();
        assert_eq!(all(&r), ("http://p:2", "ap-south-1", "pA", "pS", "soft0"));
        // An explicit profile wins over the environment's keys.
        let a = Args {
            profile: Some("p".into()),
            ..Args::default()
        };
        let r = resolve_with(&a, &env, h).unwrap();
        assert_eq!(
            all(&r),
            ("http://env:3", "us-west-2", "pA", "pS", "soft:127.0.0.1")
        );
        // Arguments win over everything.
        let a = Args {
            endpoint: Some("http://arg:4".into()),
            access_key: Some("aA".into()),
            secret_key: Some("aS".into()),
            region: Some("r".into()),
            nic: Some("mlx5_0".into()),
            ..Args::default()
        };
        let r = resolve_with(&a, &env, h).unwrap();
        assert_eq!(all(&r), ("http://arg:4", "r", "aA", "aS", "mlx5_0"));
        // AWS_REGION before AWS_DEFAULT_REGION; empty values are absent.
        let env3 = env_of(&[
            ("AWS_REGION", "a"),
            ("AWS_DEFAULT_REGION", "b"),
            ("AWS_ENDPOINT_URL", ""),
            ("HIPOBJ_NIC", ""),
        ]);
        let r = resolve_with(&Args::default(), &env3, h).unwrap();
        assert_eq!(all(&r), ("http://cfg:1", "a", "fileA", "fileS", "soft0"));
    }

    #[test]
    fn files_named_by_the_environment() {
        let d = tempfile::tempdir().unwrap();
        let creds = d.path().join("c");
        let config = d.path().join("k");
        std::fs::write(
            &creds,
            "[q]\naws_access_key_id = qA\naws_secret_access_key = qS\n",
        )
        .unwrap();
        std::fs::write(&config, "[profile q]\nendpoint_url = http://q:5\n").unwrap();
        let env = env_of(&[
            ("AWS_SHARED_CREDENTIALS_FILE", creds.to_str().unwrap()),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
            ("AWS_PROFILE", "q"),
        ]);
        let r = resolve_with(&Args::default(), &env, None).unwrap();
        assert_eq!(all(&r), ("http://q:5", "us-east-1", "qA", "qS", "soft0"));
        // A file that exists but is no file to read is an error, not absent.
        let env = env_of(&[("AWS_CONFIG_FILE", d.path().to_str().unwrap())]);
        let e = resolve_with(&Args::default(), &env, None).unwrap_err();
        assert!(
            matches!(&e, SettingsError::Read { path, .. } if path == d.path()),
            "{e}"
        );
    }

    #[test]
    fn missing_pieces() {
        let home = home_with("[default]\n", "");
        let h = Some(home.path());
        let none = env_of(&[]);
        let a = Args {
            profile: Some("nope".into()),
            ..Args::default()
        };
        let e = resolve_with(&a, &none, h).unwrap_err();
        assert!(
            matches!(&e, SettingsError::UnknownProfile(p) if p == "nope"),
            "{e}"
        );
        let e = resolve_with(&Args::default(), &none, None).unwrap_err();
        assert!(matches!(e, SettingsError::NoEndpoint), "{e}");
        let a = Args {
            endpoint: Some("http://x:1".into()),
            ..Args::default()
        };
        let e = resolve_with(&a, &none, h).unwrap_err();
        assert!(
            matches!(&e, SettingsError::NoCredentials { profile } if profile == "default"),
            "{e}"
        );
        let half = Args {
            access_key: Some("k".into()),
            ..a.clone()
        };
        let e = resolve_with(&half, &none, None).unwrap_err();
        assert!(matches!(e, SettingsError::HalfCredentials), "{e}");
        // Only one of the two environment keys is no credentials either.
        let e = resolve_with(&a, &env_of(&[("AWS_ACCESS_KEY_ID", "k")]), None).unwrap_err();
        assert!(matches!(e, SettingsError::NoCredentials { .. }), "{e}");
        let r = resolve_with(
            &a,
            &env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]),
            None,
        )
        .unwrap();
        assert_eq!(all(&r), ("http://x:1", "us-east-1", "k", "s", "soft0"));
    }

    #[test]
    fn endpoint_lists() {
        let creds = env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        let arg = |e: &str| Args {
            endpoint: Some(e.into()),
            ..Args::default()
        };
        // The argument: a list, blanks removed, order kept.
        let r = resolve_with(&arg("http://a:1, http://b:2 ,http://c"), &creds, None).unwrap();
        assert_eq!(r.endpoint, "http://a:1,http://b:2,http://c");
        assert_eq!(r.endpoints(), ["http://a:1", "http://b:2", "http://c"]);
        // One endpoint stays as it was.
        let r = resolve_with(&arg("http://a:1"), &creds, None).unwrap();
        assert_eq!(r.endpoints(), ["http://a:1"]);
        // AWS_ENDPOINT_URL.
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ENDPOINT_URL", "http://e1:1,http://e2:2"),
        ]);
        let r = resolve_with(&Args::default(), &env, None).unwrap();
        assert_eq!(r.endpoints(), ["http://e1:1", "http://e2:2"]);
        // The profile's endpoint_url.
        let home = home_with(
            "[default]\naws_access_key_id = A\naws_secret_access_key = S\n",
            "[default]\nendpoint_url = http://p1:1,http://p2:2\n",
        );
        let r = resolve_with(&Args::default(), &env_of(&[]), Some(home.path())).unwrap();
        assert_eq!(r.endpoints(), ["http://p1:1", "http://p2:2"]);
        // Each entry is checked, and the error says where it came from.
        let e = resolve_with(&arg("http://a:1,https://b:2"), &creds, None).unwrap_err();
        assert!(
            matches!(&e, SettingsError::BadEndpoint { from, message }
                if from == "the endpoint argument" && message.contains("https")),
            "{e}"
        );
        for bad in [
            "http://a:1,",
            ",http://a:1",
            "http://a:1,,http://b:2",
            "a:1",
        ] {
            let e = resolve_with(&arg(bad), &creds, None).unwrap_err();
            assert!(matches!(e, SettingsError::BadEndpoint { .. }), "{bad}: {e}");
        }
        let bad_env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ENDPOINT_URL", "http://e1:1,ftp://e2"),
        ]);
        let e = resolve_with(&Args::default(), &bad_env, None).unwrap_err();
        assert!(e.to_string().starts_with("AWS_ENDPOINT_URL: "), "{e}");
        assert!(e.to_string().contains("configuration"), "{e}");
        let home = home_with(
            "[default]\naws_access_key_id = A\naws_secret_access_key = S\n",
            "[default]\nendpoint_url = http://p1:1,\n",
        );
        let e = resolve_with(&Args::default(), &env_of(&[]), Some(home.path())).unwrap_err();
        assert!(e.to_string().contains("endpoint_url"), "{e}");
    }

    #[test]
    fn the_nic_alone() {
        assert_eq!(nic_with(None, &env_of(&[])), "soft0");
        assert_eq!(
            nic_with(Some(""), &env_of(&[("HIPOBJ_NIC", "mlx5_1")])),
            "mlx5_1"
        );
        assert_eq!(
            nic_with(Some("mlx5_0"), &env_of(&[("HIPOBJ_NIC", "mlx5_1")])),
            "mlx5_0"
        );
    }

    #[test]
    fn the_secret_is_not_shown() {
        let r = Resolved {
            endpoint: "e".into(),
            region: "r".into(),
            access_key: "a".into(),
            secret_key: "very-secret".into(),
            nic: "n".into(),
        };
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("very-secret") && shown.contains("<redacted>"),
            "{shown}"
        );
    }
}
