//! SigV4 authentication of incoming requests and signing of upstream ones.
//!
//! - [`verify`] checks a request's signature, header-signed
//!   (`Authorization: AWS4-HMAC-SHA256 ...`) or presigned (`X-Amz-*` query
//!   parameters), against the configured [`Credentials`], and says in
//!   [`Verified::body`] what the client signed about the body. Signature
//!   Version 2 (`Authorization: AWS key:signature`, or `AWSAccessKeyId`,
//!   `Signature` and `Expires` in the query) is verified by `sigv2.rs`.
//! - [`post_form`] checks a browser-based upload's form: its SigV4 or SigV2
//!   form signature and its POST policy.
//! - [`decode_body`] turns the body into what the client meant: aws-chunked
//!   decoded with every chunk signature checked in order and a trailing
//!   checksum (`x-amz-trailer: x-amz-checksum-*`) checked against the
//!   decoded bytes (400 `BadDigest`), or a plain body whose SHA-256 is
//!   checked at its end. It streams; at most one chunk is buffered, two
//!   with a trailing checksum, whose last chunk is held back until the
//!   checksum has checked out, so that a consumer never gets the whole of
//!   a body whose checksum is wrong. The trailer is consumed here: the
//!   decoded body does not carry it on ([`decode_body_with_trailers`]
//!   hands its headers over; the proxy passes a trailing checksum on to
//!   the store, `crate::rechunk`).
//! - [`sign_request`] signs an outbound request to the store with aws-sigv4,
//!   in S3's mode (single percent-encoding, no path normalization).
//!
//! The canonical request follows AWS SigV4 for S3: the canonical URI is the
//! raw path as received (S3 neither re-encodes nor normalizes it); query
//! keys and values are decoded then re-encoded with the unreserved set
//! `A-Za-z0-9-_.~` and sorted; signed header values are trimmed with runs
//! of spaces collapsed. As Garage does, `host` and every `x-amz-*` header
//! present must be signed; an unsigned `x-amz-rdma-token` is refused with
//! its own message.

mod canonical;
pub mod chunk_budget;
mod chunk_parser;
mod chunked;
mod error;
pub mod post_form;
mod sign;
mod sigv2;
mod verify;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::tenancy::Policy;

pub use chunked::{decode_body, decode_body_with_trailers, TrailingHeaders};
pub use error::AuthError;
pub use sign::sign_request;
pub use verify::{is_anonymous, verify, verify_addressed};

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

/// What a verified request says about its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyMode {
    /// `UNSIGNED-PAYLOAD`.
    Unsigned,
    /// A hex SHA-256 of the body the client signed (the empty body's hash
    /// for GET etc.), lowercase: checked while the body streams.
    Sha256(String),
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` (aws-chunked, per-chunk
    /// signatures), optionally `-TRAILER`.
    ChunkedSigned {
        /// `-TRAILER`: trailing headers follow, signed.
        trailer: bool,
    },
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER` (aws-chunked without chunk
    /// signatures, trailing checksum).
    ChunkedUnsigned,
}

/// A request whose signature checked out.
#[derive(Clone)]
pub struct Verified {
    /// The access key that signed it.
    pub access_key: String,
    /// What the client signed about the body.
    pub body: BodyMode,
    /// From `x-amz-decoded-content-length` for aws-chunked bodies.
    pub decoded_length: Option<u64>,
    /// The headers the signature names (SigV4's SignedHeaders, lowercase);
    /// empty under SigV2, whose string to sign covers `x-amz-*` headers and
    /// no other by name.
    pub signed_headers: Vec<String>,
    /// What chunk verification needs.
    chain: ChainContext,
}

impl Verified {
    /// The trailing headers the request declared in `x-amz-trailer`
    /// (lowercase), which an aws-chunked body must end with.
    pub fn declared_trailers(&self) -> &[String] {
        &self.chain.declared_trailers
    }
}

impl fmt::Debug for Verified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verified")
            .field("access_key", &self.access_key)
            .field("body", &self.body)
            .field("decoded_length", &self.decoded_length)
            .field("declared_trailers", &self.chain.declared_trailers)
            .finish_non_exhaustive()
    }
}

/// The signing context of a verified request, for the chunk signatures
/// chained from its signature.
#[derive(Clone)]
pub(crate) struct ChainContext {
    /// The SigV4 signing key (derived from the secret, date, region, `s3`).
    pub(crate) signing_key: Vec<u8>,
    /// `yyyymmddThhmmssZ` of the request.
    pub(crate) amz_date: String,
    /// `yyyymmdd/region/s3/aws4_request`.
    pub(crate) scope: String,
    /// The request's signature (lowercase hex): the seed of the chain.
    pub(crate) seed_signature: String,
    /// Trailer names from `x-amz-trailer`, lowercase.
    pub(crate) declared_trailers: Vec<String>,
}
