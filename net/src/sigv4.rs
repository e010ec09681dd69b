//! SigV4 signing of outbound requests with aws-sigv4 in S3's mode: single
//! percent-encoding, no path normalization, `x-amz-content-sha256`. Every
//! header set before signing is signed (an RDMA token included), but the
//! hop-by-hop ones.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, HOST};
use http::{Method, Uri};

/// The payload hash of a request whose body is not signed.
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
/// aws-chunked with per-chunk signatures.
pub const STREAMING_PAYLOAD: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
/// aws-chunked with per-chunk signatures and a signed trailer.
pub const STREAMING_PAYLOAD_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
/// aws-chunked without chunk signatures, with a trailer.
pub const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
/// The hex SHA-256 of the empty payload.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The last second aws-sigv4 can format (9999-12-31T23:59:59Z).
const MAX_UNIX: u64 = 253_402_300_799;

/// Headers never signed besides the hop-by-hop ones ([`crate::HOP_BY_HOP`]:
/// a proxy may change them): those aws-sigv4 leaves out by default, and
/// the two the signer sets itself (signed as it sets them).
pub const UNSIGNED_HEADERS: &[&str] = &[
    "authorization",
    "expect",
    "user-agent",
    "x-amzn-trace-id",
    // Set by the signer itself.
    "x-amz-date",
    "x-amz-content-sha256",
];

/// Why a request could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SignError(String);

impl SignError {
    fn new(msg: impl Into<String>) -> SignError {
        SignError(msg.into())
    }
}

