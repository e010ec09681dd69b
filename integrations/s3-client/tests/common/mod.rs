//! End-to-end harness: the test server and the gateway as processes, s3s-fs
//! served in-process as a server without RDMA (all from `hipobj-testkit`),
//! a declining proxy, and the client library on the software provider.
#![allow(dead_code, unused_imports)]

use std::sync::Arc;
use std::time::Duration;

use hipobj::Hipobj;
use hipobj_s3::{ClientConfig, S3Client};
pub use hipobj_testkit::{free_port, pattern, BgRuntime, PlainS3, ServerProc as Proc, AK, SK};

/// `hipobj-test-server 0` on the software provider with 8 staging buffers.
pub fn test_server() -> Proc {
    hipobj_testkit::test_server(
        &hipobj_testkit::workspace_bin("hipobj-test-server"),
        &["0", "--rdma-device", "soft0", "--staging-buffers", "8"],
    )
}

/// `hipobj-gateway` in front of `upstream` (s3s-fs), on the software
/// provider, once its `/health` answers 200.
pub fn gateway(upstream: &str) -> Proc {
    hipobj_testkit::gateway(
        &hipobj_testkit::workspace_bin("hipobj-gateway"),
        upstream,
        AK,
        SK,
    )
}

/// What the test proxy does with RDMA transfer requests (handshakes and
/// plain requests are always forwarded).
#[derive(Clone, Debug, Default)]
pub struct Behavior {
    /// Decline every transfer with 501 and `x-amz-rdma-reply: 501`, as a
    /// server does for what it will not serve by RDMA.
    pub decline: bool,
    /// The `x-amz-rdma-reply` of a decline, when not `501` (hipObject's
    /// library reads `501` followed by anything as a decline).
    pub decline_reply: Option<String>,
    /// Answer the first this many transfers 503 SlowDown (reply 503).
    pub fail_first: usize,
    /// Hold each transfer this long before forwarding it.
    pub delay: Duration,
    /// Forward the first CompleteMultipartUpload to the server but answer
    /// it 502 (as if its answer were lost), so that the client tries again
    /// after the server completed the upload.
    pub lose_first_complete: bool,
}

/// A request the proxy saw with a token.
#[derive(Clone, Debug)]
pub struct SeenToken {
    pub method: String,
    pub handshake: bool,
    pub token: String,
    pub peer: std::net::IpAddr,
}

#[derive(Default)]
pub struct ProxyState {
    pub seen: std::sync::Mutex<Vec<SeenToken>>,
    pub in_flight: std::sync::atomic::AtomicUsize,
    pub max_in_flight: std::sync::atomic::AtomicUsize,
    pub transfers: std::sync::atomic::AtomicUsize,
    /// CompleteMultipartUpload requests seen.
    pub completes: std::sync::atomic::AtomicUsize,
}

/// A proxy in front of `upstream` that sees every token request, and
/// declines, fails or delays RDMA transfers as its [`Behavior`] says.
pub struct Proxy {
    _rt: BgRuntime,
    pub url: String,
    pub state: Arc<ProxyState>,
}

