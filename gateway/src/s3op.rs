//! Which S3 operation a request is, with its bucket and key: the one
//! classifier the metrics, the RDMA path (which serves [`Operation::GetObject`],
//! [`Operation::PutObject`] and [`Operation::UploadPart`]) and the
//! virtual-hosted addressing share.
//!
//! A request is path-style (`/bucket/key`) unless its `Host` (port left
//! out) is `bucket.<domain>` for one of the configured domains (MinIO's
//! `MINIO_DOMAIN`, the gateway's `--domain`), in which case it is
//! virtual-hosted: the bucket is the host's first labels and the path is
//! `/key`. Presigned-URL parameters (`X-Amz-*`) and `response-*` overrides
//! say nothing of the operation and are skipped.
//!
//! A leaf module: it depends on `http` only.

use http::Method;

/// An S3 operation, by its API name; `Other` for anything not told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    ListBuckets,
    ListMultipartUploads,
    ListObjectVersions,
    GetBucketLocation,
    ListObjectsV2,
    ListObjects,
    CreateBucket,
    DeleteBucket,
    HeadBucket,
    DeleteObjects,
    PostObject,
    ListParts,
    GetObject,
    HeadObject,
    UploadPartCopy,
    UploadPart,
    CopyObject,
    PutObject,
    CreateMultipartUpload,
    CompleteMultipartUpload,
    AbortMultipartUpload,
    DeleteObject,
    Other,
}

impl Operation {
    /// Its S3 name, as the metrics label it.
    pub fn name(self) -> &'static str {
        use Operation::*;
        match self {
            ListBuckets => "ListBuckets",
            ListMultipartUploads => "ListMultipartUploads",
            ListObjectVersions => "ListObjectVersions",
            GetBucketLocation => "GetBucketLocation",
            ListObjectsV2 => "ListObjectsV2",
            ListObjects => "ListObjects",
            CreateBucket => "CreateBucket",
            DeleteBucket => "DeleteBucket",
            HeadBucket => "HeadBucket",
            DeleteObjects => "DeleteObjects",
            PostObject => "PostObject",
            ListParts => "ListParts",
            GetObject => "GetObject",
            HeadObject => "HeadObject",
            UploadPartCopy => "UploadPartCopy",
            UploadPart => "UploadPart",
            CopyObject => "CopyObject",
            PutObject => "PutObject",
            CreateMultipartUpload => "CreateMultipartUpload",
            CompleteMultipartUpload => "CompleteMultipartUpload",
            AbortMultipartUpload => "AbortMultipartUpload",
            DeleteObject => "DeleteObject",
            Other => "Other",
        }
    }
}

/// A classified request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Request<'a> {
    /// The operation.
    pub op: Operation,
    /// The bucket (empty for the service, `ListBuckets`).
    pub bucket: &'a str,
    /// The key as it stands in the path (still percent-encoded; empty for
    /// bucket operations).
    pub key: &'a str,
    /// Whether the bucket came from the `Host` (virtual-hosted style).
    pub virtual_host: bool,
}

/// The bucket a `Host` value names under one of `domains`: `bucket` for
/// `bucket.<domain>[:port]` (compared without case), `None` for the domain
/// itself, another host, or a bucket that is not a valid bucket name.
pub fn bucket_from_host<'a>(host: &'a str, domains: &[String]) -> Option<&'a str> {
    let name = strip_port(host);
    domains.iter().find_map(|d| {
        let d = d.trim_end_matches('.');
        if d.is_empty() || name.len() <= d.len() + 1 {
            return None;
        }
        let split = name.len() - d.len();
        let (bucket, suffix) = (name.get(..split - 1)?, name.get(split..)?);
        let dot = name.as_bytes().get(split - 1) == Some(&b'.');
        (dot && suffix.eq_ignore_ascii_case(d) && valid_bucket(bucket)).then_some(bucket)
    })
}

/// `host[:port]` or `[v6]:port` less its port.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map_or(host, |(h, _)| h);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// S3's bucket naming rules, as far as they concern a host name: 3 to 63
/// lowercase letters, digits, dots and hyphens, a letter or digit at
/// either end.
fn valid_bucket(b: &str) -> bool {
    let bytes = b.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&bytes.len())
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
}

