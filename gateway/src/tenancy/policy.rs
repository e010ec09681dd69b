//! A tenant's policy: the buckets it may reach and the store credentials
//! its requests are signed with.
//!
//! In the credentials file these are optional fields after the key pair:
//!
//! ```text
//! tenant-a  secret-a  buckets=alpha,logs-a-*  upstream=RGW_KEY_A:RGW_SECRET_A
//! ```
//!
//! - `buckets=NAME,NAME,...`: the buckets the tenant may list, read, write,
//!   create and delete. A name ending in `*` stands for every bucket whose
//!   name starts with what precedes it; `*` alone is every bucket. Without
//!   the field, every bucket.
//! - `upstream=ACCESS:SECRET`: the tenant's requests reach the store signed
//!   with these credentials instead of the gateway's own, so that the
//!   store's own access control (RGW users, MinIO policies) applies to
//!   them as well. Without the field, the gateway's store credentials.

use std::fmt;
use std::sync::Arc;

use crate::keys::KeyPair;

/// Which buckets a tenant may reach.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum BucketScope {
    /// Every bucket (no `buckets=` field, or `buckets=*`).
    #[default]
    All,
    /// Only these: exact names and prefixes (a name ending in `*`).
    Only(Vec<BucketPattern>),
}

/// One entry of a `buckets=` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketPattern {
    /// This bucket.
    Exact(String),
    /// Every bucket whose name starts with this.
    Prefix(String),
}

impl BucketPattern {
    fn matches(&self, bucket: &str) -> bool {
        match self {
            BucketPattern::Exact(n) => n == bucket,
            BucketPattern::Prefix(p) => bucket.starts_with(p.as_str()),
        }
    }
}

impl BucketScope {
    /// Whether `bucket` (a decoded bucket name) is in the scope.
    pub fn allows(&self, bucket: &str) -> bool {
        match self {
            BucketScope::All => true,
            BucketScope::Only(list) => list.iter().any(|p| p.matches(bucket)),
        }
    }

    /// Whether the scope is every bucket.
    pub fn is_all(&self) -> bool {
        matches!(self, BucketScope::All)
    }

    /// Parses the value of `buckets=`.
    pub fn parse(value: &str) -> Result<BucketScope, PolicyError> {
        let mut list = Vec::new();
        for name in value.split(',') {
            if name == "*" {
                return if value == "*" {
                    Ok(BucketScope::All)
                } else {
                    Err(PolicyError::Buckets("`*` stands alone".into()))
                };
            }
            let (stem, prefix) = match name.strip_suffix('*') {
                Some(stem) => (stem, true),
                None => (name, false),
            };
            if stem.is_empty() {
                return Err(PolicyError::Buckets("an empty bucket name".into()));
            }
            if !stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
            {
                return Err(PolicyError::Buckets(format!(
                    "{name:?}: a bucket name holds letters, digits, `.`, `-` and `_` (and `*` at its end)"
                )));
            }
            if !prefix && !(3..=63).contains(&stem.len()) {
                return Err(PolicyError::Buckets(format!(
                    "{name:?}: a bucket name is 3 to 63 characters long"
                )));
            }
            list.push(if prefix {
                BucketPattern::Prefix(stem.to_string())
            } else {
                BucketPattern::Exact(stem.to_string())
            });
        }
        Ok(BucketScope::Only(list))
    }
}

impl fmt::Debug for BucketScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketScope::All => f.write_str("*"),
            BucketScope::Only(list) => {
                let names: Vec<String> = list
                    .iter()
                    .map(|p| match p {
                        BucketPattern::Exact(n) => n.clone(),
                        BucketPattern::Prefix(p) => format!("{p}*"),
                    })
                    .collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// What a tenant may reach, and as whom.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The buckets it may reach.
    pub buckets: BucketScope,
    /// The store credentials its requests are signed with (`None`: the
    /// gateway's own).
    pub store: Option<Arc<KeyPair>>,
}

