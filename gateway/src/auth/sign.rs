//! Signing of outbound requests to the store, with aws-sigv4 in S3's mode
//! (the signer itself is `hipobj_net::sigv4`, shared with `hipobj-s3`).

use std::time::SystemTime;

use super::AuthError;

/// Signs an outbound request to the upstream store in place with aws-sigv4,
/// S3 settings (`percent_encoding_mode = Single`,
/// `uri_path_normalization_mode = Disabled`, `payload_checksum_kind =
/// XAmzSha256`), with `payload_hash` given as a string (`UNSIGNED-PAYLOAD`,
/// a `STREAMING-*` value or a hex SHA-256). Adds `Authorization`,
/// `X-Amz-Date` and `x-amz-content-sha256` (replacing any already there).
///
/// The request's URI must be absolute or the request must have a `Host`
/// header; a `Host` header is added from the URI when it has none (the port
/// left out when it is the scheme's default, as hyper does). The raw path is
/// signed as given. Every header but the hop-by-hop ones is signed, so set
/// them all before signing. Header values must be ASCII.
///
/// A thin wrapper of [`hipobj_net::sigv4::sign_headers`]; its errors are
/// [`AuthError::Signing`].
pub fn sign_request(
    req: &mut http::Request<crate::body::Body>,
    access_key: &str,
    secret_key: &str,
    region: &str,
    payload_hash: &str,
    now: SystemTime,
) -> Result<(), AuthError> {
    let method = req.method().clone();
    let uri = req.uri().clone();
    hipobj_net::sigv4::sign_headers(
        &method,
        &uri,
        req.headers_mut(),
        access_key,
        secret_key,
        region,
        payload_hash,
        now,
    )
    .map_err(|e| AuthError::Signing(e.to_string()))
}
