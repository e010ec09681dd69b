//! `plain::forward::forward` through the embedded store: the client's own headers
//! stay behind, the store's answer comes back as it is.

#![forbid(unsafe_code)]

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;

use hipobj_gateway::body::Body;
use hipobj_gateway::plain::forward::forward;
use hipobj_gateway::upstream::{EmbeddedUpstream, Payload, RemoteUpstream, Upstream};
use hipobj_net::sigv4::EMPTY_SHA256;

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

async fn send(
    up: &dyn Upstream,
    method: Method,
    target: &str,
    headers: &[(&str, &str)],
    body: Bytes,
    decoded_length: Option<u64>,
    payload: Payload,
) -> (http::response::Parts, Bytes) {
    let mut req = Request::builder().method(method).uri(target);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let (parts, _) = req.body(()).unwrap().into_parts();
    let resp = forward(up, parts, Body::from(body), decoded_length, payload)
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    (parts, body.collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn client_signature_and_framing_stay_behind() {
    let dir = tempfile::tempdir().unwrap();
    let up = EmbeddedUpstream::new(dir.path(), "us-east-1").unwrap();
    let client_sig: &[(&str, &str)] = &[
        ("host", "gateway.example:8080"),
        ("authorization", "AWS4-HMAC-SHA256 Credential=CLIENT/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"),
        ("x-amz-date", "20250101T000000Z"),
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("connection", "keep-alive"),
    ];
    let (p, _) = send(
        &up,
        Method::PUT,
        "/bkt",
        client_sig,
        Bytes::new(),
        None,
        Payload::Sha256(EMPTY_SHA256.into()),
    )
    .await;
    assert_eq!(p.status, StatusCode::OK);

    // An aws-chunked upload as the auth layer hands it on: the body decoded,
    // the client's framing headers still on the request.
    let data = Bytes::from_static(b"hello, decoded world");
    let mut headers = client_sig.to_vec();
    headers.retain(|(k, _)| *k != "x-amz-content-sha256");
    headers.extend([
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        ("content-encoding", "aws-chunked"),
        ("content-length", "999"),
        ("x-amz-decoded-content-length", "20"),
        ("x-amz-rdma-token", "not-for-the-store"),
        ("x-amz-meta-colour", "blue"),
        ("content-type", "text/plain"),
    ]);
    let (p, _) = send(
        &up,
        Method::PUT,
        "/bkt/k%20x",
        &headers,
        data.clone(),
        Some(20),
        Payload::Sha256(sha256_hex(&data)),
    )
    .await;
    assert_eq!(p.status, StatusCode::OK);

    let (p, body) = send(
        &up,
        Method::GET,
        "/bkt/k%20x",
        &[],
        Bytes::new(),
        None,
        Payload::Unsigned,
    )
    .await;
    assert_eq!(p.status, StatusCode::OK);
    assert_eq!(body, data);
    assert_eq!(p.headers["x-amz-meta-colour"], "blue");
    assert_eq!(p.headers["content-type"], "text/plain");
    assert_eq!(p.headers["content-length"], "20");

    // A presigned GET's signature parameters do not reach the store.
    let (p, body) = send(
        &up,
        Method::GET,
        "/bkt/k%20x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=CLIENT%2F20250101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20250101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=00",
        &[],
        Bytes::new(),
        None,
        Payload::Unsigned,
    )
    .await;
    assert_eq!(p.status, StatusCode::OK);
    assert_eq!(body, data);

    // The store's own errors pass through untouched.
    let (p, body) = send(
        &up,
        Method::GET,
        "/bkt/missing",
        &[],
        Bytes::new(),
        None,
        Payload::Unsigned,
    )
    .await;
    assert_eq!(p.status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains("<Code>NoSuchKey</Code>"));
}

#[tokio::test]
async fn unreachable_store_is_502() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = hipobj_gateway::config::KeyPair {
        access_key: "AK".into(),
        secret_key: "SK".into(),
    };
    let up = RemoteUpstream::new(&format!("http://{addr}"), key, "us-east-1").unwrap();
    let (parts, _) = Request::get("/b/k").body(()).unwrap().into_parts();
    let err = forward(&up, parts, Body::empty(), None, Payload::Unsigned)
        .await
        .unwrap_err();
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert_eq!(err.code, "ServiceUnavailable");
    assert!(!err.message.contains(&addr.to_string()));
    let resp = err.into_response("req-1");
    assert_eq!(resp.headers()["x-amz-request-id"], "req-1");
}
