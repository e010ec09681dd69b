//! The credentials file (`--credentials-file`): the key pairs of several
//! tenants, one per line, fields separated by whitespace:
//!
//! ```text
//! ACCESS_KEY SECRET_KEY [buckets=NAME,NAME,...] [upstream=ACCESS:SECRET]
//! ```
//!
//! Blank lines and lines starting with `#` are ignored. The optional
//! fields are the tenant's [`crate::tenancy::Policy`]: the buckets
//! it may reach (all without the field) and the store credentials its
//! requests are signed with (the gateway's own without it).
//!
//! The file must belong to the gateway's user (or root) and be writable by
//! nobody else. Errors name the file and the line, never a secret.

use std::path::{Path, PathBuf};

use crate::config::{KeyPair, Tenant};
use crate::tenancy::{Policy, PolicyError};

/// Why a credentials file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsFileError {
    /// It cannot be read.
    #[error("the credentials file {path} cannot be read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Others than its owner's group may change it.
    #[error(
        "the credentials file {path} is writable by its group or others (mode {mode:o}): \
         anyone there could add a key; chmod go-w it"
    )]
    Writable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It belongs to another user than the gateway's (or root).
    #[error(
        "the credentials file {path} belongs to uid {owner}, not to the gateway's user ({me}) or root: \
         its owner could change the keys; chown it"
    )]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The gateway's effective uid.
        me: u32,
    },
    /// A line is not a key pair.
    #[error("the credentials file {path}, line {line}: {why}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong (never the line's text).
        why: LineError,
    },
}

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Fewer than two fields.
    #[error("expected `ACCESS_KEY SECRET_KEY [buckets=...] [upstream=...]`, found {0} field(s)")]
    Fields(usize),
    /// A policy field that cannot be used.
    #[error("{0}")]
    Policy(PolicyError),
    /// The access key holds a character it cannot hold in a signature's
    /// `Credential=` (a `/`, a `,`, `=` or a non-ASCII or control byte).
    #[error("the access key holds a character that cannot be signed with (only printable ASCII without `/`, `,` and `=`)")]
    AccessKey,
    /// The secret key holds a non-ASCII or control byte.
    #[error("the secret key holds a character other than printable ASCII")]
    SecretKey,
    /// The access key is given twice (on another line, or by
    /// `--access-key`).
    #[error("the access key {0} is given twice")]
    Duplicate(String),
}

/// The tenants of `text`, in order; `taken` are the access keys already
/// given (by `--access-key`), which a line may not repeat. Errors carry the
/// line's number.
pub fn parse(text: &str, taken: &[&str]) -> Result<Vec<Tenant>, (usize, LineError)> {
    let mut tenants: Vec<Tenant> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [access, secret, ref extra @ ..] = fields[..] else {
            return Err((n, LineError::Fields(fields.len())));
        };
        if !access
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b',' | b'='))
        {
            return Err((n, LineError::AccessKey));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err((n, LineError::SecretKey));
        }
        if taken.contains(&access) || tenants.iter().any(|t| t.keys.access_key == access) {
            return Err((n, LineError::Duplicate(access.to_string())));
        }
        let mut policy = Policy::unrestricted();
        let mut seen: Vec<&str> = Vec::new();
        for field in extra {
            let name = field.split_once('=').map_or(*field, |(name, _)| name);
            if seen.contains(&name) {
                return Err((n, LineError::Policy(PolicyError::Twice(name.to_string()))));
            }
            policy
                .apply_field(field)
                .map_err(|e| (n, LineError::Policy(e)))?;
            seen.push(name);
        }
        tenants.push(Tenant {
            keys: KeyPair {
                access_key: access.to_string(),
                secret_key: secret.to_string(),
            },
            policy,
        });
    }
    Ok(tenants)
}

