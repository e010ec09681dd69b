//! Signing of outbound requests to the store, with aws-sigv4 in S3's mode.

use std::time::SystemTime;

use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST};

use super::canonical::{
    self, STREAMING_PAYLOAD, STREAMING_PAYLOAD_TRAILER, STREAMING_UNSIGNED_TRAILER,
    UNSIGNED_PAYLOAD,
};
use super::AuthError;

/// Headers never signed: hop-by-hop ones (a proxy may change them) and
/// those aws-sigv4 leaves out by default.
const UNSIGNED_HEADERS: &[&str] = &[
    "authorization",
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
    // Set by the signer itself.
    "x-amz-date",
    "x-amz-content-sha256",
];

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
pub fn sign_request(
    req: &mut http::Request<crate::body::Body>,
    access_key: &str,
    secret_key: &str,
    region: &str,
    payload_hash: &str,
    now: SystemTime,
) -> Result<(), AuthError> {
    let hash_ok = matches!(
        payload_hash,
        UNSIGNED_PAYLOAD
            | STREAMING_PAYLOAD
            | STREAMING_PAYLOAD_TRAILER
            | STREAMING_UNSIGNED_TRAILER
    ) || canonical::is_hex64(payload_hash);
    if !hash_ok {
        return Err(AuthError::Signing(
            "the payload hash is neither UNSIGNED-PAYLOAD nor a hex SHA-256".into(),
        ));
    }
    if !canonical::in_signable_range(now) {
        return Err(AuthError::Signing(
            "the signing time is outside 1970..=9999".into(),
        ));
    }
    if access_key.is_empty() || region.is_empty() {
        return Err(AuthError::Signing("empty access key or region".into()));
    }

    if !req.headers().contains_key(HOST) {
        let uri = req.uri();
        let host = uri.host().ok_or_else(|| {
            AuthError::Signing("the request has neither a Host header nor an absolute URI".into())
        })?;
        let default_port = match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") | None => Some(80),
            Some(_) => None,
        };
        let value = match uri.port_u16() {
            Some(p) if Some(p) != default_port => format!("{host}:{p}"),
            _ => host.to_string(),
        };
        let value =
            HeaderValue::from_str(&value).map_err(|_| AuthError::Signing("invalid host".into()))?;
        req.headers_mut().insert(HOST, value);
    }
    for name in [AUTHORIZATION.as_str(), "x-amz-date", "x-amz-content-sha256"] {
        req.headers_mut().remove(name);
    }

    let creds = aws_credential_types::Credentials::new(
        access_key,
        secret_key,
        None,
        None,
        "hipobj-gateway",
    );
    let identity = creds.into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(canonical::SERVICE)
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| AuthError::Signing(e.to_string()))?
        .into();

    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(req.headers().len());
    for (name, value) in req.headers() {
        if UNSIGNED_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = value
            .to_str()
            .map_err(|_| AuthError::Signing(format!("the value of header {name} is not ASCII")))?;
        headers.push((name.as_str(), value));
    }
    let uri = req.uri().to_string();
    let signable = SignableRequest::new(
        req.method().as_str(),
        uri.as_str(),
        headers.into_iter(),
        SignableBody::Precomputed(payload_hash.to_string()),
    )
    .map_err(|e| AuthError::Signing(e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| AuthError::Signing(e.to_string()))?
        .into_parts();
    let (new_headers, _params) = instructions.into_parts();

    for header in new_headers {
        let name = HeaderName::from_bytes(header.name().as_bytes())
            .map_err(|_| AuthError::Signing("aws-sigv4 returned an invalid header name".into()))?;
        let mut value = HeaderValue::from_str(header.value()).map_err(|_| {
            AuthError::Signing(format!(
                "the {name} header would not be a valid header value"
            ))
        })?;
        value.set_sensitive(header.sensitive() || name == AUTHORIZATION);
        req.headers_mut().insert(name, value);
    }
    Ok(())
}
