//! Which client headers reach the store.

#![forbid(unsafe_code)]

use http::header::{HeaderMap, HeaderName, HeaderValue};

use hipobj_gateway::header_filter::forwardable_headers;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn signature_and_hop_headers_are_dropped() {
    let h = headers(&[
        ("host", "gateway:8080"),
        (
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AK/20250101/us-east-1/s3/aws4_request, ...",
        ),
        ("x-amz-date", "20250101T000000Z"),
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-security-token", "tok"),
        ("x-amz-rdma-token", "AAAA"),
        ("x-amz-rdma-whatever", "1"),
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("transfer-encoding", "chunked"),
        ("te", "trailers"),
        ("trailer", "x-amz-checksum-crc32"),
        ("upgrade", "h2c"),
        ("proxy-authorization", "Basic x"),
        ("proxy-connection", "keep-alive"),
        ("expect", "100-continue"),
    ]);
    let out = forwardable_headers(&h);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn end_to_end_headers_are_kept() {
    let h = headers(&[
        ("content-type", "text/plain"),
        ("content-length", "10"),
        ("content-md5", "XrY7u+Ae7tCTyyK7j1rNww=="),
        ("range", "bytes=2-5"),
        ("if-match", "\"abc\""),
        ("x-amz-meta-colour", "blue"),
        ("x-amz-meta-colour", "green"),
        ("x-amz-storage-class", "STANDARD"),
        ("x-amz-checksum-crc32", "AAAAAA=="),
        ("x-amz-sdk-checksum-algorithm", "CRC32"),
        ("cache-control", "no-cache"),
        ("content-encoding", "gzip"),
    ]);
    let out = forwardable_headers(&h);
    assert_eq!(out.len(), h.len(), "{out:?}");
    let metas: Vec<_> = out.get_all("x-amz-meta-colour").iter().collect();
    assert_eq!(metas, ["blue", "green"]);
    assert_eq!(out["content-length"], "10");
    assert_eq!(out["content-encoding"], "gzip");
}

#[test]
fn aws_chunked_framing_is_removed() {
    let h = headers(&[
        ("content-encoding", "aws-chunked"),
        ("content-length", "10240"),
        ("x-amz-decoded-content-length", "10000"),
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        ("content-type", "application/octet-stream"),
    ]);
    let out = forwardable_headers(&h);
    assert_eq!(out.get("content-encoding"), None);
    assert_eq!(out["content-length"], "10000");
    assert_eq!(out.get("x-amz-decoded-content-length"), None);
    assert_eq!(out["content-type"], "application/octet-stream");
    assert_eq!(out.len(), 2);
}

#[test]
fn only_the_aws_chunked_token_is_stripped() {
    let h = headers(&[
        ("content-encoding", "aws-chunked, gzip"),
        ("x-amz-decoded-content-length", "5"),
    ]);
    let out = forwardable_headers(&h);
    assert_eq!(out["content-encoding"], "gzip");
    let h = headers(&[
        ("content-encoding", "gzip"),
        ("content-encoding", "AWS-Chunked"),
    ]);
    let out = forwardable_headers(&h);
    assert_eq!(out["content-encoding"], "gzip");
    assert_eq!(out.get_all("content-encoding").iter().count(), 1);
}

#[test]
fn streaming_without_decoded_length_drops_the_encoded_length() {
    let h = headers(&[
        ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
        ("content-length", "10240"),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
        ("x-amz-sdk-checksum-algorithm", "CRC32"),
    ]);
    let out = forwardable_headers(&h);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn headers_named_by_connection_are_dropped() {
    let h = headers(&[
        ("connection", "close, X-Private"),
        ("x-private", "1"),
        ("x-public", "2"),
    ]);
    let out = forwardable_headers(&h);
    assert_eq!(out.len(), 1);
    assert_eq!(out["x-public"], "2");
}

#[test]
fn bad_decoded_length_is_not_turned_into_content_length() {
    let h = headers(&[
        ("x-amz-decoded-content-length", "lots"),
        ("content-length", "99"),
    ]);
    let out = forwardable_headers(&h);
    assert!(out.is_empty(), "{out:?}");
}
