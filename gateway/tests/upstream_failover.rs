//! Retries and failover across remote endpoints: s3s-fs served over
//! loopback TCP by hyper in this process, two servers sharing one root
//! directory (so every object is visible through both), reached by
//! `MultiUpstream` and `RemoteUpstream`.

#![forbid(unsafe_code)]

#[allow(dead_code)]
use crate::upstream_common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use hipobj_gateway::body::Body;
use hipobj_gateway::config::{KeyPair, UpstreamConfig};
use hipobj_gateway::upstream::{
    self, MultiOptions, MultiUpstream, Payload, RemoteOptions, RemoteUpstream, RetryPolicy,
    Upstream, UpstreamError,
};

const ACCESS_KEY: &str = "FAILOVERTESTKEY";
const SECRET_KEY: &str = "failover-test-secret-key-0123456789";

fn key_pair() -> KeyPair {
    KeyPair {
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    }
}

/// An s3s-fs server on a loopback port; `stop` closes its listener and
/// every connection it accepted.
struct Server {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Server {
    async fn start(root: &Path, addr: SocketAddr) -> Server {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fs = s3s_fs::FileSystem::new(root).unwrap();
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    break;
                };
                let service = service.clone();
                let counter = Arc::clone(&counter);
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            counter.fetch_add(1, Ordering::SeqCst);
                            let service = service.clone();
                            async move { hyper::service::Service::call(&service, req).await }
                        },
                    );
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), svc)
                        .await;
                });
            }
        });
        Server {
            addr,
            requests,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A port that was just free: nothing listens on it.
fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A TCP relay to `target` whose first `bad` connections are closed once
/// the request's first bytes arrive (before any answer); counts the
/// connections that carried a request.
async fn flaky_relay(target: SocketAddr, bad: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                // A connection counts once a request starts on it: the
                // client's pool may open one it never uses (a connect that
                // lost the race to a connection freed meanwhile).
                let mut buf = [0u8; 16];
                let got = match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if seen.fetch_add(1, Ordering::SeqCst) < bad {
                    drop(client);
                    return;
                }
                let mut server = TcpStream::connect(target).await.unwrap();
                server.write_all(&buf[..got]).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (addr, count)
}

fn options(health_interval: Duration) -> MultiOptions {
    MultiOptions {
        remote: RemoteOptions::default(),
        health_interval,
    }
}

async fn get_text(up: &dyn Upstream, target: &str) -> String {
    let a = upstream_common::call(up, Method::GET, target, Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    a.text()
}

#[tokio::test]
async fn fails_over_in_order_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let a = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let b = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let dead = format!("http://{}", dead_addr());
    let multi = MultiUpstream::new(
        &[dead.clone(), a.url(), b.url()],
        key_pair(),
        "us-east-1",
        options(Duration::from_millis(100)),
    )
    .unwrap();
    assert_eq!(multi.current(), dead);

    // Through A: the dead endpoint is marked down on the first request.
    let r = upstream_common::call(&multi, Method::PUT, "/bucket", Bytes::new()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = upstream_common::call(&multi, Method::PUT, "/bucket/k", "one").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(get_text(&multi, "/bucket/k").await, "one");
    assert_eq!(multi.healthy(), [false, true, true]);
    assert_eq!(multi.current(), a.url());
    assert!(a.requests() >= 3, "{}", a.requests());
    assert_eq!(b.requests(), 0);
    assert!(multi.ready().await);

    // A stops: the same requests go to B.
    let a_addr = a.addr;
    let a_before = a.requests();
    a.stop().await;
    assert_eq!(get_text(&multi, "/bucket/k").await, "one");
    assert_eq!(multi.healthy(), [false, false, true]);
    assert_eq!(multi.current(), b.url());
    let r = upstream_common::call(&multi, Method::PUT, "/bucket/k2", "two").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(get_text(&multi, "/bucket/k2").await, "two");
    assert!(b.requests() >= 3, "{}", b.requests());

    // A comes back on its port: the health check marks it up and it serves
    // again; the dead endpoint stays down.
    let a = Server::start(dir.path(), a_addr).await;
    let mut waited = Duration::ZERO;
    while multi.healthy() != [false, true, true] {
        assert!(waited < Duration::from_secs(10), "{:?}", multi.healthy());
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    let probes = a.requests();
    assert_eq!(get_text(&multi, "/bucket/k2").await, "two");
    assert!(a.requests() > probes);
    assert!(a_before > 0);

    b.stop().await;
    a.stop().await;
}

#[tokio::test]
async fn s3_flow_through_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let a = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let b = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let cfg = UpstreamConfig::Cluster {
        endpoints: vec![format!("http://{}", dead_addr()), a.url(), b.url()],
        credentials: key_pair(),
    };
    let up = upstream::build(&cfg, "us-east-1").unwrap();
    upstream_common::s3_flow(&*up).await;
    assert!(dir.path().join("bucket/big.bin").is_file());
    assert!(a.requests() > 10, "{}", a.requests());
    // B saw only the readiness probe (ready() asks every endpoint).
    assert_eq!(b.requests(), 1);
}

#[tokio::test]
async fn all_down_is_a_connect_error() {
    let multi = MultiUpstream::new(
        &[
            format!("http://{}", dead_addr()),
            format!("http://{}", dead_addr()),
        ],
        key_pair(),
        "us-east-1",
        options(Duration::from_secs(5)),
    )
    .unwrap();
    assert!(!multi.ready().await);
    let req = http::Request::builder()
        .uri("/b")
        .body(Body::empty())
        .unwrap();
    let err = multi.send(req, Payload::Unsigned).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Connect(_)), "{err:?}");
    assert_eq!(multi.healthy(), [false, false]);
}

