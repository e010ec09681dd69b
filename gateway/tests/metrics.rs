//! `/metrics`, `/health/live` and `/health/ready` of an engine served on
//! loopback: plain and RDMA requests show up in the counters, with no bucket
//! or key labels; readiness follows the store.
//!
//! The recorder is global to the process: only `metrics_count_requests`
//! makes requests that are counted.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::NoTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Direction, Hipobj, Options};
use hipobj_fabric::soft::SoftProvider;
use hipobj_gateway::body::Body;
use hipobj_gateway::config::{EngineConfig, KeyPair, RdmaConfig, UpstreamConfig};
use hipobj_gateway::engine::{self, Engine};

const AK: &str = "metrics-test-key";
const SK: &str = "metrics-test-secret";
const REGION: &str = "us-east-1";

/// An engine on a loopback port, stopped on drop.
struct Served {
    url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
    _store: Option<tempfile::TempDir>,
}

async fn serve(upstream: UpstreamConfig, store: Option<tempfile::TempDir>) -> Served {
    let cfg = EngineConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        region: REGION.into(),
        credentials: vec![KeyPair {
            access_key: AK.into(),
            secret_key: SK.into(),
        }
        .into()],
        max_skew: std::time::Duration::from_secs(900),
        upstream,
        upstream_options: Default::default(),
        rdma: RdmaConfig {
            device: Some("soft0".into()),
            chunk_size: 1 << 20,
            buffers: 4,
            ..RdmaConfig::default()
        },
        server: Default::default(),
    };
    let engine = Arc::new(Engine::new(&cfg).unwrap());
    let listener = tokio::net::TcpListener::bind(cfg.listen).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(engine::serve(listener, engine, async move {
        let _ = stopped.await;
    }));
    Served {
        url,
        _stop: stop,
        _store: store,
    }
}

async fn embedded() -> Served {
    let (upstream, dir) = engine::embedded(None).unwrap();
    serve(upstream, dir).await
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn send(req: Request<Body>) -> Answer {
    let client: Client<HttpConnector, Body> = Client::builder(TokioExecutor::new()).build_http();
    let resp: Response<hyper::body::Incoming> = client.request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// A request signed with `access_key` (and the test secret).
async fn signed_as(
    access_key: &str,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Answer {
    let hash = hex::encode(Sha256::digest(&body));
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::from(body)).unwrap();
    hipobj_gateway::upstream::sign_request(
        &mut req,
        access_key,
        SK,
        REGION,
        &hash,
        SystemTime::now(),
    )
    .unwrap();
    send(req).await
}

async fn signed(method: Method, url: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
    signed_as(AK, method, url, headers, body).await
}

async fn plain_get(url: &str) -> Answer {
    send(Request::get(url).body(Body::empty()).unwrap()).await
}

/// The value of the sample `name{labels}` (labels in any order; none for an
/// unlabelled metric).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    want.sort();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, mut got) = match series.split_once('{') {
                Some((n, rest)) => (
                    n,
                    rest.trim_end_matches('}')
                        .split(',')
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                ),
                None => (series, Vec::new()),
            };
            got.sort();
            (n == name && got == want).then(|| value.parse().ok())?
        })
}

