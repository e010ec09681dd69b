//! What the upstream request's payload is signed as: [`Payload`].

/// What to sign the upstream request's payload as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `UNSIGNED-PAYLOAD`: the body is sent unhashed.
    Unsigned,
    /// The body's SHA-256, lowercase hex (64 characters).
    Sha256(String),
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: an aws-chunked body without
    /// chunk signatures, ending in a trailing checksum.
    StreamingUnsignedTrailer,
}

impl Payload {
    /// The value for `x-amz-content-sha256` and the canonical request.
    pub fn hash(&self) -> &str {
        match self {
            Payload::Unsigned => "UNSIGNED-PAYLOAD",
            Payload::Sha256(hex) => hex,
            Payload::StreamingUnsignedTrailer => "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        }
    }
}