#[tokio::test]
async fn get_is_retried_after_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let live = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let direct = RemoteUpstream::new(&live.url(), key_pair(), "us-east-1").unwrap();
    let r = upstream_common::call(&direct, Method::PUT, "/bucket", Bytes::new()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = upstream_common::call(&direct, Method::PUT, "/bucket/obj", "payload").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());

    // Default policy: two retries; the first two connections are cut.
    let (relay, conns) = flaky_relay(live.addr, 2).await;
    let up = RemoteUpstream::new(&format!("http://{relay}"), key_pair(), "us-east-1").unwrap();
    assert_eq!(get_text(&up, "/bucket/obj").await, "payload");
    assert_eq!(conns.load(Ordering::SeqCst), 3);

    // Three cuts are one too many.
    let (relay, conns) = flaky_relay(live.addr, 3).await;
    let up = RemoteUpstream::new(&format!("http://{relay}"), key_pair(), "us-east-1").unwrap();
    let req = http::Request::builder()
        .uri("/bucket/obj")
        .body(Body::empty())
        .unwrap();
    let err = up
        .send(req, Payload::Sha256(hipobj_net::sigv4::EMPTY_SHA256.into()))
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Request(_)), "{err:?}");
    assert_eq!(conns.load(Ordering::SeqCst), 3);

    // No retries when the policy says none.
    let (relay, conns) = flaky_relay(live.addr, 1).await;
    let up = RemoteUpstream::with_options(
        &format!("http://{relay}"),
        key_pair(),
        "us-east-1",
        RemoteOptions {
            response_timeout: Duration::from_secs(30),
            retry: RetryPolicy::none(),
            ..RemoteOptions::default()
        },
    )
    .unwrap();
    let req = http::Request::builder()
        .uri("/bucket/obj")
        .body(Body::empty())
        .unwrap();
    assert!(up.send(req, Payload::Unsigned).await.is_err());
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    live.stop().await;
}

