//! When the gateway gives up on a remote store's answer: the response-head
//! timer starts once the request body has been sent (a slowly streamed body
//! is not cut short), and the operations the store carries out before it
//! answers (CompleteMultipartUpload, CopyObject, UploadPartCopy) are given
//! the long-operation limit instead.
//!
//! The store is a stub served by hyper on a loopback port: it reads the
//! whole request body, records it, waits as long as the request's
//! `x-stub-delay-ms` header says, then answers 200. Only outcomes are
//! asserted; the delays are far from the limits on either side.
//!
//! A store that stops taking the request body (a Ceph cluster with a full
//! OSD blocks writes that way) fails the request after the send-stall
//! limit; a slow client does not (its own timer bounds it).

#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::TcpListener;

use hipobj_gateway::body::Body;
use hipobj_gateway::config::{KeyPair, UpstreamConfig, UpstreamOptions};
use hipobj_gateway::plain::forward::forward;
use hipobj_gateway::upstream::retry::ResponseHeadTimeout;
use hipobj_gateway::upstream::send_watch::BodySendStall;
use hipobj_gateway::upstream::{self, Payload, Upstream, UpstreamError};
use hipobj_net::sigv4::EMPTY_SHA256;

/// The response timeout of every test: far shorter than the trickled
/// bodies and the store's delays.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);

/// What the stub answers CompleteMultipartUpload with.
const COMPLETE_XML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
    <CompleteMultipartUploadResult><Bucket>bucket</Bucket><Key>big</Key>\
    <ETag>\"0123456789abcdef0123456789abcdef-3\"</ETag></CompleteMultipartUploadResult>";

/// A request as the stub read it, body and all.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    target: String,
    body: Bytes,
}

/// The stub store: its address and what it read.
struct Stub {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Stub {
    async fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        answer(req, Arc::clone(&record))
                    });
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), svc)
                        .await;
                });
            }
        });
        Stub { addr, seen }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests read whole, less the health probes (`GET /`).
    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.target != "/")
            .cloned()
            .collect()
    }
}

async fn answer(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or("/".to_owned(), |pq| pq.as_str().to_owned());
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n != body.len()) {
        return Ok(status(StatusCode::BAD_REQUEST));
    }
    seen.lock().unwrap().push(Seen {
        method: parts.method.clone(),
        target: target.clone(),
        body,
    });
    let delay = parts
        .headers
        .get("x-stub-delay-ms")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let complete = parts.method == Method::POST && target.contains("uploadId=");
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("etag", "\"0123456789abcdef0123456789abcdef\"");
    Ok(if complete {
        resp.header("content-type", "application/xml")
            .body(Body::from(COMPLETE_XML))
            .unwrap()
    } else {
        resp.header("content-length", "0")
            .body(Body::empty())
            .unwrap()
    })
}

fn status(s: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = s;
    r
}

fn key_pair() -> KeyPair {
    KeyPair {
        access_key: "TIMEOUTTESTKEY".into(),
        secret_key: "timeout-test-secret-key-0123456789".into(),
    }
}

fn options(long_op_timeout: Duration) -> UpstreamOptions {
    UpstreamOptions {
        response_timeout: RESPONSE_TIMEOUT,
        long_op_timeout,
        // No probe while the tests count requests.
        health_interval: Duration::from_secs(3600),
        ..UpstreamOptions::default()
    }
}

/// The stub behind one remote endpoint, as the gateway builds it.
fn remote(stub: &Stub, long_op_timeout: Duration) -> Arc<dyn Upstream> {
    let cfg = UpstreamConfig::Remote {
        endpoint: stub.endpoint(),
        credentials: key_pair(),
    };
    upstream::build_with(&cfg, "us-east-1", &options(long_op_timeout)).unwrap()
}

