//! Signing of outbound requests to the store, with aws-sigv4 in S3's mode
//! (the signer itself is `hipobj_net::sigv4`, shared with `hipobj-s3`).

use std::sync::Arc;
use std::time::SystemTime;

use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};

use super::error::UpstreamError;
use super::payload::Payload;
use crate::auth::canonical::{self, ALGORITHM, SERVICE, TERMINATOR};
use crate::auth::AuthError;
use crate::body::Body;
use crate::config::KeyPair;

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
/// them all before signing. Header values are signed as the bytes they
/// are.
///
/// A thin wrapper of [`hipobj_net::sigv4::sign_headers`]; its errors are
/// [`AuthError::Signing`]. aws-sigv4 takes header values as text (UTF-8,
/// which `x-amz-meta-*` may carry: S3 accepts it and a client signs its
/// bytes); a request with a header value that is not UTF-8 (Latin-1 from a
/// raw client) is signed here over the raw bytes instead, with the
/// canonical request the verifier builds (`sign_raw`), so that what the
/// client signed reaches the store signed over the same bytes.
pub fn sign_request(
    req: &mut http::Request<crate::body::Body>,
    access_key: &str,
    secret_key: &str,
    region: &str,
    payload_hash: &str,
    now: SystemTime,
) -> Result<(), AuthError> {
    if req
        .headers()
        .values()
        .any(|v| std::str::from_utf8(v.as_bytes()).is_err())
    {
        return sign_raw(req, access_key, secret_key, region, payload_hash, now);
    }
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

/// SigV4 in S3's mode over raw header bytes: what aws-sigv4 computes for
/// UTF-8 values (the tests check both agree), for values that are not. The path is signed as given, the query decoded and re-encoded,
/// every header signed but the hop-by-hop ones and those aws-sigv4 leaves
/// out.
pub(crate) fn sign_raw(
    req: &mut http::Request<crate::body::Body>,
    access_key: &str,
    secret_key: &str,
    region: &str,
    payload_hash: &str,
    now: SystemTime,
) -> Result<(), AuthError> {
    let fail = |m: &str| AuthError::Signing(m.to_string());
    if !hipobj_net::sigv4::is_valid_payload_hash(payload_hash) {
        return Err(fail(
            "the payload hash is neither UNSIGNED-PAYLOAD nor a hex SHA-256",
        ));
    }
    if access_key.is_empty() || region.is_empty() || !region.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(fail("empty access key or invalid region"));
    }
    let amz_date = canonical::format_amz_date(now)
        .ok_or_else(|| fail("the signing time is outside 1970..=9999"))?;
    let uri = req.uri().clone();
    let method = req.method().clone();
    let headers = req.headers_mut();
    hipobj_net::sigv4::ensure_host(&uri, headers).map_err(|e| fail(&e.to_string()))?;
    headers.remove(AUTHORIZATION);
    let date_value = HeaderValue::from_str(&amz_date).map_err(|_| fail("invalid date"))?;
    let hash_value =
        HeaderValue::from_str(payload_hash).map_err(|_| fail("invalid payload hash"))?;
    headers.insert(HeaderName::from_static("x-amz-date"), date_value);
    headers.insert(HeaderName::from_static("x-amz-content-sha256"), hash_value);

    let skip = |n: &str| {
        (hipobj_net::sigv4::UNSIGNED_HEADERS.contains(&n)
            && n != "x-amz-date"
            && n != "x-amz-content-sha256")
            || hipobj_net::HOP_BY_HOP.contains(&n)
    };
    let mut names: Vec<&str> = headers
        .keys()
        .map(HeaderName::as_str)
        .filter(|n| !skip(n))
        .collect();
    names.sort_unstable();
    names.dedup();
    let signed: Vec<(&str, Vec<&[u8]>)> = names
        .iter()
        .map(|n| {
            (
                *n,
                headers
                    .get_all(*n)
                    .iter()
                    .map(HeaderValue::as_bytes)
                    .collect(),
            )
        })
        .collect();
    let query =
        canonical::canonical_query(&canonical::query_pairs(uri.query().unwrap_or("")), None);
    let creq =
        canonical::canonical_request(method.as_str(), uri.path(), &query, &signed, payload_hash);
    let day = amz_date.get(..8).ok_or_else(|| fail("invalid date"))?;
    let scope = format!("{day}/{region}/{SERVICE}/{TERMINATOR}");
    let sts = canonical::string_to_sign(&amz_date, &scope, &creq);
    let key = generate_signing_key(secret_key, now, region, SERVICE);
    let signature = calculate_signature(key.as_ref(), sts.as_bytes());
    let auth = format!(
        "{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={}, Signature={signature}",
        names.join(";")
    );
    let mut auth = HeaderValue::from_str(&auth).map_err(|_| fail("invalid access key"))?;
    auth.set_sensitive(true);
    headers.insert(AUTHORIZATION, auth);
    Ok(())
}

