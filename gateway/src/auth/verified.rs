//! What a request whose signature checked out says: who signed it, and
//! what it signed about its body.

use std::fmt;

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
    pub(super) chain: ChainContext,
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