/// The stub behind two endpoints of one store (failover sends each request
/// once, to the first).
fn cluster(stub: &Stub, long_op_timeout: Duration) -> Arc<dyn Upstream> {
    let cfg = UpstreamConfig::Cluster {
        endpoints: vec![stub.endpoint(), stub.endpoint()],
        credentials: key_pair(),
    };
    upstream::build_with(&cfg, "us-east-1", &options(long_op_timeout)).unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// `data` as a body that yields `chunks` pieces with `gap` between them,
/// the way a slow client's upload (or an RDMA PUT's channel) arrives.
fn trickled(data: &[u8], chunks: usize, gap: Duration) -> Body {
    let pieces: Vec<Bytes> = data
        .chunks(data.len().div_ceil(chunks))
        .map(Bytes::copy_from_slice)
        .collect();
    let stream = futures::stream::unfold(pieces.into_iter(), move |mut rest| async move {
        let next = rest.next()?;
        tokio::time::sleep(gap).await;
        Some((Ok::<_, std::io::Error>(next), rest))
    });
    Body::from_stream(stream)
}

/// A request's head for `plain::forward::forward`.
fn head(method: Method, target: &str, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut req = Request::builder().method(method).uri(target);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(()).unwrap().into_parts().0
}

/// Sends through the gateway's proxy path; the store's answer with its
/// whole body, or the S3 error the client would get.
async fn through_gateway(
    up: &dyn Upstream,
    parts: http::request::Parts,
    body: Body,
    len: u64,
    payload: Payload,
) -> Result<(StatusCode, Bytes), hipobj_gateway::s3err::S3Error> {
    let resp = forward(up, parts, body, Some(len), payload).await?;
    let (parts, body) = resp.into_parts();
    Ok((parts.status, body.collect().await.unwrap().to_bytes()))
}

/// The error a store's late response head is, and how long was waited.
fn head_timeout(err: &UpstreamError) -> Duration {
    match err {
        UpstreamError::Request(inner) => {
            inner
                .downcast_ref::<ResponseHeadTimeout>()
                .unwrap_or_else(|| panic!("not a response-head timeout: {err:?}"))
                .0
        }
        other => panic!("not a response-head timeout: {other:?}"),
    }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

fn complete_body() -> String {
    "<CompleteMultipartUpload>\
     <Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag></Part>\
     <Part><PartNumber>2</PartNumber><ETag>\"b\"</ETag></Part>\
     </CompleteMultipartUpload>"
        .to_owned()
}

/// (a) A PUT whose body streams for several response timeouts goes
/// through, every byte delivered.
#[tokio::test]
async fn slowly_streamed_put_is_not_cut_short() {
    let stub = Stub::start().await;
    let up = remote(&stub, Duration::from_secs(60));
    let data = pattern(1 << 20);

    // Through the gateway's proxy path, as a client's PutObject: ~1.5 s of
    // body against a 300 ms response timeout.
    let (status, _) = through_gateway(
        up.as_ref(),
        head(Method::PUT, "/bucket/slow.bin", &[]),
        trickled(&data, 15, Duration::from_millis(100)),
        data.len() as u64,
        Payload::Unsigned,
    )
    .await
    .expect("a slowly streamed PUT");
    assert_eq!(status, StatusCode::OK);

    // Straight to the upstream, as the RDMA PUT path sends it (a channel
    // stream, Content-Length set): an UploadPart.
    let target = "/bucket/slow.bin?partNumber=1&uploadId=up1";
    let req = Request::builder()
        .method(Method::PUT)
        .uri(target)
        .header("content-length", data.len())
        .body(trickled(&data, 15, Duration::from_millis(100)))
        .unwrap();
    let resp = up.send(req, Payload::Unsigned).await.expect("UploadPart");
    assert_eq!(resp.status(), StatusCode::OK);

    let seen = stub.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].method, Method::PUT);
    assert_eq!(seen[0].target, "/bucket/slow.bin");
    assert_eq!(seen[1].target, target);
    for s in &seen {
        assert_eq!(s.body.len(), data.len());
        assert!(s.body == data[..], "the bytes differ");
    }
}

