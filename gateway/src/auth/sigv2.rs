//! Verification of Signature Version 2 requests: `Authorization: AWS
//! <access key>:<signature>` and query authentication
//! (`AWSAccessKeyId`, `Signature`, `Expires`).
//!
//! The signature is the base64 HMAC-SHA1, keyed with the secret, of
//!
//! ```text
//! <method>\n<Content-MD5>\n<Content-Type>\n<Date, or Expires>\n<CanonicalizedAmzHeaders><CanonicalizedResource>
//! ```
//!
//! where the date is empty when `x-amz-date` is sent (it is then among the
//! amz headers), the amz headers are every `x-amz-*` header, lowercase,
//! sorted, values trimmed and joined with `,`, and the resource is the raw
//! path followed by the sub-resources S3 lists (`acl`, `uploadId`, ...,
//! sorted, values decoded), as S3, botocore and s3s build it. The path is
//! the request's path-style path (`/bucket/key`) whichever way it was
//! addressed: a virtual-hosted request (`Host: bucket.<domain>`, path
//! `/key`) is signed over `/bucket/key`, as S3 and botocore sign it, so
//! that a signature names its bucket (SigV2 does not sign `Host`).
//!
//! What SigV2 leaves unsigned is bounded: a query parameter that is
//! neither a signed sub-resource nor a listing parameter ([`UNSIGNED_OK`])
//! is refused, since it could change the operation a signature was made
//! for (`?attributes`, `?retention`, `?legal-hold`, ...); a presigned URL
//! may not be valid for longer than [`super::MAX_PRESIGNED_EXPIRES`] from
//! now, as SigV4's.
//!
//! A verified request is forwarded as any other, signed again with SigV4
//! for the store; its body is unsigned (SigV2 signs none of it; a
//! `Content-MD5` the client sent is forwarded and checked by the store).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, DATE};
use http::request::Parts;
use sha1::Sha1;
use subtle::ConstantTimeEq;

use super::{canonical, AuthError, AuthSettings, BodyMode, ChainContext, Credentials, Verified};

/// The query parameters S3 includes in the canonicalized resource, in the
/// (byte) order they are signed in.
const SUB_RESOURCES: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// The query parameters a SigV2 request may carry unsigned: the
/// signature's own; `content-type` and `content-md5`, which botocore
/// copies into a presigned URL's query from headers whose values the
/// string to sign covers (the request must send the same headers); and
/// those of listings, which narrow or page what is listed without
/// changing the operation.
const UNSIGNED_OK: &[&str] = &[
    "AWSAccessKeyId",
    "Expires",
    "Signature",
    "content-md5",
    "content-type",
    "continuation-token",
    "delimiter",
    "encoding-type",
    "fetch-owner",
    "key-marker",
    "list-type",
    "marker",
    "max-buckets",
    "max-keys",
    "max-parts",
    "max-uploads",
    "part-number-marker",
    "prefix",
    "start-after",
    "upload-id-marker",
    "version-id-marker",
    "x-id",
];

/// Refuses a query parameter that a SigV2 signature does not cover and
/// that could change the operation.
fn check_query_covered(pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), AuthError> {
    for (k, _) in pairs {
        let covered = SUB_RESOURCES.iter().any(|s| s.as_bytes() == k.as_slice())
            || UNSIGNED_OK.iter().any(|s| s.as_bytes() == k.as_slice());
        if !covered {
            let name: String = String::from_utf8_lossy(k).chars().take(64).collect();
            return Err(AuthError::AccessDenied(format!(
                "the query parameter {name:?} is not covered by a Signature Version 2 signature; sign the request with Signature Version 4"
            )));
        }
    }
    Ok(())
}

/// The longest string to sign built (the amz headers are bounded by the
/// HTTP front's header limit already; this is a second bound).
const MAX_STRING_TO_SIGN: usize = 64 << 10;

/// Whether a request carries a SigV2 query signature.
pub(crate) fn is_presigned(pairs: &[(Vec<u8>, Vec<u8>)]) -> bool {
    pairs
        .iter()
        .any(|(k, _)| k == b"AWSAccessKeyId" || k == b"Signature")
}

