//! Why a request (or its body) failed authentication, with the S3 error code
//! and HTTP status each reason answers with.
//!
//! Messages never carry secrets, signatures or whole tokens: only the names
//! of headers and parameters, and values that are not secret (a region, a
//! date, an access key id is never echoed either).

use http::StatusCode;

/// Why SigV4 verification (or signing) failed.
///
/// Body errors (a chunk signature, the payload hash, a trailing checksum, a
/// truncated aws-chunked body) are yielded by the bodies [`super::decode_body`] returns, boxed as
/// this type: `err.downcast_ref::<AuthError>()` recovers it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// 403 `AccessDenied`: anonymous request, unsigned `x-amz-*` or `host`
    /// header, an unusable date, ...
    #[error("Access Denied: {0}")]
    AccessDenied(String),
    /// 403 `AccessDenied` "Request has expired": a presigned URL past its
    /// `X-Amz-Expires`.
    #[error("Request has expired")]
    Expired,
    /// 403 `AccessDenied` "Request is not valid yet": a presigned URL whose
    /// `X-Amz-Date` lies further in the future than the tolerated skew.
    #[error("Request is not valid yet")]
    NotYetValid,
    /// 403 `SignatureDoesNotMatch`: the request signature is wrong.
    #[error("The request signature we calculated does not match the signature you provided. Check your key and signing method.")]
    SignatureDoesNotMatch,
    /// 403 `SignatureDoesNotMatch`: a chunk (or trailer) signature of an
    /// aws-chunked body is wrong.
    #[error("The {0} signature we calculated does not match the signature you provided")]
    ChunkSignatureDoesNotMatch(&'static str),
    /// 403 `InvalidAccessKeyId`: the access key is not known.
    #[error("The AWS Access Key Id you provided does not exist in our records.")]
    InvalidAccessKeyId,
    /// 403 `RequestTimeTooSkewed`: the request date is too far from now.
    #[error("The difference between the request time and the current time is too large.")]
    RequestTimeTooSkewed,
    /// 400 `AuthorizationHeaderMalformed`.
    #[error("The authorization header is malformed; {0}")]
    AuthorizationHeaderMalformed(String),
    /// 400 `AuthorizationQueryParametersError`: a malformed presigned URL.
    #[error("Error parsing the X-Amz-* query parameters; {0}")]
    AuthorizationQueryParametersError(String),
    /// 400 `MissingSecurityHeader`: a header SigV4 for S3 requires is absent.
    #[error("Your request was missing a required header: {0}")]
    MissingSecurityHeader(&'static str),
    /// 400 `XAmzContentSHA256Mismatch`: the body does not hash to the
    /// `x-amz-content-sha256` the client signed.
    #[error("The provided 'x-amz-content-sha256' header does not match what was computed.")]
    XAmzContentSha256Mismatch,
    /// 400 `BadDigest`: the decoded bytes of an aws-chunked body do not
    /// match the trailing checksum (`x-amz-checksum-*`) the client sent; the
    /// algorithm's S3 name (`CRC32`, ...).
    #[error("The {0} you specified did not match the calculated checksum.")]
    BadDigest(&'static str),
    /// 400 `InvalidArgument`: a header or parameter has a value S3 rejects.
    #[error("{0}")]
    InvalidArgument(String),
    /// 400 `InvalidRequest`: e.g. a malformed aws-chunked body.
    #[error("{0}")]
    InvalidRequest(String),
    /// 400 `IncompleteBody`: an aws-chunked body ended early, or its decoded
    /// length differs from `x-amz-decoded-content-length`.
    #[error("{0}")]
    IncompleteBody(String),
    /// 400 `MalformedTrailerError`: the trailing headers of an aws-chunked
    /// body are malformed, or a declared one is missing.
    #[error("{0}")]
    MalformedTrailer(String),
    /// 501 `NotImplemented`: SigV4a and other schemes this front does
    /// not serve.
    #[error("{0}")]
    NotImplemented(String),
    /// 503 `SlowDown`: the process's budget of buffered aws-chunked bytes
    /// (or the access key's share of it) is spent.
    #[error("{0}")]
    SlowDown(String),
    /// 500 `InternalError`: an outbound request could not be signed.
    #[error("cannot sign the upstream request: {0}")]
    Signing(String),
}

impl AuthError {
    /// The S3 error code.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::AccessDenied(_) | AuthError::Expired | AuthError::NotYetValid => {
                "AccessDenied"
            }
            AuthError::SignatureDoesNotMatch | AuthError::ChunkSignatureDoesNotMatch(_) => {
                "SignatureDoesNotMatch"
            }
            AuthError::InvalidAccessKeyId => "InvalidAccessKeyId",
            AuthError::RequestTimeTooSkewed => "RequestTimeTooSkewed",
            AuthError::AuthorizationHeaderMalformed(_) => "AuthorizationHeaderMalformed",
            AuthError::AuthorizationQueryParametersError(_) => "AuthorizationQueryParametersError",
            AuthError::MissingSecurityHeader(_) => "MissingSecurityHeader",
            AuthError::XAmzContentSha256Mismatch => "XAmzContentSHA256Mismatch",
            AuthError::BadDigest(_) => "BadDigest",
            AuthError::InvalidArgument(_) => "InvalidArgument",
            AuthError::InvalidRequest(_) => "InvalidRequest",
            AuthError::IncompleteBody(_) => "IncompleteBody",
            AuthError::MalformedTrailer(_) => "MalformedTrailerError",
            AuthError::NotImplemented(_) => "NotImplemented",
            AuthError::SlowDown(_) => "SlowDown",
            AuthError::Signing(_) => "InternalError",
        }
    }

    /// The HTTP status: 403 for signature and credential problems, 400 for
    /// malformed requests, 501 for unsupported schemes, 500 for signing
    /// failures.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::AccessDenied(_)
            | AuthError::Expired
            | AuthError::NotYetValid
            | AuthError::SignatureDoesNotMatch
            | AuthError::ChunkSignatureDoesNotMatch(_)
            | AuthError::InvalidAccessKeyId
            | AuthError::RequestTimeTooSkewed => StatusCode::FORBIDDEN,
            AuthError::AuthorizationHeaderMalformed(_)
            | AuthError::AuthorizationQueryParametersError(_)
            | AuthError::MissingSecurityHeader(_)
            | AuthError::XAmzContentSha256Mismatch
            | AuthError::BadDigest(_)
            | AuthError::InvalidArgument(_)
            | AuthError::InvalidRequest(_)
            | AuthError::IncompleteBody(_)
            | AuthError::MalformedTrailer(_) => StatusCode::BAD_REQUEST,
            AuthError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            AuthError::SlowDown(_) => StatusCode::SERVICE_UNAVAILABLE,
            AuthError::Signing(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses() {
        let all: Vec<(AuthError, &str, u16)> = vec![
            (AuthError::AccessDenied("x".into()), "AccessDenied", 403),
            (AuthError::Expired, "AccessDenied", 403),
            (AuthError::SlowDown("x".into()), "SlowDown", 503),
            (AuthError::NotYetValid, "AccessDenied", 403),
            (
                AuthError::SignatureDoesNotMatch,
                "SignatureDoesNotMatch",
                403,
            ),
            (
                AuthError::ChunkSignatureDoesNotMatch("chunk"),
                "SignatureDoesNotMatch",
                403,
            ),
            (AuthError::InvalidAccessKeyId, "InvalidAccessKeyId", 403),
            (AuthError::RequestTimeTooSkewed, "RequestTimeTooSkewed", 403),
            (
                AuthError::AuthorizationHeaderMalformed("x".into()),
                "AuthorizationHeaderMalformed",
                400,
            ),
            (
                AuthError::AuthorizationQueryParametersError("x".into()),
                "AuthorizationQueryParametersError",
                400,
            ),
            (
                AuthError::MissingSecurityHeader("x-amz-content-sha256"),
                "MissingSecurityHeader",
                400,
            ),
            (
                AuthError::XAmzContentSha256Mismatch,
                "XAmzContentSHA256Mismatch",
                400,
            ),
            (AuthError::BadDigest("CRC32"), "BadDigest", 400),
            (
                AuthError::InvalidArgument("x".into()),
                "InvalidArgument",
                400,
            ),
            (AuthError::InvalidRequest("x".into()), "InvalidRequest", 400),
            (AuthError::IncompleteBody("x".into()), "IncompleteBody", 400),
            (
                AuthError::MalformedTrailer("x".into()),
                "MalformedTrailerError",
                400,
            ),
            (AuthError::NotImplemented("x".into()), "NotImplemented", 501),
            (AuthError::Signing("x".into()), "InternalError", 500),
        ];
        for (e, code, status) in all {
            assert_eq!(e.code(), code, "{e:?}");
            assert_eq!(e.status().as_u16(), status, "{e:?}");
        }
        assert_eq!(AuthError::Expired.to_string(), "Request has expired");
    }
}
