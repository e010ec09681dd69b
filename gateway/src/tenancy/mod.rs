//! What each tenant may reach: the buckets an access key may touch and the
//! store identity its requests are signed with.
//!
//! - [`policy`]: [`Policy`] (a tenant's [`BucketScope`] and optional store
//!   credentials) and the parsing of `buckets=` and `upstream=`.
//! - [`authorize`](mod@authorize): the check every request passes after its signature
//!   and before anything reaches the store: the bucket it names, the
//!   source bucket of a copy, and the service-level requests a restricted
//!   tenant may make (ListBuckets only).
//! - [`list_buckets`]: ListBuckets' answer narrowed to the tenant's
//!   buckets.
//! - [`StoreIdentity`]: the request extension that makes the upstream sign
//!   with the tenant's own store credentials.

pub mod authorize;
pub mod list_buckets;
pub mod policy;

pub use authorize::authorize;
pub use policy::{BucketScope, Policy, PolicyError};

use std::sync::Arc;

use crate::keys::KeyPair;

/// A request extension: the store credentials this request is signed
/// with instead of the upstream's own (a tenant's `upstream=`).
#[derive(Clone, Debug)]
pub struct StoreIdentity(pub Arc<KeyPair>);

/// A request extension: the client's request was anonymous, and so is
/// the request to the store (sent unsigned).
#[derive(Clone, Copy, Debug)]
pub struct Anonymous;

impl StoreIdentity {
    /// Copies the identity of the client's request (`from`) onto a request
    /// to the store (`to`), if it has one (a tenant's store key, or none at
    /// all: [`Anonymous`]).
    pub fn carry(from: &http::Extensions, to: &mut http::Extensions) {
        if let Some(id) = from.get::<StoreIdentity>() {
            to.insert(id.clone());
        }
        if from.get::<Anonymous>().is_some() {
            to.insert(Anonymous);
        }
    }
}
