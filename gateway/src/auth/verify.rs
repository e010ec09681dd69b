//! Verification of incoming SigV4 requests.

use std::time::{Duration, SystemTime};

use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use http::header::{AUTHORIZATION, DATE, HOST};
use http::request::Parts;
use subtle::ConstantTimeEq;

use super::canonical::{self, ALGORITHM, ALGORITHM_V4A, SERVICE, TERMINATOR, UNSIGNED_PAYLOAD};
use super::{
    AuthError, AuthSettings, BodyMode, ChainContext, Credentials, Verified, MAX_PRESIGNED_EXPIRES,
};

const X_AMZ_CONTENT_SHA256: &str = "x-amz-content-sha256";
const X_AMZ_DATE: &str = "x-amz-date";
const X_AMZ_DECODED_CONTENT_LENGTH: &str = "x-amz-decoded-content-length";
const X_AMZ_TRAILER: &str = "x-amz-trailer";
const X_AMZ_RDMA_TOKEN: &str = "x-amz-rdma-token";

const Q_ALGORITHM: &[u8] = b"X-Amz-Algorithm";
const Q_CREDENTIAL: &[u8] = b"X-Amz-Credential";
const Q_DATE: &[u8] = b"X-Amz-Date";
const Q_EXPIRES: &[u8] = b"X-Amz-Expires";
const Q_SIGNED_HEADERS: &[u8] = b"X-Amz-SignedHeaders";
const Q_SIGNATURE: &[u8] = b"X-Amz-Signature";

/// The most headers a SignedHeaders list may name.
const MAX_SIGNED_HEADERS: usize = 128;