/// Classifies a request: `host` is its `Host` (or `:authority`), `path` the
/// raw path, `query` the raw query, `copy_source` whether it carries
/// `x-amz-copy-source`, `domains` the configured virtual-host domains.
pub fn classify<'a>(
    method: &Method,
    host: Option<&'a str>,
    path: &'a str,
    query: Option<&str>,
    copy_source: bool,
    domains: &[String],
) -> S3Request<'a> {
    let path = path.strip_prefix('/').unwrap_or(path);
    let (bucket, key, virtual_host) = match host.and_then(|h| bucket_from_host(h, domains)) {
        Some(b) => (b, path, true),
        None => {
            let (b, k) = path.split_once('/').unwrap_or((path, ""));
            (b, k, false)
        }
    };
    let q: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        .map(|p| p.split_once('=').map_or(p, |(k, _)| k))
        .filter(|k| !k.is_empty() && !k.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("x-amz-")))
        .collect();
    let op = operation(method, bucket, key, &q, copy_source);
    S3Request {
        op,
        bucket,
        key,
        virtual_host,
    }
}

fn operation(method: &Method, bucket: &str, key: &str, q: &[&str], copy: bool) -> Operation {
    use Operation::*;
    let has = |k: &str| q.contains(&k);
    let only = |allowed: &[&str]| {
        q.iter()
            .all(|k| allowed.contains(k) || k.starts_with("response-"))
    };
    if bucket.is_empty() {
        return if *method == Method::GET {
            ListBuckets
        } else {
            Other
        };
    }
    const LIST: &[&str] = &[
        "prefix",
        "delimiter",
        "marker",
        "max-keys",
        "encoding-type",
        "continuation-token",
        "start-after",
        "fetch-owner",
        "list-type",
    ];
    if key.is_empty() {
        return match *method {
            Method::GET if has("uploads") => ListMultipartUploads,
            Method::GET if has("versions") => ListObjectVersions,
            Method::GET if has("location") => GetBucketLocation,
            Method::GET if only(LIST) && has("list-type") => ListObjectsV2,
            Method::GET if only(LIST) => ListObjects,
            Method::PUT if q.is_empty() => CreateBucket,
            Method::DELETE if q.is_empty() => DeleteBucket,
            Method::HEAD if q.is_empty() => HeadBucket,
            Method::POST if has("delete") => DeleteObjects,
            Method::POST if q.is_empty() => PostObject,
            _ => Other,
        };
    }
    let part = has("partNumber") && has("uploadId") && only(&["partNumber", "uploadId"]);
    match *method {
        Method::GET if has("uploadId") => ListParts,
        Method::GET if only(&["partNumber", "versionId"]) => GetObject,
        Method::HEAD if only(&["partNumber", "versionId"]) => HeadObject,
        Method::PUT if part && copy => UploadPartCopy,
        Method::PUT if part => UploadPart,
        Method::PUT if q.is_empty() && copy => CopyObject,
        Method::PUT if q.is_empty() => PutObject,
        Method::POST if has("uploads") => CreateMultipartUpload,
        Method::POST if has("uploadId") => CompleteMultipartUpload,
        Method::DELETE if has("uploadId") => AbortMultipartUpload,
        Method::DELETE if only(&["versionId"]) => DeleteObject,
        _ => Other,
    }
}

/// The path-style form of a virtual-hosted request's path and query:
/// `/bucket` + `path` (`/key`), the query kept; `None` when `host` names
/// no bucket under `domains` (the request is path-style already).
pub fn path_style(host: Option<&str>, path_and_query: &str, domains: &[String]) -> Option<String> {
    let bucket = bucket_from_host(host?, domains)?;
    let rest = if path_and_query.starts_with('/') {
        path_and_query.to_string()
    } else {
        format!("/{path_and_query}")
    };
    // `/key` → `/bucket/key`; `/` (the bucket itself) → `/bucket`, with
    // the query kept (`/?list-type=2` → `/bucket?list-type=2`).
    Some(match rest.strip_prefix("/?") {
        Some(q) => format!("/{bucket}?{q}"),
        None if rest == "/" => format!("/{bucket}"),
        None => format!("/{bucket}{rest}"),
    })
}

