//! The tenant check: after a request's signature has checked out and
//! before anything reaches the store, whether its access key may touch
//! what the request names.
//!
//! A tenant whose scope is every bucket passes unchecked. For one with a
//! `buckets=` list, on the request's path-style form:
//!
//! - `GET /` (ListBuckets) is served, its answer narrowed to the tenant's
//!   buckets ([`super::list_buckets`]); any other request on `/` (a
//!   store's IAM or STS `Action=` API, ...) is refused.
//! - The bucket is the path's first segment, percent-decoded (so that
//!   `/%61lpha` is `alpha`, as the store reads it), and must be in scope;
//!   a path with an empty bucket (`//beta/k`) or a `.`/`..` segment (which
//!   a store that normalizes paths would resolve elsewhere) is refused.
//! - `x-amz-copy-source` (CopyObject, UploadPartCopy) names a second
//!   bucket, checked the same way; given twice, refused.
//! - Configurations that make the store write into another bucket
//!   (`PUT ?logging`, `?replication`, `?inventory`, `?analytics`,
//!   `?notification`) are refused: their target sits in the body, which
//!   the gateway does not parse.
//!
//! A refusal is 403 `AccessDenied`, with the same message whether the
//! bucket exists or not.

use http::request::Parts;
use http::{Method, StatusCode};
use percent_encoding::percent_decode_str;

use super::Policy;
use crate::s3err::S3Error;

/// What the check found a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Go on as it is.
    Granted,
    /// ListBuckets of a restricted tenant: go on, then narrow the answer
    /// to the tenant's buckets.
    ListBucketsFiltered,
}

/// The query parameters whose configuration names a bucket to write into.
const WRITES_ELSEWHERE: &[&str] = &[
    "analytics",
    "inventory",
    "logging",
    "notification",
    "replication",
];

fn denied(why: &str) -> S3Error {
    S3Error::new(
        StatusCode::FORBIDDEN,
        "AccessDenied",
        format!("Access Denied: {why}"),
    )
}

/// Checks the path-style request `parts` against `policy`.
pub fn authorize(policy: &Policy, parts: &Parts) -> Result<Access, S3Error> {
    let scope = &policy.buckets;
    if scope.is_all() {
        return Ok(Access::Granted);
    }
    let path = parts.uri.path();
    let query = parts.uri.query().unwrap_or("");
    let names = || {
        query
            .split('&')
            .map(|p| p.split_once('=').map_or(p, |(n, _)| n))
    };
    if path == "/" || path.is_empty() {
        let action = names().any(|n| n.eq_ignore_ascii_case("Action"));
        return if parts.method == Method::GET && !action {
            Ok(Access::ListBucketsFiltered)
        } else {
            Err(denied(
                "this key may only list its buckets at the service level",
            ))
        };
    }
    let bucket = checked_bucket(path.strip_prefix('/').unwrap_or(path))
        .ok_or_else(|| denied("the request's path names no bucket this key may use"))?;
    if !scope.allows(&bucket) {
        return Err(denied("this key may not use the bucket"));
    }
    let mut sources = parts.headers.get_all("x-amz-copy-source").iter();
    if let Some(source) = sources.next() {
        if sources.next().is_some() {
            return Err(denied("more than one x-amz-copy-source"));
        }
        let source = source
            .to_str()
            .map_err(|_| denied("x-amz-copy-source is not ASCII"))?;
        let source = source.split_once('?').map_or(source, |(s, _)| s);
        let source = source.strip_prefix('/').unwrap_or(source);
        match checked_bucket(source) {
            Some(b) if scope.allows(&b) && source.contains('/') => {}
            _ => return Err(denied("this key may not read the copy source's bucket")),
        }
    }
    if parts.method != Method::GET
        && parts.method != Method::HEAD
        && names().any(|n| WRITES_ELSEWHERE.contains(&n))
    {
        return Err(denied(
            "this key may not set a configuration that names a target bucket",
        ));
    }
    Ok(Access::Granted)
}

