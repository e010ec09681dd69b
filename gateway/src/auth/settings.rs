//! What requests are checked against: the access keys with their
//! tenants' policies ([`Credentials`]), the region and clock skew
//! ([`AuthSettings`]), and the bounds on chunks and presigned URLs.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::tenancy::Policy;

/// The largest aws-chunked chunk accepted (and so buffered): 16 MiB.
pub const MAX_CHUNK_SIZE: u64 = 16 << 20;

/// The longest a presigned URL may be valid: 7 days, in seconds.
pub const MAX_PRESIGNED_EXPIRES: u64 = 604_800;

/// The access keys this front accepts, each with its secret and the
/// tenant's [`Policy`] (what it may reach, and as whom).
#[derive(Clone, Default)]
pub struct Credentials {
    keys: HashMap<String, Entry>,
}

#[derive(Clone)]
struct Entry {
    secret: String,
    policy: Arc<Policy>,
}

impl Credentials {
    /// The credentials of `pairs`, each unrestricted; where an access key
    /// is listed twice, the first one wins.
    pub fn new(pairs: &[crate::config::KeyPair]) -> Credentials {
        let tenants: Vec<crate::config::Tenant> = pairs.iter().cloned().map(Into::into).collect();
        Credentials::of_tenants(&tenants)
    }

    /// The credentials of `tenants`, each with its policy; where an access
    /// key is listed twice, the first one wins.
    pub fn of_tenants(tenants: &[crate::config::Tenant]) -> Credentials {
        let mut keys = HashMap::with_capacity(tenants.len());
        for t in tenants {
            keys.entry(t.keys.access_key.clone())
                .or_insert_with(|| Entry {
                    secret: t.keys.secret_key.clone(),
                    policy: Arc::new(t.policy.clone()),
                });
        }
        Credentials { keys }
    }

    /// The secret of `access_key`, if it is known.
    pub fn secret(&self, access_key: &str) -> Option<&str> {
        self.keys.get(access_key).map(|e| e.secret.as_str())
    }

    /// The policy of `access_key`, if it is known.
    pub fn policy(&self, access_key: &str) -> Option<&Arc<Policy>> {
        self.keys.get(access_key).map(|e| &e.policy)
    }

    /// How many access keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        f.debug_struct("Credentials")
            .field("access_keys", &ids)
            .finish_non_exhaustive()
    }
}

/// How requests are checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSettings {
    /// The region every credential scope must name.
    pub region: String,
    /// How far a request's date may be from now, either way (S3: 15 min).
    pub max_skew: Duration,
    /// A second name for `x-amz-rdma-token` (Dell ObjectScale's clients send
    /// `x-rdma-info`), lowercase; `None`: only the standard name.
    pub token_alias: Option<String>,
    /// Requests with no authentication at all go to the store unsigned
    /// (its ACLs and policies decide); `false`: they are refused (403).
    pub anonymous_to_store: bool,
}

impl Default for AuthSettings {
    /// `us-east-1`, 15 minutes.
    fn default() -> AuthSettings {
        AuthSettings {
            region: "us-east-1".to_string(),
            max_skew: Duration::from_secs(15 * 60),
            token_alias: None,
            anonymous_to_store: false,
        }
    }
}