/// The client library on the software device, GPU-less.
fn client() -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::from_env().unwrap()),
        topology: Arc::new(NoTopology),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_requests() {
    let s = embedded().await;
    let u = &s.url;
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();

    // Plain path.
    assert_eq!(
        signed(Method::PUT, &format!("{u}/bkt"), &[], vec![])
            .await
            .status,
        200
    );
    assert_eq!(
        signed(Method::PUT, &format!("{u}/bkt/obj"), &[], data.clone())
            .await
            .status,
        200
    );
    // A bad signature.
    let refused = signed_as(
        "unknown-key",
        Method::GET,
        &format!("{u}/bkt/obj"),
        &[],
        vec![],
    )
    .await;
    assert_eq!(refused.status, 403);
    // Signed, /metrics is an S3 request for the bucket "metrics".
    let bucket = signed(Method::GET, &format!("{u}/metrics"), &[], vec![]).await;
    assert_eq!(bucket.status, 404, "{}", bucket.text());

    // RDMA: the handshake, a GET, and a declined DELETE.
    let lib = client();
    let token = lib.handshake_token().unwrap();
    let hs = signed(
        Method::GET,
        &format!("{u}/bkt/obj"),
        &[("x-amz-rdma-token", &token)],
        vec![],
    )
    .await;
    assert_eq!(hs.status, 200, "{}", hs.text());
    lib.complete_handshake(hs.header("x-amz-rdma-reply").unwrap())
        .unwrap();
    let mut mem = vec![0u8; data.len()];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let token = buf.token(Direction::Get, 0, data.len()).unwrap();
        let got = signed(
            Method::GET,
            &format!("{u}/bkt/obj"),
            &[("x-amz-rdma-token", &token)],
            vec![],
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.text());
        assert_eq!(got.header("x-amz-rdma-bytes-transferred"), Some("1000"));
        // The bytes just read, PUT back by RDMA READ under another key.
        let token = buf.token(Direction::Put, 0, data.len()).unwrap();
        let put = signed(
            Method::PUT,
            &format!("{u}/bkt/obj2"),
            &[("x-amz-rdma-token", &token)],
            vec![],
        )
        .await;
        assert_eq!(put.status, 200, "{}", put.text());
        let declined = signed(
            Method::DELETE,
            &format!("{u}/bkt/obj"),
            &[("x-amz-rdma-token", &token)],
            vec![],
        )
        .await;
        assert_eq!(declined.status, 501, "{}", declined.text());
    }
    assert_eq!(mem, data);
    let back = signed(Method::GET, &format!("{u}/bkt/obj2"), &[], vec![]).await;
    assert_eq!(back.body[..], data[..]);

    let m = plain_get(&format!("{u}/metrics")).await;
    assert_eq!(m.status, 200);
    assert!(m
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/plain")));
    let t = m.text();
    let v = |name: &str, labels: &[(&str, &str)]| sample(&t, name, labels);
    let req = |op: &str, path: &str| v("hipobj_requests_total", &[("op", op), ("path", path)]);
    assert_eq!(req("CreateBucket", "http"), Some(1.0), "{t}");
    assert_eq!(req("PutObject", "http"), Some(1.0));
    assert_eq!(req("ListObjects", "http"), Some(1.0));
    assert_eq!(req("GetObject", "rdma"), Some(2.0));
    assert_eq!(req("DeleteObject", "rdma"), Some(1.0));
    assert_eq!(req("PutObject", "rdma"), Some(1.0));
    assert_eq!(req("GetObject", "http"), Some(1.0));
    assert_eq!(
        v(
            "hipobj_auth_failures_total",
            &[("code", "InvalidAccessKeyId")]
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            "hipobj_rdma_handshakes_total",
            &[("device", "soft0"), ("result", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            "hipobj_rdma_bytes_total",
            &[("device", "soft0"), ("direction", "write")]
        ),
        Some(1000.0)
    );
    assert_eq!(
        v(
            "hipobj_rdma_bytes_total",
            &[("device", "soft0"), ("direction", "read")]
        ),
        Some(1000.0)
    );
    assert_eq!(
        v(
            "hipobj_rdma_transfer_seconds_count",
            &[("device", "soft0"), ("op", "GetObject"), ("result", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            "hipobj_rdma_transfer_seconds_count",
            &[("device", "soft0"), ("op", "PutObject"), ("result", "ok")]
        ),
        Some(1.0)
    );
    assert!(t.contains("hipobj_rdma_transfer_seconds_bucket{"));
    assert_eq!(
        v("hipobj_rdma_declined_total", &[("reason", "operation")]),
        Some(1.0)
    );
    assert_eq!(v("hipobj_rdma_failures_total", &[]), None);
    assert!(!t.contains("hipobj_rdma_completion_errors_total{"));
    assert_eq!(
        v("hipobj_staging_buffers_total", &[("device", "soft0")]),
        Some(4.0)
    );
    assert_eq!(
        v("hipobj_staging_buffers_in_use", &[("device", "soft0")]),
        Some(0.0)
    );
    assert_eq!(v("hipobj_rdma_pairs", &[("device", "soft0")]), Some(1.0));
    for (op, n) in [
        ("CreateBucket", 1.0),
        ("PutObject", 2.0),
        ("GetObject", 2.0),
        ("ListObjects", 1.0),
    ] {
        assert_eq!(
            v("hipobj_upstream_request_seconds_count", &[("op", op)]),
            Some(n),
            "{op}"
        );
    }
    // The 404 of the "metrics" bucket is not an upstream error; nothing else failed.
    assert!(!t.contains("hipobj_upstream_errors_total{"));
    // No bucket or key labels.
    assert!(!t.contains("bkt") && !t.contains("obj\""), "{t}");
}

#[tokio::test]
async fn live_and_ready_with_the_embedded_store() {
    let s = embedded().await;
    for path in ["/health/live", "/health/ready", "/health"] {
        let r = plain_get(&format!("{}{path}", s.url)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(r.text().contains("\"ok\""), "{path}: {}", r.text());
    }
    // A query string makes it an S3 request (unsigned: refused).
    let r = plain_get(&format!("{}/health/ready?x=1", s.url)).await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn not_ready_when_the_store_is_down() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let s = serve(
        UpstreamConfig::Remote {
            endpoint: format!("http://127.0.0.1:{port}"),
            credentials: KeyPair {
                access_key: "up".into(),
                secret_key: "up-secret".into(),
            },
        },
        None,
    )
    .await;
    let ready = plain_get(&format!("{}/health/ready", s.url)).await;
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert!(ready.text().contains("\"store\":false"), "{}", ready.text());
    assert_eq!(plain_get(&format!("{}/health", s.url)).await.status, 503);
    assert_eq!(
        plain_get(&format!("{}/health/live", s.url)).await.status,
        200
    );
}