/// Verifies SigV4 of a request: header-signed (`Authorization:
/// AWS4-HMAC-SHA256 ...`) or presigned (`X-Amz-Algorithm` etc. in the query,
/// with `X-Amz-Expires` checked).
///
/// `now` is the time the request is judged at (`SystemTime::now()` but in
/// tests). Every header and query value is untrusted: any input yields an
/// error, never a panic.
pub fn verify(
    parts: &Parts,
    creds: &Credentials,
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Verified, AuthError> {
    verify_addressed(parts, parts.uri.path(), creds, settings, now)
}

/// As [`verify`], for a request whose path-style path is `path_style`
/// (`/bucket/key`) while `parts` are as sent (a virtual-hosted request:
/// `Host: bucket.<domain>`, path `/key`). SigV4 signs `Host` and the path
/// as sent; SigV2 signs no `Host`, so its resource is the path-style path,
/// as S3 and botocore build it: that is what binds a SigV2 signature to
/// its bucket.
pub fn verify_addressed(
    parts: &Parts,
    path_style: &str,
    creds: &Credentials,
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Verified, AuthError> {
    let result = verify_inner(parts, path_style, creds, settings, now);
    match &result {
        Ok(v) => tracing::trace!(access_key = %v.access_key, body = ?v.body, "SigV4 verified"),
        Err(e) => tracing::debug!(code = e.code(), reason = %e, "SigV4 verification failed"),
    }
    result
}

/// Where the signature came from, which decides the error code of a
/// malformed field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Header,
    Query,
}

impl Kind {
    fn malformed(self, msg: impl Into<String>) -> AuthError {
        match self {
            Kind::Header => AuthError::AuthorizationHeaderMalformed(msg.into()),
            Kind::Query => AuthError::AuthorizationQueryParametersError(msg.into()),
        }
    }
}

/// `<access key>/<yyyymmdd>/<region>/s3/aws4_request`, checked.
struct Credential {
    access_key: String,
    date: String,
    region: String,
}

impl Credential {
    fn parse(s: &str, kind: Kind, settings: &AuthSettings) -> Result<Credential, AuthError> {
        let parts: Vec<&str> = s.split('/').collect();
        let [access_key, date, region, service, terminator] = parts.as_slice() else {
            return Err(kind.malformed(
                "the Credential must be <access key>/<yyyymmdd>/<region>/s3/aws4_request",
            ));
        };
        if access_key.is_empty() {
            return Err(kind.malformed("the Credential has an empty access key"));
        }
        if canonical::parse_date(date).is_none() {
            return Err(kind.malformed("the Credential date must be yyyymmdd"));
        }
        if *region != settings.region {
            return Err(kind.malformed(format!(
                "the region in the Credential is wrong; expecting '{}'",
                settings.region
            )));
        }
        if *service != SERVICE {
            return Err(kind.malformed("the Credential service must be 's3'"));
        }
        if *terminator != TERMINATOR {
            return Err(kind.malformed("the Credential must end with 'aws4_request'"));
        }
        Ok(Credential {
            access_key: (*access_key).to_string(),
            date: (*date).to_string(),
            region: (*region).to_string(),
        })
    }

    fn scope(&self) -> String {
        format!("{}/{}/{SERVICE}/{TERMINATOR}", self.date, self.region)
    }
}

/// What both kinds of signature carry.
struct Signed {
    kind: Kind,
    credential: Credential,
    signed_headers: Vec<String>,
    signature: [u8; 32],
    /// `yyyymmddThhmmssZ`.
    amz_date: String,
    date: SystemTime,
    /// The payload hash of the canonical request.
    payload_hash: String,
    body: BodyMode,
    /// The canonical query string.
    query: String,
}

/// Whether a request carries no authentication at all: no
/// `Authorization` header and none of the query parameters of a presigned
/// URL (SigV4's or SigV2's). Such a request is anonymous: the store's
/// ACLs and policies decide it (`--anonymous store`), or it is refused.
pub fn is_anonymous(parts: &Parts) -> bool {
    if parts.headers.contains_key(AUTHORIZATION) {
        return false;
    }
    let pairs = canonical::query_pairs(parts.uri.query().unwrap_or(""));
    !pairs.iter().any(|(k, _)| {
        k == Q_ALGORITHM
            || k == Q_CREDENTIAL
            || k == Q_SIGNATURE
            || k == b"AWSAccessKeyId"
            || k == b"Signature"
    })
}

fn verify_inner(
    parts: &Parts,
    path_style: &str,
    creds: &Credentials,
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Verified, AuthError> {
    let pairs = canonical::query_pairs(parts.uri.query().unwrap_or(""));
    let presigned = pairs
        .iter()
        .any(|(k, _)| k == Q_ALGORITHM || k == Q_CREDENTIAL || k == Q_SIGNATURE);
    let mut auth = parts.headers.get_all(AUTHORIZATION).iter();
    let signed = match (auth.next(), auth.next()) {
        (Some(_), Some(_)) => {
            return Err(AuthError::AuthorizationHeaderMalformed("more than one Authorization header".into()))
        }
        (Some(_), None) if presigned => {
            return Err(AuthError::InvalidArgument(
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified".into(),
            ))
        }
        (Some(value), None) => {
            // Signature Version 2: `AWS <access key>:<signature>`.
            if let Some(v2) = value.to_str().ok().and_then(|v| v.trim().strip_prefix("AWS ")) {
                return super::sigv2::verify_header(parts, path_style, v2, creds, settings, now);
            }
            header_signed(parts, value, &pairs, settings, now)?
        }
        (None, _) if presigned => presigned_url(parts, &pairs, settings, now)?,
        (None, _) if super::sigv2::is_presigned(&pairs) => {
            return super::sigv2::verify_query(parts, path_style, &pairs, creds, now);
        }
        (None, _) => {
            return Err(AuthError::AccessDenied("the request is not signed (anonymous access is not allowed)".into()));
        }
    };

    check_signed_headers(parts, &signed.signed_headers, signed.kind)?;

    let Some(secret) = creds.secret(&signed.credential.access_key) else {
        return Err(AuthError::InvalidAccessKeyId);
    };

    // The canonical headers: each signed header's values, or the URI's
    // authority for a `host` an HTTP/2 request carries as `:authority`.
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    let headers: Vec<(&str, Vec<&[u8]>)> = signed
        .signed_headers
        .iter()
        .map(|name| {
            let mut values: Vec<&[u8]> = parts
                .headers
                .get_all(name.as_str())
                .iter()
                .map(|v| v.as_bytes())
                .collect();
            if values.is_empty() && name == "host" {
                values.extend(authority);
            }
            (name.as_str(), values)
        })
        .collect();
    let creq = canonical::canonical_request(
        parts.method.as_str(),
        parts.uri.path(),
        &signed.query,
        &headers,
        &signed.payload_hash,
    );
    let scope = signed.credential.scope();
    let sts = canonical::string_to_sign(&signed.amz_date, &scope, &creq);
    let key = generate_signing_key(secret, signed.date, &signed.credential.region, SERVICE);
    let signing_key = key.as_ref().to_vec();
    let computed = calculate_signature(&signing_key, sts.as_bytes());
    let matches =
        canonical::parse_hex32(&computed).is_some_and(|c| bool::from(c.ct_eq(&signed.signature)));
    if !matches {
        return Err(AuthError::SignatureDoesNotMatch);
    }

    let decoded_length = match parts.headers.get(X_AMZ_DECODED_CONTENT_LENGTH) {
        None => None,
        Some(v) => Some(parse_u64(v.as_bytes()).ok_or_else(|| {
            AuthError::InvalidArgument(
                "x-amz-decoded-content-length must be a non-negative integer".into(),
            )
        })?),
    };
    let declared_trailers = declared_trailers(parts)?;

    Ok(Verified {
        access_key: signed.credential.access_key,
        body: signed.body,
        decoded_length,
        signed_headers: signed.signed_headers,
        chain: ChainContext {
            signing_key,
            amz_date: signed.amz_date,
            scope,
            seed_signature: computed,
            declared_trailers,
        },
    })
}

/// `Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`.
fn header_signed(
    parts: &Parts,
    value: &http::HeaderValue,
    pairs: &[(Vec<u8>, Vec<u8>)],
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Signed, AuthError> {
    let kind = Kind::Header;
    let value = value
        .to_str()
        .map_err(|_| kind.malformed("the Authorization header is not ASCII"))?;
    let (algorithm, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    match algorithm {
        ALGORITHM => {}
        "AWS" => {
            return Err(AuthError::InvalidArgument(
                "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature".into(),
            ))
        }
        ALGORITHM_V4A => {
            return Err(AuthError::NotImplemented(
                "SigV4a is not supported; use AWS4-HMAC-SHA256".into(),
            ))
        }
        _ => {
            return Err(AuthError::InvalidArgument(
                "Unsupported Authorization Type".into(),
            ))
        }
    }

    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for component in rest.split(',') {
        let component = component.trim();
        if component.is_empty() {
            continue;
        }
        let Some((key, val)) = component.split_once('=') else {
            return Err(kind.malformed("each component must be <key>=<value>"));
        };
        let slot = match key.trim() {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed_headers,
            "Signature" => &mut signature,
            _ => {
                return Err(kind.malformed(
                    "unknown component; expecting Credential, SignedHeaders and Signature",
                ))
            }
        };
        if slot.replace(val.trim()).is_some() {
            return Err(kind.malformed("a component is repeated"));
        }
    }
    let (Some(credential), Some(signed_headers), Some(signature)) =
        (credential, signed_headers, signature)
    else {
        return Err(kind.malformed("Credential, SignedHeaders and Signature are all required"));
    };
    let credential = Credential::parse(credential, kind, settings)?;
    let signed_headers = parse_signed_headers(signed_headers, kind)?;
    let signature = canonical::parse_hex32(signature)
        .ok_or_else(|| kind.malformed("the Signature must be 64 hex digits"))?;

    // The payload hash S3 requires for header auth.
    let content_sha = parts
        .headers
        .get(X_AMZ_CONTENT_SHA256)
        .ok_or(AuthError::MissingSecurityHeader(X_AMZ_CONTENT_SHA256))?
        .to_str()
        .map_err(|_| AuthError::InvalidArgument("x-amz-content-sha256 is not ASCII".into()))?;
    let body = body_mode(content_sha)?;

    // The date: x-amz-date, else Date.
    const NO_DATE: &str = "AWS authentication requires a valid Date or x-amz-date header";
    let (amz_date, date) = if let Some(v) = parts.headers.get(X_AMZ_DATE) {
        let s = v
            .to_str()
            .map_err(|_| AuthError::AccessDenied(NO_DATE.into()))?;
        let t =
            canonical::parse_amz_date(s).ok_or_else(|| AuthError::AccessDenied(NO_DATE.into()))?;
        (s.to_string(), t)
    } else if let Some(v) = parts.headers.get(DATE) {
        let t = v
            .to_str()
            .ok()
            .and_then(|s| httpdate::parse_http_date(s).ok())
            .ok_or_else(|| AuthError::AccessDenied(NO_DATE.into()))?;
        let s =
            canonical::format_amz_date(t).ok_or_else(|| AuthError::AccessDenied(NO_DATE.into()))?;
        (s, t)
    } else {
        return Err(AuthError::AccessDenied(NO_DATE.into()));
    };
    if amz_date.get(..8) != Some(credential.date.as_str()) {
        return Err(kind.malformed("Invalid credential date. Date is not the same as X-Amz-Date."));
    }
    if canonical::distance(now, date) > settings.max_skew {
        return Err(AuthError::RequestTimeTooSkewed);
    }

    Ok(Signed {
        kind,
        credential,
        signed_headers,
        signature,
        amz_date,
        date,
        payload_hash: content_sha.to_string(),
        body,
        query: canonical::canonical_query(pairs, None),
    })
}

/// `?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...&X-Amz-Date=...&X-Amz-Expires=...&X-Amz-SignedHeaders=...&X-Amz-Signature=...`.
fn presigned_url(
    parts: &Parts,
    pairs: &[(Vec<u8>, Vec<u8>)],
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Signed, AuthError> {
    let kind = Kind::Query;
    const REQUIRED: &str = "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.";
    let param = |name: &'static [u8]| -> Result<&str, AuthError> {
        let mut found = pairs.iter().filter(|(k, _)| k == name);
        let (Some((_, v)), None) = (found.next(), found.next()) else {
            return Err(kind.malformed(REQUIRED));
        };
        std::str::from_utf8(v).map_err(|_| kind.malformed("an X-Amz-* parameter is not UTF-8"))
    };
    match param(Q_ALGORITHM)? {
        ALGORITHM => {}
        ALGORITHM_V4A => {
            return Err(AuthError::NotImplemented(
                "SigV4a is not supported; use AWS4-HMAC-SHA256".into(),
            ))
        }
        _ => return Err(kind.malformed("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")),
    }
    let credential = Credential::parse(param(Q_CREDENTIAL)?, kind, settings)?;
    let amz_date = param(Q_DATE)?;
    let date = canonical::parse_amz_date(amz_date).ok_or_else(|| {
        kind.malformed("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
    })?;
    let expires = parse_expires(param(Q_EXPIRES)?.as_bytes())?;
    let signed_headers = parse_signed_headers(param(Q_SIGNED_HEADERS)?, kind)?;
    let signature = canonical::parse_hex32(param(Q_SIGNATURE)?)
        .ok_or_else(|| kind.malformed("X-Amz-Signature must be 64 hex digits"))?;
    if amz_date.get(..8) != Some(credential.date.as_str()) {
        return Err(kind.malformed("Invalid credential date. Date is not the same as X-Amz-Date."));
    }
    match now.duration_since(date) {
        // Signed in the future, beyond the tolerated skew.
        Err(e) if e.duration() > settings.max_skew => return Err(AuthError::NotYetValid),
        // `X-Amz-Expires=0` has expired as soon as it is signed (S3, MinIO).
        Ok(age) if expires == 0 || age > Duration::from_secs(expires) => {
            return Err(AuthError::Expired)
        }
        _ => {}
    }

    // A presigned request's payload is unsigned; a (signed, see
    // check_signed_headers) x-amz-content-sha256 hash is still honoured.
    let body =
        match parts.headers.get(X_AMZ_CONTENT_SHA256) {
            None => BodyMode::Unsigned,
            Some(v) => match body_mode(v.to_str().map_err(|_| {
                AuthError::InvalidArgument("x-amz-content-sha256 is not ASCII".into())
            })?)? {
                b @ (BodyMode::Unsigned | BodyMode::Sha256(_)) => b,
                BodyMode::ChunkedSigned { .. } | BodyMode::ChunkedUnsigned => {
                    return Err(AuthError::InvalidRequest(
                        "aws-chunked bodies are not supported with presigned URLs".into(),
                    ))
                }
            },
        };

    Ok(Signed {
        kind,
        credential,
        signed_headers,
        signature,
        amz_date: amz_date.to_string(),
        date,
        payload_hash: UNSIGNED_PAYLOAD.to_string(),
        body,
        query: canonical::canonical_query(pairs, Some(Q_SIGNATURE)),
    })
}

/// `X-Amz-Expires`, checked as S3 checks it (the messages are S3's): a
/// number, not negative, at most a week. 0 is valid here and has expired
/// by the time the request arrives (403 "Request has expired").
fn parse_expires(v: &[u8]) -> Result<u64, AuthError> {
    let malformed = |msg: &str| AuthError::AuthorizationQueryParametersError(msg.to_string());
    let (negative, digits) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(malformed("X-Amz-Expires should be a number"));
    }
    if negative && digits.iter().any(|&d| d != b'0') {
        return Err(malformed("X-Amz-Expires must be non-negative"));
    }
    // Too many digits for a u64 is more than a week too.
    match parse_u64(digits) {
        Some(e) if e <= MAX_PRESIGNED_EXPIRES => Ok(e),
        _ => Err(malformed(
            "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds",
        )),
    }
}

/// The body mode an `x-amz-content-sha256` value announces.
fn body_mode(value: &str) -> Result<BodyMode, AuthError> {
    Ok(match value {
        UNSIGNED_PAYLOAD => BodyMode::Unsigned,
        canonical::STREAMING_PAYLOAD => BodyMode::ChunkedSigned { trailer: false },
        canonical::STREAMING_PAYLOAD_TRAILER => BodyMode::ChunkedSigned { trailer: true },
        canonical::STREAMING_UNSIGNED_TRAILER => BodyMode::ChunkedUnsigned,
        v if canonical::is_hex64(v) => BodyMode::Sha256(v.to_ascii_lowercase()),
        v if v.starts_with("STREAMING-") => {
            return Err(AuthError::NotImplemented(
                "this x-amz-content-sha256 streaming mode is not supported".into(),
            ))
        }
        _ => {
            return Err(AuthError::InvalidArgument(
                "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER or a hex SHA-256".into(),
            ))
        }
    })
}

/// `a;b;c`: lowercase header names, none repeated, in the order given.
fn parse_signed_headers(s: &str, kind: Kind) -> Result<Vec<String>, AuthError> {
    let mut names: Vec<String> = Vec::new();
    for name in s.split(';') {
        let valid = !name.is_empty()
            && name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
            });
        if !valid {
            return Err(
                kind.malformed("SignedHeaders must be lowercase header names separated by ';'")
            );
        }
        if names.iter().any(|n| n == name) {
            return Err(kind.malformed("SignedHeaders names a header twice"));
        }
        if names.len() == MAX_SIGNED_HEADERS {
            return Err(kind.malformed("SignedHeaders names too many headers"));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Garage's rule: `host` and every `x-amz-*` header present must be signed;
/// `x-amz-rdma-token` with its own message.
fn check_signed_headers(parts: &Parts, signed: &[String], kind: Kind) -> Result<(), AuthError> {
    let is_signed = |name: &str| signed.iter().any(|s| s == name);
    if !is_signed(HOST.as_str()) {
        let what = match kind {
            Kind::Header => "SignedHeaders",
            Kind::Query => "X-Amz-SignedHeaders",
        };
        return Err(AuthError::AccessDenied(format!(
            "the host header must be signed (listed in {what})"
        )));
    }
    if parts.headers.contains_key(X_AMZ_RDMA_TOKEN) && !is_signed(X_AMZ_RDMA_TOKEN) {
        return Err(AuthError::AccessDenied(
            "x-amz-rdma-token must be signed: list it in SignedHeaders".into(),
        ));
    }
    if let Some(name) = parts
        .headers
        .keys()
        .find(|n| n.as_str().starts_with("x-amz-") && !is_signed(n.as_str()))
    {
        return Err(AuthError::AccessDenied(format!(
            "There were headers present in the request which were not signed: {name}"
        )));
    }
    Ok(())
}

/// The trailer names an aws-chunked body declared in `x-amz-trailer`.
fn declared_trailers(parts: &Parts) -> Result<Vec<String>, AuthError> {
    let mut out = Vec::new();
    for v in parts.headers.get_all(X_AMZ_TRAILER) {
        let s = v
            .to_str()
            .map_err(|_| AuthError::InvalidArgument("x-amz-trailer is not ASCII".into()))?;
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if out.len() == 16 {
                return Err(AuthError::InvalidArgument(
                    "x-amz-trailer names too many headers".into(),
                ));
            }
            out.push(name.to_ascii_lowercase());
        }
    }
    Ok(out)
}

/// A decimal `u64` of digits only.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    b.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64s() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"+1"), None);
    }

    #[test]
    fn expires_values() {
        assert_eq!(parse_expires(b"0").unwrap(), 0);
        assert_eq!(parse_expires(b"-0").unwrap(), 0);
        assert_eq!(parse_expires(b"604800").unwrap(), 604_800);
        for (bad, msg) in [
            (&b""[..], "should be a number"),
            (b"abc", "should be a number"),
            (b"1.5", "should be a number"),
            (b"+1", "should be a number"),
            (b"-", "should be a number"),
            (b"-1", "must be non-negative"),
            (b"-99999999999999999999999", "must be non-negative"),
            (b"604801", "less than a week"),
            (b"99999999999999999999999", "less than a week"),
        ] {
            let e = parse_expires(bad).unwrap_err();
            assert_eq!(e.code(), "AuthorizationQueryParametersError");
            assert!(e.to_string().contains(msg), "{e}");
        }
    }

    #[test]
    fn signed_header_lists() {
        assert_eq!(
            parse_signed_headers("host;x-amz-date", Kind::Header).unwrap(),
            ["host", "x-amz-date"]
        );
        for bad in [
            "",
            "host;",
            ";host",
            "Host",
            "host;host",
            "ho st",
            "host;\u{e9}",
        ] {
            assert!(parse_signed_headers(bad, Kind::Header).is_err(), "{bad}");
        }
    }
}