/// Whether `payload_hash` is one SigV4 accepts: `UNSIGNED-PAYLOAD`, a
/// `STREAMING-*` value or a hex SHA-256.
pub fn is_valid_payload_hash(payload_hash: &str) -> bool {
    matches!(
        payload_hash,
        UNSIGNED_PAYLOAD
            | STREAMING_PAYLOAD
            | STREAMING_PAYLOAD_TRAILER
            | STREAMING_UNSIGNED_TRAILER
    ) || (payload_hash.len() == 64 && payload_hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether `t` lies within the range aws-sigv4 can format without
/// panicking (1970 through 9999).
pub fn in_signable_range(t: SystemTime) -> bool {
    t.duration_since(UNIX_EPOCH)
        .is_ok_and(|d| d.as_secs() <= MAX_UNIX)
}

/// Adds a `Host` header from `uri` when `headers` have none (the port left
/// out when it is the scheme's default, as hyper does).
pub fn ensure_host(uri: &Uri, headers: &mut HeaderMap) -> Result<(), SignError> {
    if headers.contains_key(HOST) {
        return Ok(());
    }
    let host = uri.host().ok_or_else(|| {
        SignError::new("the request has neither a Host header nor an absolute URI")
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
    let value = HeaderValue::from_str(&value).map_err(|_| SignError::new("invalid host"))?;
    headers.insert(HOST, value);
    Ok(())
}

/// Signs an outbound request in place with aws-sigv4, S3 settings
/// (`percent_encoding_mode = Single`, `uri_path_normalization_mode =
/// Disabled`, `payload_checksum_kind = XAmzSha256`), with `payload_hash`
/// given as a string (`UNSIGNED-PAYLOAD`, a `STREAMING-*` value or a hex
/// SHA-256). Adds `Authorization`, `X-Amz-Date` and `x-amz-content-sha256`
/// (replacing any already there).
///
/// `uri` must be absolute or `headers` must have a `Host`; a `Host` header
/// is added from the URI when there is none (the port left out when it is
/// the scheme's default, as hyper does). The raw path is signed as given.
/// Every header but the hop-by-hop ones is signed, so set them all before
/// signing. Header values must be UTF-8.
#[allow(clippy::too_many_arguments)]
pub fn sign_headers(
    method: &Method,
    uri: &Uri,
    headers: &mut HeaderMap,
    access_key: &str,
    secret_key: &str,
    region: &str,
    payload_hash: &str,
    now: SystemTime,
) -> Result<(), SignError> {
    if !is_valid_payload_hash(payload_hash) {
        return Err(SignError::new(
            "the payload hash is neither UNSIGNED-PAYLOAD nor a hex SHA-256",
        ));
    }
    if !in_signable_range(now) {
        return Err(SignError::new("the signing time is outside 1970..=9999"));
    }
    if access_key.is_empty() || region.is_empty() {
        return Err(SignError::new("empty access key or region"));
    }

    ensure_host(uri, headers)?;
    for name in [AUTHORIZATION.as_str(), "x-amz-date", "x-amz-content-sha256"] {
        headers.remove(name);
    }

    let creds =
        aws_credential_types::Credentials::new(access_key, secret_key, None, None, "hipobj-net");
    let identity: aws_smithy_runtime_api::client::identity::Identity = creds.into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| SignError::new(e.to_string()))?
        .into();

    let mut list: Vec<(&str, &str)> = Vec::with_capacity(headers.len());
    for (name, value) in headers.iter() {
        if UNSIGNED_HEADERS.contains(&name.as_str()) || crate::HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        // UTF-8 (x-amz-meta-* may carry it): aws-sigv4 signs its bytes.
        let value = std::str::from_utf8(value.as_bytes())
            .map_err(|_| SignError::new(format!("the value of header {name} is not UTF-8")))?;
        list.push((name.as_str(), value));
    }
    let uri_text = uri.to_string();
    let signable = SignableRequest::new(
        method.as_str(),
        uri_text.as_str(),
        list.into_iter(),
        SignableBody::Precomputed(payload_hash.to_string()),
    )
    .map_err(|e| SignError::new(e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| SignError::new(e.to_string()))?
        .into_parts();
    let (new_headers, _params) = instructions.into_parts();

    let mut out = Vec::with_capacity(new_headers.len());
    for header in new_headers {
        let name = HeaderName::from_bytes(header.name().as_bytes())
            .map_err(|_| SignError::new("aws-sigv4 returned an invalid header name"))?;
        let mut value = HeaderValue::from_str(header.value()).map_err(|_| {
            SignError::new(format!(
                "the {name} header would not be a valid header value"
            ))
        })?;
        value.set_sensitive(header.sensitive() || name == AUTHORIZATION);
        out.push((name, value));
    }
    for (name, value) in out {
        headers.insert(name, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn sign_at(uri: &str, headers: &mut HeaderMap, hash: &str) -> Result<(), SignError> {
        let uri: Uri = uri.parse().unwrap();
        sign_headers(
            &Method::PUT,
            &uri,
            headers,
            "AK",
            "SK",
            "us-east-1",
            hash,
            at(NOW),
        )
    }

    #[test]
    fn the_token_is_signed() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-rdma-token", HeaderValue::from_static("abc"));
        h.insert("content-length", HeaderValue::from_static("0"));
        h.insert("user-agent", HeaderValue::from_static("ua"));
        sign_at(
            "http://127.0.0.1:9000/b/k%20x?partNumber=1&uploadId=u",
            &mut h,
            UNSIGNED_PAYLOAD,
        )
        .unwrap();
        let auth = h.get(AUTHORIZATION).unwrap();
        assert!(auth.is_sensitive());
        let auth = auth.to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AK/20231114/us-east-1/s3/aws4_request"),
            "{auth}"
        );
        assert!(auth.contains("x-amz-rdma-token"), "{auth}");
        assert!(!auth.contains("user-agent"), "{auth}");
        assert_eq!(h.get("host").unwrap(), "127.0.0.1:9000");
        assert_eq!(h.get("x-amz-content-sha256").unwrap(), UNSIGNED_PAYLOAD);
        assert_eq!(h.get("x-amz-date").unwrap(), "20231114T221320Z");
    }

    #[test]
    fn host_leaves_out_the_default_port_of_the_scheme() {
        for (uri, host) in [
            ("http://h:80/b", "h"),
            ("http://h:443/b", "h:443"),
            ("https://h:443/b", "h"),
            ("https://h:80/b", "h:80"),
            ("https://h/b", "h"),
            ("http://h:9000/b", "h:9000"),
        ] {
            let mut h = HeaderMap::new();
            sign_at(uri, &mut h, EMPTY_SHA256).unwrap();
            assert_eq!(h.get(HOST).unwrap(), host, "{uri}");
        }
        // A Host already there is kept.
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("other:1"));
        sign_at("http://h:9000/b", &mut h, EMPTY_SHA256).unwrap();
        assert_eq!(h.get(HOST).unwrap(), "other:1");
    }

    #[test]
    fn old_auth_headers_are_replaced() {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static("old"));
        h.insert("x-amz-date", HeaderValue::from_static("old"));
        h.insert("x-amz-content-sha256", HeaderValue::from_static("old"));
        sign_at("http://h/b", &mut h, EMPTY_SHA256).unwrap();
        assert_eq!(h.get_all(AUTHORIZATION).iter().count(), 1);
        assert_ne!(h.get(AUTHORIZATION).unwrap(), "old");
        assert_eq!(h.get("x-amz-date").unwrap(), "20231114T221320Z");
        assert_eq!(h.get("x-amz-content-sha256").unwrap(), EMPTY_SHA256);
    }

    #[test]
    fn bad_input_is_refused() {
        let mut h = HeaderMap::new();
        assert!(sign_at("/no/host", &mut h, EMPTY_SHA256).is_err());
        assert!(sign_at("http://h/", &mut h, "not-a-hash").is_err());
        let uri: Uri = "http://h/".parse().unwrap();
        for (ak, region, now) in [
            ("AK", "us-east-1", UNIX_EPOCH - Duration::from_secs(1)),
            ("AK", "us-east-1", at(MAX_UNIX + 1)),
            ("", "us-east-1", at(NOW)),
            ("AK", "", at(NOW)),
            ("AK", "bad\nregion", at(NOW)),
        ] {
            let mut h = HeaderMap::new();
            let r = sign_headers(
                &Method::GET,
                &uri,
                &mut h,
                ak,
                "SK",
                region,
                EMPTY_SHA256,
                now,
            );
            assert!(r.is_err(), "{ak:?} {region:?} {now:?}");
        }
        let mut h = HeaderMap::new();
        h.insert("x-amz-meta-x", HeaderValue::from_bytes(b"\xff").unwrap());
        let e = sign_at("http://h/", &mut h, EMPTY_SHA256).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        // UTF-8 is signed, as it is.
        let mut h = HeaderMap::new();
        let v = "caf\u{e9} \u{2615}";
        h.insert(
            "x-amz-meta-x",
            HeaderValue::from_bytes(v.as_bytes()).unwrap(),
        );
        sign_at("http://h/", &mut h, EMPTY_SHA256).unwrap();
        assert_eq!(h["x-amz-meta-x"].as_bytes(), v.as_bytes());
        assert!(h[AUTHORIZATION].to_str().unwrap().contains("x-amz-meta-x"));
    }

    #[test]
    fn payload_hashes_and_times() {
        for ok in [
            UNSIGNED_PAYLOAD,
            STREAMING_PAYLOAD,
            STREAMING_PAYLOAD_TRAILER,
            STREAMING_UNSIGNED_TRAILER,
            EMPTY_SHA256,
            &EMPTY_SHA256.to_uppercase(),
        ] {
            assert!(is_valid_payload_hash(ok), "{ok}");
        }
        for bad in [
            "",
            "unsigned-payload",
            &EMPTY_SHA256[1..],
            &format!("{}g", &EMPTY_SHA256[1..]),
        ] {
            assert!(!is_valid_payload_hash(bad), "{bad}");
        }
        assert!(in_signable_range(UNIX_EPOCH));
        assert!(in_signable_range(at(MAX_UNIX)));
        assert!(!in_signable_range(at(MAX_UNIX + 1)));
        assert!(!in_signable_range(UNIX_EPOCH - Duration::from_secs(1)));
    }
}