/// The retry count and backoff configured in `UpstreamOptions` (the
/// gateway's --upstream-retries and --upstream-backoff) are the ones a
/// built upstream, single or cluster, applies.
#[tokio::test]
async fn configured_retries_reach_the_built_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let live = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let options = |retries| hipobj_gateway::config::UpstreamOptions {
        retries,
        backoff: vec![Duration::ZERO],
        // No probe while the test counts connections.
        health_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    for retries in [0u32, 3] {
        // Every connection is dropped: one attempt plus `retries`.
        let (relay, conns) = flaky_relay(live.addr, usize::MAX).await;
        let cfg = UpstreamConfig::Remote {
            endpoint: format!("http://{relay}"),
            credentials: key_pair(),
        };
        let up = upstream::build_with(&cfg, "us-east-1", &options(retries)).unwrap();
        let req = http::Request::builder()
            .uri("/bucket/obj")
            .body(Body::empty())
            .unwrap();
        let err = up.send(req, Payload::Unsigned).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Request(_)), "{err:?}");
        assert_eq!(conns.load(Ordering::SeqCst), 1 + retries as usize);

        // A cluster of that one endpoint retries as often.
        let (relay, conns) = flaky_relay(live.addr, usize::MAX).await;
        let cfg = UpstreamConfig::Cluster {
            endpoints: vec![format!("http://{relay}")],
            credentials: key_pair(),
        };
        let up = upstream::build_with(&cfg, "us-east-1", &options(retries)).unwrap();
        let req = http::Request::builder()
            .uri("/bucket/obj")
            .body(Body::empty())
            .unwrap();
        assert!(up.send(req, Payload::Unsigned).await.is_err());
        assert_eq!(conns.load(Ordering::SeqCst), 1 + retries as usize);
    }
    live.stop().await;
}

#[tokio::test]
async fn streamed_put_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let live = Server::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let direct = RemoteUpstream::new(&live.url(), key_pair(), "us-east-1").unwrap();
    let r = upstream_common::call(&direct, Method::PUT, "/bucket", Bytes::new()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());

    let streamed_put = || {
        let chunks = (0..4).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 64 * 1024])));
        http::Request::builder()
            .method(Method::PUT)
            .uri("/bucket/streamed")
            .header("content-length", 4 * 64 * 1024)
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap()
    };
    let (relay, conns) = flaky_relay(live.addr, 1).await;
    let up = RemoteUpstream::new(&format!("http://{relay}"), key_pair(), "us-east-1").unwrap();
    let err = up
        .send(streamed_put(), Payload::Unsigned)
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Request(_)), "{err:?}");
    assert_eq!(conns.load(Ordering::SeqCst), 1, "the PUT was sent again");

    // The next one, on a fresh connection, goes through.
    let resp = up.send(streamed_put(), Payload::Unsigned).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(conns.load(Ordering::SeqCst), 2);
    live.stop().await;
}

#[tokio::test]
async fn head_timeout_is_an_error_and_not_retried() {
    // Accepts and reads, never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&conns);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    let up = RemoteUpstream::with_options(
        &format!("http://{addr}"),
        key_pair(),
        "us-east-1",
        RemoteOptions {
            response_timeout: Duration::from_millis(200),
            retry: RetryPolicy::default(),
            ..RemoteOptions::default()
        },
    )
    .unwrap();
    let req = http::Request::builder()
        .uri("/bucket/obj")
        .body(Body::empty())
        .unwrap();
    // The error's type, not a stopwatch, says the head timeout ended it.
    let err = up.send(req, Payload::Unsigned).await.unwrap_err();
    let UpstreamError::Request(inner) = &err else {
        panic!("{err:?}");
    };
    assert!(
        inner.is::<upstream::retry::ResponseHeadTimeout>(),
        "{err:?}"
    );
    assert_eq!(conns.load(Ordering::SeqCst), 1);
}

#[test]
fn cluster_config_builds_without_a_runtime() {
    let cfg = UpstreamConfig::Cluster {
        endpoints: vec!["http://127.0.0.1:9".into(), "http://127.0.0.1:10".into()],
        credentials: key_pair(),
    };
    let up = upstream::build(&cfg, "us-east-1").unwrap();
    let d = up.describe();
    assert!(
        d.contains("http://127.0.0.1:9") && d.contains("http://127.0.0.1:10"),
        "{d}"
    );
    assert!(!format!("{up:?}").contains(SECRET_KEY));
    let bad = UpstreamConfig::Cluster {
        endpoints: vec![],
        credentials: key_pair(),
    };
    assert!(matches!(
        upstream::build(&bad, "us-east-1"),
        Err(UpstreamError::InvalidEndpoint { .. })
    ));
}