impl Proxy {
    pub fn start(upstream: &str, behavior: Behavior) -> Proxy {
        use bytes::Bytes;
        use http_body_util::{BodyExt, Full};
        use hyper::body::Incoming;
        use hyper_util::client::legacy::Client;
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder as ConnBuilder;
        use std::sync::atomic::Ordering;

        type Out = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;
        fn error(status: u16, code: &str) -> http::Response<Out> {
            error_with(status, code, &status.to_string())
        }
        fn error_with(status: u16, code: &str, reply: &str) -> http::Response<Out> {
            let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>from the test proxy</Message></Error>");
            http::Response::builder()
                .status(status)
                .header("x-amz-rdma-reply", reply)
                .header("content-type", "application/xml")
                .body(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed())
                .unwrap()
        }

        let rt = BgRuntime::new();
        let listener = rt.listener();
        let addr = listener.local_addr().unwrap();
        let upstream: String = upstream.to_string();
        let state = Arc::new(ProxyState::default());
        let st = state.clone();
        rt.rt().spawn(async move {
            let client: Client<_, Incoming> = Client::builder(TokioExecutor::new()).build_http();
            loop {
                let Ok((socket, peer)) = listener.accept().await else {
                    break;
                };
                let (client, upstream, st, behavior) = (
                    client.clone(),
                    upstream.clone(),
                    st.clone(),
                    behavior.clone(),
                );
                let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let (client, upstream, st, behavior) = (
                        client.clone(),
                        upstream.clone(),
                        st.clone(),
                        behavior.clone(),
                    );
                    async move {
                        let token = req
                            .headers()
                            .get("x-amz-rdma-token")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string);
                        let mut transfer = false;
                        if let Some(t) = token {
                            let handshake =
                                hipobj_wire::Token::decode(&t).is_ok_and(|t| t.is_handshake());
                            transfer = !handshake;
                            st.seen.lock().unwrap().push(SeenToken {
                                method: req.method().to_string(),
                                handshake,
                                token: t,
                                peer: peer.ip(),
                            });
                        }
                        if transfer {
                            let n = st.transfers.fetch_add(1, Ordering::SeqCst);
                            if behavior.decline {
                                let reply = behavior.decline_reply.as_deref().unwrap_or("501");
                                return Ok::<_, hyper::Error>(error_with(
                                    501,
                                    "NotImplemented",
                                    reply,
                                ));
                            }
                            if n < behavior.fail_first {
                                return Ok(error(503, "SlowDown"));
                            }
                        }
                        let complete = req.method() == http::Method::POST
                            && req.uri().query().is_some_and(|q| q.contains("uploadId="));
                        let lose = complete
                            && st.completes.fetch_add(1, Ordering::SeqCst) == 0
                            && behavior.lose_first_complete;
                        let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        if transfer {
                            st.max_in_flight.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(behavior.delay).await;
                        }
                        let (mut parts, body) = req.into_parts();
                        let pq = parts
                            .uri
                            .path_and_query()
                            .map(|p| p.as_str().to_string())
                            .unwrap_or_else(|| "/".into());
                        parts.uri = format!("{upstream}{pq}").parse().unwrap();
                        let resp = client.request(http::Request::from_parts(parts, body)).await;
                        st.in_flight.fetch_sub(1, Ordering::SeqCst);
                        if lose {
                            // The server has answered (and completed the
                            // upload); read its answer whole, then lose it.
                            if let Ok(r) = resp {
                                let _ = r.into_body().collect().await;
                            }
                            return Ok(error(502, "ServiceUnavailable"));
                        }
                        Ok(match resp {
                            Ok(r) => r.map(|b| -> Out { b.boxed() }),
                            Err(e) => error(502, &e.to_string()),
                        })
                    }
                });
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), svc)
                        .await;
                });
            }
        });
        Proxy {
            _rt: rt,
            url: format!("http://{addr}"),
            state,
        }
    }

    /// The token requests seen so far.
    pub fn seen(&self) -> Vec<SeenToken> {
        self.state.seen.lock().unwrap().clone()
    }
}

/// The client library on a software device, GPU-less.
pub fn lib() -> Arc<Hipobj> {
    Arc::new(hipobj_testkit::client())
}

/// A client of `url` with RDMA through `lib`, by the handshake flow (the
/// flow `e2e.rs` tests, with proxies that act on its tokens; `rc_v2.rs`
/// tests hipobj-rc-v2 and `auto`).
pub fn rdma_config(url: &str, lib: &Arc<Hipobj>) -> ClientConfig {
    let mut cfg = ClientConfig::new(url, AK, SK).with_rdma(lib.clone());
    cfg.rdma_protocol = hipobj_s3::RdmaProtocol::Handshake;
    cfg
}

/// A client of `url` with RDMA through `lib`, in the default protocol
/// (`auto`).
pub fn auto_config(url: &str, lib: &Arc<Hipobj>) -> ClientConfig {
    ClientConfig::new(url, AK, SK).with_rdma(lib.clone())
}

pub fn client(cfg: ClientConfig) -> S3Client {
    S3Client::new(cfg).unwrap()
}

/// A per-test bucket name.
pub fn bucket(name: &str) -> String {
    format!("b-{}", name.replace('_', "-"))
}