/// Reads the tenants of the file at `path` (see [`parse`]). A file that
/// belongs to another user than the gateway's (or root), or that its
/// group or others may write, is refused; one they may read is served
/// with a warning.
pub fn read(path: &Path, taken: &[&str]) -> Result<Vec<Tenant>, CredentialsFileError> {
    let read_err = |source| CredentialsFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        // The gateway's effective uid: the owner of its own /proc entry.
        let me = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
        let owner = meta.uid();
        if owner != me && owner != 0 {
            return Err(CredentialsFileError::Owner {
                path: path.to_path_buf(),
                owner,
                me,
            });
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(CredentialsFileError::Writable {
                path: path.to_path_buf(),
                mode,
            });
        }
        if mode & 0o044 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the credentials file is readable by its group or others: chmod go-r it"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    parse(&text, taken).map_err(|(line, why)| CredentialsFileError::Line {
        path: path.to_path_buf(),
        line,
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: &str, s: &str) -> Tenant {
        KeyPair {
            access_key: a.into(),
            secret_key: s.into(),
        }
        .into()
    }

    #[test]
    fn pairs_comments_and_blank_lines() {
        let text = "# tenants\n\ntenant-a  secret/a+1\n  \t\n   # indented comment\n\ttenant-b\tsecret-b \r\n";
        assert_eq!(
            parse(text, &["hipobj-test-key"]).unwrap(),
            [pair("tenant-a", "secret/a+1"), pair("tenant-b", "secret-b")]
        );
        assert_eq!(parse("", &[]).unwrap(), []);
        assert_eq!(parse("# nothing\n", &[]).unwrap(), []);
    }

    #[test]
    fn a_malformed_line_is_named_and_its_secret_is_not_shown() {
        let cases: [(&str, usize, LineError); 9] = [
            ("a s\nonly-a-key\n", 2, LineError::Fields(1)),
            (
                "\n\na s extra-secret\n",
                3,
                LineError::Policy(PolicyError::Bare),
            ),
            (
                "a s buckets=alpha buckets=beta\n",
                1,
                LineError::Policy(PolicyError::Twice("buckets".into())),
            ),
            (
                "a s upstream=s3cr3t\n",
                1,
                LineError::Policy(PolicyError::Upstream),
            ),
            ("a/b s3cr3t\n", 1, LineError::AccessKey),
            ("a,b s3cr3t\n", 1, LineError::AccessKey),
            ("k=v s3cr3t\n", 1, LineError::AccessKey),
            ("a s\u{e9}cret\n", 1, LineError::SecretKey),
            ("a s1\n# c\na s2\n", 3, LineError::Duplicate("a".into())),
        ];
        for (text, line, why) in cases {
            let e = parse(text, &[]).unwrap_err();
            assert_eq!(e, (line, why.clone()), "{text:?}");
            let shown = why.to_string();
            for secret in ["extra-secret", "s\u{e9}cret", "s1", "s2", "s3cr3t"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        assert_eq!(
            parse("hipobj-test-key other\n", &["hipobj-test-key"]).unwrap_err(),
            (1, LineError::Duplicate("hipobj-test-key".into()))
        );
    }

    #[test]
    fn the_file_is_read_and_its_errors_say_where() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds");
        std::fs::write(&path, "t1 s1\nt2 s2\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read(&path, &[]).unwrap(),
            [pair("t1", "s1"), pair("t2", "s2")]
        );
        // Readable by others: served (with a warning).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read(&path, &[]).unwrap().len(), 2);
        // Writable by others: refused.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = read(&path, &[]).unwrap_err();
        assert!(
            matches!(e, CredentialsFileError::Writable { mode: 0o622, .. }),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "t1 s1\nbroken-line-with-no-secret\n").unwrap();
        let e = read(&path, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the credentials file {}, line 2: expected `ACCESS_KEY SECRET_KEY [buckets=...] [upstream=...]`, found 1 field(s)",
                path.display()
            )
        );
        let e = read(&dir.path().join("missing"), &[]).unwrap_err();
        assert!(matches!(e, CredentialsFileError::Read { .. }), "{e}");
    }

    #[test]
    fn policy_fields() {
        let text = "a sa buckets=alpha,team-* upstream=RGWA:rgw-secret-a\nb sb buckets=*\nc sc\n";
        let t = parse(text, &[]).unwrap();
        assert!(t[0].policy.buckets.allows("alpha") && t[0].policy.buckets.allows("team-x"));
        assert!(!t[0].policy.buckets.allows("beta"));
        assert_eq!(t[0].policy.store.as_ref().unwrap().access_key, "RGWA");
        assert!(t[1].policy.buckets.is_all() && t[1].policy.store.is_none());
        assert_eq!(t[2].policy, Policy::unrestricted());
    }

    /// A file of another user (not root) is refused: its owner could add a
    /// key. Needs root to chown; skipped otherwise.
    #[test]
    fn a_file_of_another_user_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds");
        std::fs::write(&path, "t1 s1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if std::os::unix::fs::chown(&path, Some(65534), None).is_err() {
            eprintln!("skipped: chown needs root");
            return;
        }
        let e = read(&path, &[]).unwrap_err();
        assert!(
            matches!(e, CredentialsFileError::Owner { owner: 65534, .. }),
            "{e}"
        );
    }
}
