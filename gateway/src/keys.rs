//! A key pair: what a client signs with, and what the gateway signs for
//! the store with (a leaf: the configuration and the tenants' policies
//! both hold key pairs).

/// An access key and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPair {
    /// Access key id.
    pub access_key: String,
    /// Secret access key (never logged).
    pub secret_key: String,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish()
    }
}