/// A path-style request's S3 operation (a virtual-hosted request is
/// path-style by the time it is asked): what the RDMA path serves a token
/// request as, `Other` for anything not told apart.
pub fn request_operation(method: &Method, uri: &http::Uri, headers: &http::HeaderMap) -> Operation {
    let copy = headers.contains_key("x-amz-copy-source");
    classify(method, None, uri.path(), uri.query(), copy, &[]).op
}

/// The name of a path-style request's S3 operation ([`request_operation`]),
/// for the metrics' `op` label and the places that ask "is this a
/// CompleteMultipartUpload": a fixed set of names, `Other` for anything
/// else.
pub fn operation_name(method: &Method, uri: &http::Uri, headers: &http::HeaderMap) -> &'static str {
    request_operation(method, uri, headers).name()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: Method, uri: &str) -> &'static str {
        let (path, query) = uri
            .split_once('?')
            .map_or((uri, None), |(p, q)| (p, Some(q)));
        classify(&method, None, path, query, false, &[]).op.name()
    }

    fn vop(method: Method, host: &str, uri: &str) -> (Operation, String, String, bool) {
        let domains = vec!["s3.example.com".to_string(), "localhost".to_string()];
        let (path, query) = uri
            .split_once('?')
            .map_or((uri, None), |(p, q)| (p, Some(q)));
        let r = classify(&method, Some(host), path, query, false, &domains);
        (
            r.op,
            r.bucket.to_string(),
            r.key.to_string(),
            r.virtual_host,
        )
    }

    #[test]
    fn path_style_operations() {
        assert_eq!(op(Method::GET, "/"), "ListBuckets");
        assert_eq!(op(Method::PUT, "/b"), "CreateBucket");
        assert_eq!(op(Method::GET, "/b?list-type=2&prefix=a"), "ListObjectsV2");
        assert_eq!(op(Method::GET, "/b"), "ListObjects");
        assert_eq!(op(Method::GET, "/b?uploads"), "ListMultipartUploads");
        assert_eq!(op(Method::GET, "/b?policy"), "Other");
        assert_eq!(op(Method::POST, "/b?delete"), "DeleteObjects");
        assert_eq!(op(Method::POST, "/b"), "PostObject");
        assert_eq!(op(Method::GET, "/b/k"), "GetObject");
        assert_eq!(op(Method::GET, "/b/k?partNumber=2"), "GetObject");
        assert_eq!(
            op(Method::GET, "/b/k?X-Amz-Signature=ff&X-Amz-Date=1"),
            "GetObject"
        );
        assert_eq!(
            op(Method::PUT, "/b/k?X-Amz-Signature=ff&x-amz-expires=1"),
            "PutObject"
        );
        assert_eq!(op(Method::GET, "/b/k?response-content-type=a"), "GetObject");
        assert_eq!(op(Method::GET, "/b/k?tagging"), "Other");
        assert_eq!(op(Method::HEAD, "/b/k"), "HeadObject");
        assert_eq!(op(Method::PUT, "/b/k"), "PutObject");
        assert_eq!(op(Method::PUT, "/b/k?tagging"), "Other");
        assert_eq!(
            op(Method::PUT, "/b/k?partNumber=1&uploadId=x"),
            "UploadPart"
        );
        assert_eq!(
            op(Method::PUT, "/b/k?partNumber=1&uploadId=x&X-Amz-Expires=9"),
            "UploadPart"
        );
        assert_eq!(op(Method::PUT, "/b/k?partNumber=1&uploadId=x&acl"), "Other");
        assert_eq!(op(Method::POST, "/b/k?uploads"), "CreateMultipartUpload");
        assert_eq!(
            op(Method::POST, "/b/k?uploadId=x"),
            "CompleteMultipartUpload"
        );
        assert_eq!(
            op(Method::DELETE, "/b/k?uploadId=x"),
            "AbortMultipartUpload"
        );
        assert_eq!(op(Method::GET, "/b/k?uploadId=x"), "ListParts");
        assert_eq!(op(Method::DELETE, "/b/k"), "DeleteObject");
        let c = |q: Option<&str>| classify(&Method::PUT, None, "/b/k", q, true, &[]).op;
        assert_eq!(c(None), Operation::CopyObject);
        assert_eq!(
            c(Some("partNumber=1&uploadId=u")),
            Operation::UploadPartCopy
        );
        let r = classify(
            &Method::GET,
            Some("b.s3.example.com"),
            "/b/k%20x/y",
            None,
            false,
            &[],
        );
        assert_eq!((r.bucket, r.key, r.virtual_host), ("b", "k%20x/y", false));
    }

    #[test]
    fn virtual_hosted_operations() {
        use Operation::*;
        let s = |x: &str| x.to_string();
        assert_eq!(
            vop(Method::GET, "bkt.s3.example.com", "/k/x"),
            (GetObject, s("bkt"), s("k/x"), true)
        );
        assert_eq!(
            vop(Method::PUT, "bkt.localhost:9000", "/k"),
            (PutObject, s("bkt"), s("k"), true)
        );
        // The domain without case; the bucket as S3 names buckets only.
        assert_eq!(
            vop(Method::PUT, "bkt.LocalHost:9000", "/k"),
            (PutObject, s("bkt"), s("k"), true)
        );
        assert_eq!(
            vop(Method::PUT, "BKT.localhost:9000", "/k"),
            (CreateBucket, s("k"), s(""), false)
        );
        assert_eq!(
            vop(
                Method::PUT,
                "my.bkt.localhost",
                "/k?partNumber=2&uploadId=u"
            ),
            (UploadPart, s("my.bkt"), s("k"), true)
        );
        assert_eq!(
            vop(Method::GET, "bkt.localhost", "/?list-type=2"),
            (ListObjectsV2, s("bkt"), s(""), true)
        );
        assert_eq!(
            vop(Method::PUT, "bkt.localhost", "/"),
            (CreateBucket, s("bkt"), s(""), true)
        );
        // The domain itself, another host, an IP: path-style.
        assert_eq!(
            vop(Method::GET, "localhost:9000", "/bkt/k"),
            (GetObject, s("bkt"), s("k"), false)
        );
        assert_eq!(
            vop(Method::GET, "127.0.0.1:9000", "/bkt/k"),
            (GetObject, s("bkt"), s("k"), false)
        );
        assert_eq!(
            vop(Method::GET, "bkt.other.com", "/bkt/k"),
            (GetObject, s("bkt"), s("k"), false)
        );
        assert_eq!(
            vop(Method::GET, "bktlocalhost", "/bkt/k"),
            (GetObject, s("bkt"), s("k"), false)
        );
    }

    #[test]
    fn hosts() {
        let d = vec!["s3.example.com".to_string(), "localhost.".to_string()];
        assert_eq!(bucket_from_host("bk1.s3.example.com", &d), Some("bk1"));
        assert_eq!(bucket_from_host("bk1.S3.Example.com:443", &d), Some("bk1"));
        assert_eq!(bucket_from_host("abc.localhost", &d), Some("abc"));
        assert_eq!(bucket_from_host("s3.example.com", &d), None);
        assert_eq!(bucket_from_host(".s3.example.com", &d), None);
        assert_eq!(bucket_from_host("ab.s3.example.com", &d), None, "too short");
        assert_eq!(bucket_from_host("-ab.localhost", &d), None);
        assert_eq!(bucket_from_host("a_b.localhost", &d), None);
        assert_eq!(bucket_from_host("xs3.example.com", &d), None);
        assert_eq!(bucket_from_host("[::1]:9000", &d), None);
        assert_eq!(bucket_from_host("abc.localhost", &[]), None);
        assert_eq!(bucket_from_host("abc.localhost", &[String::new()]), None);
    }

    #[test]
    fn path_style_rewrites() {
        let d = vec!["localhost".to_string()];
        let p = |h: &str, pq: &str| path_style(Some(h), pq, &d);
        assert_eq!(
            p("bkt.localhost:1", "/k%20x/y?a=1").as_deref(),
            Some("/bkt/k%20x/y?a=1")
        );
        assert_eq!(p("bkt.localhost", "/").as_deref(), Some("/bkt"));
        assert_eq!(
            p("bkt.localhost", "/?list-type=2").as_deref(),
            Some("/bkt?list-type=2")
        );
        assert_eq!(p("localhost", "/bkt/k"), None);
        assert_eq!(path_style(None, "/bkt/k", &d), None);
    }
}