/// (b) Once the body is sent, a response head later than the response
/// timeout fails the request as before: 502 ServiceUnavailable to the
/// client, a response-head timeout of the configured length, not retried.
#[tokio::test]
async fn late_response_head_after_the_body_times_out() {
    let stub = Stub::start().await;
    let up = remote(&stub, Duration::from_secs(60));
    let data = pattern(256 << 10);

    let err = through_gateway(
        up.as_ref(),
        head(
            Method::PUT,
            "/bucket/late.bin",
            &[("x-stub-delay-ms", "3000")],
        ),
        trickled(&data, 4, Duration::from_millis(20)),
        data.len() as u64,
        Payload::Unsigned,
    )
    .await
    .expect_err("a response head after the timeout");
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert_eq!(err.code, "ServiceUnavailable");
    assert_eq!(err.message, "the store failed to answer the request");

    // The upstream's own error, for a request without a body (replayable:
    // a timeout is still not retried).
    let req = Request::builder()
        .method(Method::GET)
        .uri("/bucket/late.bin")
        .header("x-stub-delay-ms", "3000")
        .body(Body::empty())
        .unwrap();
    let err = up
        .send(req, Payload::Sha256(EMPTY_SHA256.into()))
        .await
        .expect_err("a response head after the timeout");
    assert_eq!(head_timeout(&err), RESPONSE_TIMEOUT);

    let seen = stub.seen();
    assert_eq!(seen.len(), 2, "sent once each: {seen:?}");
    assert!(seen[0].body == data[..], "the body was sent whole first");
    assert_eq!(seen[1].method, Method::GET);
}

/// (c) CompleteMultipartUpload, CopyObject and UploadPartCopy answered
/// after the response timeout but within the long-operation timeout pass
/// through, body and all.
#[tokio::test]
async fn long_operations_get_the_long_limit() {
    let stub = Stub::start().await;
    for up in [
        remote(&stub, Duration::from_secs(60)),
        cluster(&stub, Duration::from_secs(60)),
    ] {
        let xml = complete_body();
        let (status, body) = through_gateway(
            up.as_ref(),
            head(
                Method::POST,
                "/bucket/big?uploadId=up1",
                &[("x-stub-delay-ms", "1500")],
            ),
            Body::from(xml.clone()),
            xml.len() as u64,
            Payload::Sha256(sha256_hex(xml.as_bytes())),
        )
        .await
        .expect("CompleteMultipartUpload within the long-operation timeout");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, COMPLETE_XML.as_bytes());

        for target in ["/bucket/copy", "/bucket/big?partNumber=2&uploadId=up1"] {
            let (status, _) = through_gateway(
                up.as_ref(),
                head(
                    Method::PUT,
                    target,
                    &[
                        ("x-amz-copy-source", "/bucket/src"),
                        ("x-stub-delay-ms", "1500"),
                    ],
                ),
                Body::empty(),
                0,
                Payload::Sha256(EMPTY_SHA256.into()),
            )
            .await
            .unwrap_or_else(|e| panic!("copy to {target}: {e}"));
            assert_eq!(status, StatusCode::OK, "{target}");
        }
    }
    let seen = stub.seen();
    assert_eq!(seen.len(), 6, "each sent once: {seen:?}");
    assert_eq!(seen[0].body, complete_body().as_bytes());
}

/// (c) ... and beyond the long-operation timeout they fail as any late
/// answer does, after the long limit.
#[tokio::test]
async fn long_operations_beyond_the_long_limit_time_out() {
    let stub = Stub::start().await;
    let long = Duration::from_millis(600);
    let up = remote(&stub, long);
    let xml = complete_body();

    let err = through_gateway(
        up.as_ref(),
        head(
            Method::POST,
            "/bucket/big?uploadId=up1",
            &[("x-stub-delay-ms", "5000")],
        ),
        Body::from(xml.clone()),
        xml.len() as u64,
        Payload::Sha256(sha256_hex(xml.as_bytes())),
    )
    .await
    .expect_err("CompleteMultipartUpload beyond the long-operation timeout");
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert_eq!(err.code, "ServiceUnavailable");
    assert_eq!(err.message, "the store failed to answer the request");

    // It is the long limit that ran out.
    let req = Request::builder()
        .method(Method::POST)
        .uri("/bucket/big?uploadId=up1")
        .header("content-length", xml.len())
        .header("x-stub-delay-ms", "5000")
        .body(Body::from(xml.clone()))
        .unwrap();
    let err = up
        .send(req, Payload::Sha256(sha256_hex(xml.as_bytes())))
        .await
        .expect_err("CompleteMultipartUpload beyond the long-operation timeout");
    assert_eq!(head_timeout(&err), long);

    let req = Request::builder()
        .method(Method::PUT)
        .uri("/bucket/copy")
        .header("x-amz-copy-source", "/bucket/src")
        .header("x-stub-delay-ms", "5000")
        .body(Body::empty())
        .unwrap();
    let err = up
        .send(req, Payload::Sha256(EMPTY_SHA256.into()))
        .await
        .expect_err("CopyObject beyond the long-operation timeout");
    assert_eq!(head_timeout(&err), long);

    let seen = stub.seen();
    assert_eq!(seen.len(), 3, "each sent once: {seen:?}");
    assert_eq!(seen[0].body, xml.as_bytes());
}