/// The decoded bucket of `rest` (a path without its leading `/`): its
/// first segment; `None` when it is empty, does not decode to UTF-8, or
/// the path holds a `.` or `..` segment.
fn checked_bucket(rest: &str) -> Option<String> {
    let decoded = percent_decode_str(rest).decode_utf8().ok()?;
    if decoded.split('/').any(|s| s == "." || s == "..") {
        return None;
    }
    let bucket = decoded.split('/').next().unwrap_or("");
    (!bucket.is_empty()).then(|| bucket.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenancy::BucketScope;

    fn policy(buckets: &str) -> Policy {
        Policy {
            buckets: BucketScope::parse(buckets).unwrap(),
            store: None,
        }
    }

    fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn check(
        p: &Policy,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
    ) -> Result<Access, &'static str> {
        authorize(p, &parts(method, uri, headers)).map_err(|e| {
            assert_eq!(e.status, StatusCode::FORBIDDEN);
            e.code
        })
    }

    #[test]
    fn unrestricted_passes_everything() {
        let p = Policy::unrestricted();
        for (m, u) in [
            ("GET", "/"),
            ("POST", "/?Action=CreateUser"),
            ("GET", "/beta/../x"),
        ] {
            assert_eq!(check(&p, m, u, &[]), Ok(Access::Granted));
        }
    }

    #[test]
    fn buckets_in_and_out_of_scope() {
        let p = policy("alpha,team-*");
        let ok = Ok(Access::Granted);
        let no = Err("AccessDenied");
        for (m, u, want) in [
            ("GET", "/alpha/k", ok),
            ("PUT", "/alpha", ok),
            ("DELETE", "/alpha", ok),
            ("GET", "/alpha?list-type=2", ok),
            ("POST", "/alpha?delete", ok),
            ("PUT", "/team-x/a/b", ok),
            ("GET", "/%61lpha/k", ok),
            ("GET", "/beta/k", no),
            ("PUT", "/beta", no),
            ("GET", "/%62eta/k", no),
            ("GET", "/alphabet/k", no),
            ("GET", "//beta/k", no),
            ("GET", "/alpha/../beta/k", no),
            ("GET", "/alpha/%2E%2E/beta/k", no),
            ("GET", "/alpha/./k", no),
            ("GET", "/alpha%2F..%2Fbeta/k", no),
            ("GET", "/%FF/k", no),
            ("POST", "/?Action=CreateUser", no),
            ("GET", "/?Action=ListUsers", no),
            ("PUT", "/", no),
            ("PUT", "/alpha?logging", no),
            ("PUT", "/alpha?replication", no),
            ("PUT", "/alpha?notification", no),
            ("GET", "/alpha?logging", ok),
        ] {
            assert_eq!(check(&p, m, u, &[]), want, "{m} {u}");
        }
        assert_eq!(check(&p, "GET", "/", &[]), Ok(Access::ListBucketsFiltered));
        assert_eq!(
            check(&p, "GET", "/?max-buckets=10", &[]),
            Ok(Access::ListBucketsFiltered)
        );
    }

    #[test]
    fn copy_sources() {
        let p = policy("alpha,gamma");
        let ok = Ok(Access::Granted);
        let no = Err("AccessDenied");
        for (src, want) in [
            ("/alpha/k", ok),
            ("alpha/k", ok),
            ("gamma/a%20b?versionId=1", ok),
            ("/beta/k", no),
            ("beta/k", no),
            ("%62eta/k", no),
            ("alpha/../beta/k", no),
            ("alpha", no),
            ("/", no),
            ("arn:aws:s3:us-east-1:1:accesspoint/x/object/k", no),
        ] {
            assert_eq!(
                check(&p, "PUT", "/alpha/copy", &[("x-amz-copy-source", src)]),
                want,
                "{src}"
            );
        }
        let two = parts(
            "PUT",
            "/alpha/copy",
            &[
                ("x-amz-copy-source", "alpha/k"),
                ("x-amz-copy-source", "alpha/j"),
            ],
        );
        assert!(authorize(&p, &two).is_err());
    }
}
