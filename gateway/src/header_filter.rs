//! Which headers go on from one hop to the next: the one filter the plain
//! path (a client's request to the store, the store's answer back) and the
//! RDMA path (a token request's head to the store, the store's object
//! headers onto the RDMA answer) share.
//!
//! Hop-by-hop headers are never forwarded in either direction; the list is
//! [`hipobj_net::HOP_BY_HOP`], the one the outbound signer also leaves out.
//!
//! A leaf module: it depends on `http` and `hipobj-net` only.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH,
};

use hipobj_net::HOP_BY_HOP;

/// Request headers that belong to the client's signature, framing or hop
/// and are never forwarded; the upstream sets its own `Host` and signature.
const CLIENT_ONLY: &[&str] = &[
    "host",
    "expect",
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
    "x-amz-decoded-content-length",
];

/// The prefix of this project's own request headers (`x-amz-rdma-token`, ...).
const RDMA_PREFIX: &str = "x-amz-rdma-";

/// The headers that must not be forwarded removed from a client's request:
///
/// - hop-by-hop headers (`Connection`, `Keep-Alive`, `TE`, `Trailer`,
///   `Transfer-Encoding`, `Upgrade`, `Proxy-*`) and any header `Connection`
///   names;
/// - `Host` and `Expect` (the upstream connection has its own);
/// - the client's signature: `Authorization`, `X-Amz-Date`,
///   `x-amz-content-sha256`, `x-amz-security-token`;
/// - `x-amz-rdma-*`;
/// - the aws-chunked framing: the `aws-chunked` token of
///   `Content-Encoding` (the header goes when nothing else is left), the
///   encoded `Content-Length`, and `x-amz-decoded-content-length`, which
///   becomes the `Content-Length`;
/// - `x-amz-trailer`, whose trailer the decoded body no longer carries, and
///   with it `x-amz-sdk-checksum-algorithm` (a store refuses an algorithm
///   named without its checksum). A trailing checksum is not lost: the
///   auth layer checked it against the decoded bytes before the body's
///   last chunk went out (a mismatch fails the body with `BadDigest`);
///   nothing of it is forwarded.
pub fn forwardable_headers(headers: &HeaderMap) -> HeaderMap {
    let connection_named: Vec<String> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();

    let content_encoding: Vec<&str> = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let streaming_sha = headers
        .get("x-amz-content-sha256")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("STREAMING-"));
    let chunked = streaming_sha
        || headers.contains_key("x-amz-decoded-content-length")
        || content_encoding
            .iter()
            .any(|t| t.eq_ignore_ascii_case("aws-chunked"));
    let has_trailer = headers.contains_key("x-amz-trailer");

    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || CLIENT_ONLY.contains(&n)
            || n.starts_with(RDMA_PREFIX)
            || connection_named.iter().any(|c| c == n)
            || n == "x-amz-trailer"
            || (has_trailer && n == "x-amz-sdk-checksum-algorithm")
            || (chunked && name == CONTENT_LENGTH)
            || name == CONTENT_ENCODING
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }

    let encodings: Vec<&str> = content_encoding
        .into_iter()
        .filter(|t| !t.eq_ignore_ascii_case("aws-chunked"))
        .collect();
    if !encodings.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&encodings.join(", ")) {
            out.insert(CONTENT_ENCODING, v);
        }
    }

    if let Some(decoded) = headers
        .get("x-amz-decoded-content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        out.insert(CONTENT_LENGTH, HeaderValue::from(decoded));
    }
    out
}

/// Removes hop-by-hop headers, and those `Connection` names, in place.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// Headers of an upstream answer that describe the object, copied onto an
/// RDMA answer (whose own body is empty): all but the hop-by-hop ones and
/// `Content-Length`.
pub fn copy_object_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from {
        if HOP_BY_HOP.contains(&k.as_str()) || *k == CONTENT_LENGTH {
            continue;
        }
        to.append(k.clone(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_hop_by_hop_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-foo"));
        h.insert("x-foo", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("etag", HeaderValue::from_static("\"abc\""));
        h.insert("content-length", HeaderValue::from_static("5"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        assert_eq!(h["etag"], "\"abc\"");
        assert_eq!(h["content-length"], "5");
    }

    #[test]
    fn object_headers_leave_the_hop_and_the_length_behind() {
        let mut from = HeaderMap::new();
        from.insert("etag", HeaderValue::from_static("\"abc\""));
        from.insert("content-length", HeaderValue::from_static("5"));
        from.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        from.insert("connection", HeaderValue::from_static("keep-alive"));
        from.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        from.insert("x-amz-meta-a", HeaderValue::from_static("1"));
        let mut to = HeaderMap::new();
        to.insert("x-amz-rdma-reply", HeaderValue::from_static("200"));
        copy_object_headers(&from, &mut to);
        assert_eq!(to.len(), 3, "{to:?}");
        assert_eq!(to["etag"], "\"abc\"");
        assert_eq!(to["x-amz-meta-a"], "1");
        assert_eq!(to["x-amz-rdma-reply"], "200");
    }
}