/// The send-stall limit of the stall tests.
const SEND_STALL: Duration = Duration::from_millis(400);

/// A store that reads a request's head and the first `take` bytes of its
/// body, then takes nothing more and answers nothing, with the connection
/// left open (as radosgw does while its cluster is full); `held` keeps
/// its connections.
async fn stops_reading(take: usize) -> (String, Arc<Mutex<Vec<tokio::net::TcpStream>>>) {
    use tokio::io::AsyncReadExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let keep = Arc::clone(&keep);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                let mut got = 0;
                while got < take {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
                keep.lock().unwrap().push(socket);
            });
        }
    });
    (format!("http://{addr}"), held)
}

/// (e) A store that stops taking the body mid-PUT fails the request once
/// it has taken nothing for the send-stall limit: 502 to the client, the
/// upstream's error a stall of that limit; the RDMA PUT path's request
/// (straight to the upstream) the same.
#[tokio::test]
async fn a_store_that_stops_reading_the_body_fails_the_request() {
    let (endpoint, held) = stops_reading(256 << 10).await;
    let cfg = UpstreamConfig::Remote {
        endpoint,
        credentials: key_pair(),
    };
    let opts = UpstreamOptions {
        send_stall_timeout: SEND_STALL,
        ..options(Duration::from_secs(60))
    };
    let up = upstream::build_with(&cfg, "us-east-1", &opts).unwrap();
    // Far more than the socket buffers on both sides hold.
    let data = pattern(64 << 20);

    let err = tokio::time::timeout(
        Duration::from_secs(60),
        through_gateway(
            up.as_ref(),
            head(Method::PUT, "/bucket/stalled.bin", &[]),
            Body::from(data.clone()),
            data.len() as u64,
            Payload::Unsigned,
        ),
    )
    .await
    .expect("the request ends")
    .expect_err("a store that stops reading");
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert_eq!(err.code, "ServiceUnavailable");

    // As the RDMA PUT path sends it: a stream in pieces, Content-Length set.
    let req = Request::builder()
        .method(Method::PUT)
        .uri("/bucket/stalled.bin?partNumber=1&uploadId=up1")
        .header("content-length", data.len())
        .body(trickled(&data, 64, Duration::ZERO))
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), up.send(req, Payload::Unsigned))
        .await
        .expect("the request ends")
        .expect_err("a store that stops reading");
    match &err {
        UpstreamError::Request(inner) => {
            let stall = inner
                .downcast_ref::<BodySendStall>()
                .unwrap_or_else(|| panic!("not a send stall: {err:?}"));
            assert_eq!(stall.0, SEND_STALL);
        }
        other => panic!("not a send stall: {other:?}"),
    }
    assert!(
        !held.lock().unwrap().is_empty(),
        "the store held its connections"
    );
}

/// (f) A body whose source pauses longer than the send-stall limit (a slow
/// client, an RDMA READ waiting for its turn) is not a stall: the store
/// took every byte it was offered. Every byte arrives.
#[tokio::test]
async fn a_slow_source_is_not_a_stalled_store() {
    let stub = Stub::start().await;
    let cfg = UpstreamConfig::Remote {
        endpoint: stub.endpoint(),
        credentials: key_pair(),
    };
    let opts = UpstreamOptions {
        send_stall_timeout: SEND_STALL,
        ..options(Duration::from_secs(60))
    };
    let up = upstream::build_with(&cfg, "us-east-1", &opts).unwrap();
    let data = pattern(256 << 10);
    // Pauses of 2.5 limits between the pieces.
    let (status, _) = through_gateway(
        up.as_ref(),
        head(Method::PUT, "/bucket/paused.bin", &[]),
        trickled(&data, 3, SEND_STALL * 5 / 2),
        data.len() as u64,
        Payload::Unsigned,
    )
    .await
    .expect("a PUT from a slow source");
    assert_eq!(status, StatusCode::OK);
    let seen = stub.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].body == data[..], "the bytes differ");
}