/// Signs `req` for the store with `credentials`, or with the tenant's own
/// store credentials where the request carries a
/// [`StoreIdentity`](crate::tenancy::StoreIdentity).
pub(crate) fn sign(
    req: &mut http::Request<Body>,
    credentials: &KeyPair,
    region: &str,
    payload: &Payload,
) -> Result<(), UpstreamError> {
    if req
        .extensions()
        .get::<crate::tenancy::Anonymous>()
        .is_some()
    {
        // The client's anonymous request stays anonymous: no key of ours
        // or a tenant's signs it.
        req.headers_mut().remove(http::header::AUTHORIZATION);
        return Ok(());
    }
    let tenant = req
        .extensions()
        .get::<crate::tenancy::StoreIdentity>()
        .map(|id| Arc::clone(&id.0));
    let credentials = tenant.as_deref().unwrap_or(credentials);
    sign_request(
        req,
        &credentials.access_key,
        &credentials.secret_key,
        region,
        payload.hash(),
        SystemTime::now(),
    )
    .map_err(|e| UpstreamError::Sign(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::auth::{verify, AuthSettings, Credentials};
    use crate::body::Body;
    use crate::config::KeyPair;

    fn request(uri: &str, headers: &[(&str, &str)]) -> http::Request<Body> {
        let mut req = http::Request::builder()
            .method("PUT")
            .uri(uri)
            .body(Body::empty())
            .unwrap();
        for (k, v) in headers {
            req.headers_mut().append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v.as_bytes()).unwrap(),
            );
        }
        req
    }

    const NOW: u64 = 1_700_000_000;
    const HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn raw_signing_agrees_with_aws_sigv4_on_utf8() {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        for (uri, headers) in [
            (
                "http://127.0.0.1:9000/b/k%20x?partNumber=1&uploadId=a%2Fb",
                &[("x-amz-meta-a", "  one  two "), ("content-length", "0")][..],
            ),
            (
                "http://h/b?list-type=2&prefix=a%2Fb&delimiter=%2F&x",
                &[
                    ("x-amz-rdma-token", "abc.def"),
                    ("content-type", "text/plain"),
                    ("user-agent", "ua"),
                    ("connection", "close"),
                ][..],
            ),
            (
                "http://h:80/b/k?tagging",
                &[
                    ("x-amz-meta-x", "1"),
                    ("x-amz-meta-x", "2"),
                    ("x-amz-date", "stale"),
                ][..],
            ),
        ] {
            let mut a = request(uri, headers);
            let mut b = request(uri, headers);
            hipobj_net::sigv4::sign_headers(
                &a.method().clone(),
                &a.uri().clone(),
                a.headers_mut(),
                "AK",
                "SK",
                "us-east-1",
                HASH,
                now,
            )
            .unwrap();
            sign_raw(&mut b, "AK", "SK", "us-east-1", HASH, now).unwrap();
            assert_eq!(a.headers(), b.headers(), "{uri}");
        }
    }

    #[test]
    fn utf8_metadata_is_signed_over_its_bytes() {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        let text = "caf\u{e9} \u{1f600}";
        let value = text.as_bytes();
        let mut req = request("http://h:9000/b/k", &[("x-amz-meta-name", text)]);
        sign_request(&mut req, "AK", "SK", "us-east-1", HASH, now).unwrap();
        assert_eq!(req.headers()["x-amz-meta-name"].as_bytes(), value);
        let auth = req.headers()[AUTHORIZATION].to_str().unwrap();
        assert!(auth.contains("x-amz-meta-name"), "{auth}");
        // The verifier (the same canonical request a store builds) accepts it.
        let creds = Credentials::new(&[KeyPair {
            access_key: "AK".into(),
            secret_key: "SK".into(),
        }]);
        let (parts, _) = req.into_parts();
        verify(&parts, &creds, &AuthSettings::default(), now).unwrap();
        // Latin-1 (not UTF-8) is signed over its bytes too.
        let mut req = request("http://h:9000/b/k", &[]);
        req.headers_mut().insert(
            "x-amz-meta-name",
            HeaderValue::from_bytes(b"caf\xe9").unwrap(),
        );
        sign_request(&mut req, "AK", "SK", "us-east-1", HASH, now).unwrap();
        let (latin1, _) = req.into_parts();
        verify(&latin1, &creds, &AuthSettings::default(), now).unwrap();
        // Changing a byte breaks it.
        let mut parts = parts;
        parts.headers.insert(
            "x-amz-meta-name",
            HeaderValue::from_bytes("caf\u{e8} \u{1f600}".as_bytes()).unwrap(),
        );
        assert_eq!(
            verify(&parts, &creds, &AuthSettings::default(), now)
                .unwrap_err()
                .code(),
            "SignatureDoesNotMatch"
        );
    }
}