impl Policy {
    /// Every bucket, signed as the gateway: what a key without policy
    /// fields gets.
    pub fn unrestricted() -> Policy {
        Policy::default()
    }

    /// Applies one `name=value` field of a credentials-file line.
    pub fn apply_field(&mut self, field: &str) -> Result<(), PolicyError> {
        let Some((name, value)) = field.split_once('=') else {
            // Not shown: it may be a secret typed in the wrong place.
            return Err(PolicyError::Bare);
        };
        match name {
            "buckets" => self.buckets = BucketScope::parse(value)?,
            "upstream" => {
                let (access, secret) = value.split_once(':').ok_or(PolicyError::Upstream)?;
                if access.is_empty()
                    || secret.is_empty()
                    || !access.bytes().all(|b| b.is_ascii_graphic())
                    || !secret.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(PolicyError::Upstream);
                }
                self.store = Some(Arc::new(KeyPair {
                    access_key: access.to_string(),
                    secret_key: secret.to_string(),
                }));
            }
            other => return Err(PolicyError::Field(field_name(other))),
        }
        Ok(())
    }
}

/// A field's name for an error, cut short, never its value (which may be
/// a secret).
fn field_name(name: &str) -> String {
    name.chars().take(32).collect()
}

/// Why a policy field cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A field after the key pair that is not `name=value`.
    #[error("a field after the key pair is not `name=value` (`buckets=...` or `upstream=...`)")]
    Bare,
    /// Not `buckets=` or `upstream=`.
    #[error("unknown field {0:?} (expected `buckets=NAME,...` or `upstream=ACCESS:SECRET`)")]
    Field(String),
    /// A `buckets=` list that does not parse.
    #[error("buckets=: {0}")]
    Buckets(String),
    /// An `upstream=` value that is not `ACCESS:SECRET` in printable ASCII.
    #[error("upstream= must be ACCESS:SECRET, both non-empty printable ASCII")]
    Upstream,
    /// A field given twice on one line.
    #[error("the field {0} is given twice")]
    Twice(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_lists() {
        assert_eq!(BucketScope::parse("*").unwrap(), BucketScope::All);
        let s = BucketScope::parse("alpha,logs-*,a.b_c").unwrap();
        assert!(s.allows("alpha"));
        assert!(s.allows("logs-"));
        assert!(s.allows("logs-2026"));
        assert!(s.allows("a.b_c"));
        assert!(!s.allows("alphabet"));
        assert!(!s.allows("alph"));
        assert!(!s.allows("logs"));
        assert!(!s.allows("beta"));
        assert!(!s.allows(""));
        assert_eq!(format!("{s:?}"), "alpha,logs-*,a.b_c");
        for bad in [
            "", "a,,b", "alpha,*", "*,alpha", "al/pha", "ab", "a b", "%61bc", "*x",
        ] {
            assert!(BucketScope::parse(bad).is_err(), "{bad:?}");
        }
        // A bare prefix star needs a stem.
        assert!(BucketScope::parse("*").unwrap().allows("anything"));
    }

    #[test]
    fn fields() {
        let mut p = Policy::unrestricted();
        p.apply_field("buckets=alpha").unwrap();
        p.apply_field("upstream=RGWKEY:rgw:secret/with+colon")
            .unwrap();
        assert!(p.buckets.allows("alpha") && !p.buckets.allows("beta"));
        let store = p.store.unwrap();
        assert_eq!(store.access_key, "RGWKEY");
        assert_eq!(store.secret_key, "rgw:secret/with+colon");
        let mut p = Policy::unrestricted();
        for bad in [
            "upstream=nocolon",
            "upstream=:secret",
            "upstream=key:",
            "bucket=alpha",
            "novalue",
        ] {
            assert!(p.apply_field(bad).is_err(), "{bad}");
        }
        // An error names the field, never its value.
        let e = p.apply_field("secretish=hunter2").unwrap_err().to_string();
        assert!(e.contains("secretish") && !e.contains("hunter2"), "{e}");
        let e = p
            .apply_field("upstream=AK-hunter2")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
    }
}