/// Verifies `Authorization: AWS <access key>:<signature>`; `credential` is
/// what follows `AWS `.
pub(crate) fn verify_header(
    parts: &Parts,
    path: &str,
    credential: &str,
    creds: &Credentials,
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<Verified, AuthError> {
    let (access_key, signature) = credential.trim().split_once(':').ok_or_else(|| {
        AuthError::InvalidArgument(
            "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature".into(),
        )
    })?;
    if access_key.is_empty() || signature.is_empty() {
        return Err(AuthError::InvalidArgument(
            "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature".into(),
        ));
    }
    let date = request_date(parts)?;
    if canonical::distance(now, date) > settings.max_skew {
        return Err(AuthError::RequestTimeTooSkewed);
    }
    let secret = creds
        .secret(access_key)
        .ok_or(AuthError::InvalidAccessKeyId)?;
    let pairs = canonical::query_pairs(parts.uri.query().unwrap_or(""));
    check_query_covered(&pairs)?;
    let date_line = if parts.headers.contains_key("x-amz-date") {
        String::new()
    } else {
        header_text(parts, DATE.as_str())?
    };
    check(
        secret,
        parts,
        path,
        &date_line,
        &pairs,
        signature.as_bytes(),
    )?;
    verified(parts, access_key)
}

/// Verifies query authentication: `AWSAccessKeyId`, `Signature` and
/// `Expires` (seconds since the epoch; past it, 403 "Request has expired";
/// more than [`super::MAX_PRESIGNED_EXPIRES`] ahead, 403 too).
pub(crate) fn verify_query(
    parts: &Parts,
    path: &str,
    pairs: &[(Vec<u8>, Vec<u8>)],
    creds: &Credentials,
    now: SystemTime,
) -> Result<Verified, AuthError> {
    const REQUIRED: &str =
        "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters";
    let param = |name: &[u8]| -> Result<&[u8], AuthError> {
        let mut found = pairs.iter().filter(|(k, _)| k == name);
        match (found.next(), found.next()) {
            (Some((_, v)), None) if !v.is_empty() => Ok(v.as_slice()),
            _ => Err(AuthError::AccessDenied(REQUIRED.into())),
        }
    };
    let access_key = std::str::from_utf8(param(b"AWSAccessKeyId")?)
        .map_err(|_| AuthError::AccessDenied(REQUIRED.into()))?;
    let signature = param(b"Signature")?;
    let expires_raw = std::str::from_utf8(param(b"Expires")?)
        .map_err(|_| AuthError::AccessDenied(REQUIRED.into()))?;
    let expires = expires_raw
        .parse::<u64>()
        .ok()
        .and_then(|s| UNIX_EPOCH.checked_add(Duration::from_secs(s)))
        .ok_or_else(|| {
            AuthError::InvalidArgument("Expires must be a number of seconds since 1970".into())
        })?;
    if now > expires {
        return Err(AuthError::Expired);
    }
    let longest = Duration::from_secs(super::MAX_PRESIGNED_EXPIRES);
    if expires.duration_since(now).unwrap_or_default() > longest {
        return Err(AuthError::AccessDenied(
            "a presigned URL may be valid for at most 7 days (604800 seconds) from now".into(),
        ));
    }
    check_query_covered(pairs)?;
    let secret = creds
        .secret(access_key)
        .ok_or(AuthError::InvalidAccessKeyId)?;
    check(secret, parts, path, expires_raw, pairs, signature)?;
    verified(parts, access_key)
}

/// The base64 HMAC-SHA1 of `data` keyed with `secret`.
pub(crate) fn sign(secret: &str, data: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(data);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Whether `given` is the signature of `data` under `secret`, compared in
/// constant time.
pub(crate) fn signature_matches(secret: &str, data: &[u8], given: &[u8]) -> bool {
    let computed = sign(secret, data);
    computed.len() == given.len() && bool::from(computed.as_bytes().ct_eq(given))
}

/// Checks `given` against the string to sign of the request; for a
/// bucket's own path (`/bucket`), the resource `/bucket/` is accepted too:
/// it is S3's canonical resource of a bucket addressed by its host, which
/// botocore signs whatever the addressing.
fn check(
    secret: &str,
    parts: &Parts,
    path: &str,
    date_line: &str,
    pairs: &[(Vec<u8>, Vec<u8>)],
    given: &[u8],
) -> Result<(), AuthError> {
    let sts = string_to_sign(parts, path, date_line, pairs)?;
    if signature_matches(secret, sts.as_bytes(), given) {
        return Ok(());
    }
    let bucket_only = path.len() > 1 && !path[1..].contains('/');
    if bucket_only {
        let sts = string_to_sign(parts, &format!("{path}/"), date_line, pairs)?;
        if signature_matches(secret, sts.as_bytes(), given) {
            return Ok(());
        }
    }
    tracing::debug!("SigV2 signature does not match");
    Err(AuthError::SignatureDoesNotMatch)
}

/// The request's time: `x-amz-date`, else `Date` (an HTTP date; an
/// `x-amz-date` may also be ISO 8601 basic).
fn request_date(parts: &Parts) -> Result<SystemTime, AuthError> {
    const NO_DATE: &str = "AWS authentication requires a valid Date or x-amz-date header";
    let v = parts
        .headers
        .get("x-amz-date")
        .or_else(|| parts.headers.get(DATE))
        .ok_or_else(|| AuthError::AccessDenied(NO_DATE.into()))?;
    let s = v
        .to_str()
        .map_err(|_| AuthError::AccessDenied(NO_DATE.into()))?;
    httpdate::parse_http_date(s)
        .ok()
        .or_else(|| canonical::parse_amz_date(s))
        .ok_or_else(|| AuthError::AccessDenied(NO_DATE.into()))
}

/// The first value of header `name` as text, empty when absent.
fn header_text(parts: &Parts, name: &str) -> Result<String, AuthError> {
    match parts.headers.get(name) {
        None => Ok(String::new()),
        Some(v) => v
            .to_str()
            .map(str::to_string)
            .map_err(|_| AuthError::InvalidArgument(format!("the {name} header is not ASCII"))),
    }
}

/// The SigV2 string to sign of the request at `path`; `date_line` is the
/// `Date` header (header auth) or `Expires` (query auth).
fn string_to_sign(
    parts: &Parts,
    path: &str,
    date_line: &str,
    pairs: &[(Vec<u8>, Vec<u8>)],
) -> Result<String, AuthError> {
    let mut out = String::with_capacity(256);
    out.push_str(parts.method.as_str());
    out.push('\n');
    out.push_str(&header_text(parts, "content-md5")?);
    out.push('\n');
    out.push_str(&header_text(parts, CONTENT_TYPE.as_str())?);
    out.push('\n');
    out.push_str(date_line);
    out.push('\n');

    let mut amz: Vec<&str> = parts
        .headers
        .keys()
        .map(http::HeaderName::as_str)
        .filter(|n| n.starts_with("x-amz-"))
        .collect();
    amz.sort_unstable();
    amz.dedup();
    for name in amz {
        out.push_str(name);
        out.push(':');
        for (i, v) in parts.headers.get_all(name).iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let v = v.to_str().map_err(|_| {
                AuthError::InvalidArgument(format!("the {name} header is not ASCII"))
            })?;
            out.push_str(v.trim());
        }
        out.push('\n');
        if out.len() > MAX_STRING_TO_SIGN {
            return Err(AuthError::InvalidArgument(
                "the x-amz-* headers are too long".into(),
            ));
        }
    }

    out.push_str(path);
    let mut first = true;
    for name in SUB_RESOURCES {
        let Some((_, value)) = pairs.iter().find(|(k, _)| k == name.as_bytes()) else {
            continue;
        };
        out.push(if first { '?' } else { '&' });
        first = false;
        out.push_str(name);
        if !value.is_empty() {
            out.push('=');
            out.push_str(&String::from_utf8_lossy(value));
        }
        if out.len() > MAX_STRING_TO_SIGN {
            return Err(AuthError::InvalidArgument("the query is too long".into()));
        }
    }
    Ok(out)
}

/// The [`Verified`] of a SigV2 request: an unsigned body, no chunk chain
/// (aws-chunked bodies need SigV4, and are refused).
fn verified(parts: &Parts, access_key: &str) -> Result<Verified, AuthError> {
    let chunked = parts.headers.contains_key("x-amz-decoded-content-length")
        || parts
            .headers
            .get_all(CONTENT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains("aws-chunked"));
    if chunked {
        return Err(AuthError::InvalidRequest(
            "aws-chunked bodies need Signature Version 4".into(),
        ));
    }
    tracing::trace!(access_key, "SigV2 verified");
    Ok(Verified {
        access_key: access_key.to_string(),
        body: BodyMode::Unsigned,
        decoded_length: None,
        signed_headers: Vec::new(),
        chain: ChainContext {
            signing_key: Vec::new(),
            amz_date: String::new(),
            scope: String::new(),
            seed_signature: String::new(),
            declared_trailers: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SK: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn sub_resources_are_sorted() {
        for w in SUB_RESOURCES.windows(2) {
            assert!(w[0] < w[1], "{w:?}");
        }
    }

    /// The AWS documentation's examples (path-style), signatures as
    /// published.
    #[test]
    fn aws_examples() {
        // Object GET.
        let p = parts(
            "GET",
            "/awsexamplebucket1/photos/puppy.jpg",
            &[("date", "Tue, 27 Mar 2007 19:36:42 +0000")],
        );
        let sts = string_to_sign(&p, p.uri.path(), "Tue, 27 Mar 2007 19:36:42 +0000", &[]).unwrap();
        assert_eq!(
            sts,
            "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg"
        );
        assert_eq!(sign(SK, sts.as_bytes()), "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=");

        // Object PUT.
        let p = parts(
            "PUT",
            "/awsexamplebucket1/photos/puppy.jpg",
            &[
                ("content-type", "image/jpeg"),
                ("date", "Tue, 27 Mar 2007 21:15:45 +0000"),
            ],
        );
        let sts = string_to_sign(&p, p.uri.path(), "Tue, 27 Mar 2007 21:15:45 +0000", &[]).unwrap();
        assert_eq!(sign(SK, sts.as_bytes()), "iqRzw+ileNPu1fhspnRs8nOjjIA=");

        // Sub-resource: GET ?acl, with an x-amz-date (the Date line empty).
        let p = parts(
            "GET",
            "/awsexamplebucket1/?acl",
            &[("x-amz-date", "Tue, 27 Mar 2007 19:44:46 +0000")],
        );
        let pairs = canonical::query_pairs("acl");
        let sts = string_to_sign(&p, p.uri.path(), "", &pairs).unwrap();
        assert_eq!(
            sts,
            "GET\n\n\n\nx-amz-date:Tue, 27 Mar 2007 19:44:46 +0000\n/awsexamplebucket1/?acl"
        );
    }

    #[test]
    fn a_bucket_signed_with_a_trailing_slash_verifies() {
        let creds = Credentials::new(&[crate::config::KeyPair {
            access_key: "AK".into(),
            secret_key: SK.into(),
        }]);
        let date = httpdate::fmt_http_date(SystemTime::now());
        let sts = format!("PUT\n\n\n{date}\n/bucket/");
        let auth = format!("AK:{}", sign(SK, sts.as_bytes()));
        let p = parts("PUT", "/bucket", &[("date", &date)]);
        let v = verify_header(
            &p,
            "/bucket",
            &auth,
            &creds,
            &AuthSettings::default(),
            SystemTime::now(),
        );
        assert_eq!(v.unwrap().access_key, "AK");
        // Not for an object's path.
        let sts = format!("PUT\n\n\n{date}\n/bucket/k/");
        let auth = format!("AK:{}", sign(SK, sts.as_bytes()));
        let p = parts("PUT", "/bucket/k", &[("date", &date)]);
        let e = verify_header(
            &p,
            "/bucket/k",
            &auth,
            &creds,
            &AuthSettings::default(),
            SystemTime::now(),
        );
        assert_eq!(e.unwrap_err().code(), "SignatureDoesNotMatch");
    }

    #[test]
    fn amz_headers_are_sorted_and_joined() {
        let p = parts(
            "PUT",
            "/b/k?uploadId=x%2By&partNumber=2&foo=bar",
            &[
                ("x-amz-meta-b", " 2 "),
                ("x-amz-meta-a", "1"),
                ("x-amz-meta-b", "3"),
                ("content-md5", "abc"),
            ],
        );
        let pairs = canonical::query_pairs(p.uri.query().unwrap());
        let sts = string_to_sign(&p, p.uri.path(), "D", &pairs).unwrap();
        assert_eq!(
            sts,
            "PUT\nabc\n\nD\nx-amz-meta-a:1\nx-amz-meta-b:2,3\n/b/k?partNumber=2&uploadId=x+y"
        );
    }
}
