//! End-to-end harness: the test server and the gateway as processes, s3s-fs
//! served in-process as a server without RDMA, a declining proxy, and the
//! client library on the software provider.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::FakeTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options};
use hipobj_fabric::soft::SoftProvider;
use hipobj_s3::{ClientConfig, S3Client};

pub const AK: &str = "hipobj-test-key";
pub const SK: &str = "hipobj-test-secret";

/// A workspace binary next to this test executable
/// (`target/<profile>/deps/<test>` → `target/<profile>/<name>`). `cargo
/// test --workspace` builds every package's binaries; alone, this package's
/// tests need them built first.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p {}`), or run `cargo test --workspace`",
        bin.display(),
        if name == "hipobj-gateway" {
            "hipobj-gateway"
        } else {
            "hipobj-test-server"
        }
    );
    bin
}

/// A server process: SIGTERM on drop (the server finishes and removes its
/// store), SIGKILL after 5 s; its `TMPDIR` is a directory this handle owns,
/// removed afterwards either way.
pub struct Proc {
    child: Child,
    pub url: String,
    _tmp: tempfile::TempDir,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server_tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a directory for the server's temporary files")
}

/// `hipobj-test-server 0` on the software provider.
pub fn test_server() -> Proc {
    let tmp = server_tmpdir();
    let mut child = Command::new(workspace_bin("hipobj-test-server"))
        .args(["0", "--rdma-device", "soft0", "--staging-buffers", "8"])
        .env("RUST_LOG", "warn")
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start hipobj-test-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("the listening line")
        .to_string();
    assert!(url.starts_with("http://"), "unexpected first line {line:?}");
    Proc {
        child,
        url,
        _tmp: tmp,
    }
}

/// `hipobj-gateway` in front of `upstream` (s3s-fs), on the software
/// provider, once its `/health` answers 200.
pub fn gateway(upstream: &str) -> Proc {
    let port = free_port();
    let tmp = server_tmpdir();
    let child = Command::new(workspace_bin("hipobj-gateway"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--upstream",
            upstream,
            "--upstream-access-key",
            AK,
            "--upstream-secret-key",
            SK,
            "--rdma-device",
            "soft0",
            "--staging-buffers",
            "8",
        ])
        .env("RUST_LOG", "warn")
        .env_remove("HIPOBJ_DATA_DIR")
        .env("TMPDIR", tmp.path())
        .spawn()
        .expect("start hipobj-gateway");
    let url = format!("http://127.0.0.1:{port}");
    let p = Proc {
        child,
        url,
        _tmp: tmp,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !healthy(&p.url) {
        assert!(Instant::now() < deadline, "the gateway did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

fn healthy(url: &str) -> bool {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A runtime for in-test servers that may be dropped inside async tests.
pub struct BgRuntime(Option<tokio::runtime::Runtime>);

impl BgRuntime {
    fn new() -> BgRuntime {
        BgRuntime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ))
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().unwrap()
    }

    /// A listener on a free loopback port, for this runtime.
    fn listener(&self) -> tokio::net::TcpListener {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let _g = self.rt().enter();
        tokio::net::TcpListener::from_std(l).unwrap()
    }
}

impl Drop for BgRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// s3s-fs served over loopback in this process: an S3 server without RDMA
/// (it ignores `x-amz-rdma-token`). Its files are under `dir`.
pub struct PlainS3 {
    _rt: BgRuntime,
    pub dir: tempfile::TempDir,
    pub url: String,
}

impl PlainS3 {
    pub fn start() -> PlainS3 {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder as ConnBuilder;
        use s3s::auth::SimpleAuth;
        use s3s::service::S3ServiceBuilder;

        let dir = tempfile::tempdir().unwrap();
        let rt = BgRuntime::new();
        let fs = s3s_fs::FileSystem::new(dir.path()).unwrap();
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(AK, SK));
        let service = builder.build();
        let listener = rt.listener();
        let addr: SocketAddr = listener.local_addr().unwrap();
        rt.rt().spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    break;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        });
        PlainS3 {
            _rt: rt,
            dir,
            url: format!("http://{addr}"),
        }
    }

    /// The file s3s-fs keeps an object's bytes in.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.dir.path().join(bucket).join(key)
    }
}

/// What the test proxy does with RDMA transfer requests (handshakes and
/// plain requests are always forwarded).
#[derive(Clone, Debug, Default)]
pub struct Behavior {
    /// Decline every transfer with 501 and `x-amz-rdma-reply: 501`, as a
    /// server does for what it will not serve by RDMA.
    pub decline: bool,
    /// Answer the first this many transfers 503 SlowDown (reply 503).
    pub fail_first: usize,
    /// Hold each transfer this long before forwarding it.
    pub delay: Duration,
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
            let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>from the test proxy</Message></Error>");
            http::Response::builder()
                .status(status)
                .header("x-amz-rdma-reply", status.to_string())
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
                                return Ok::<_, hyper::Error>(error(501, "NotImplemented"));
                            }
                            if n < behavior.fail_first {
                                return Ok(error(503, "SlowDown"));
                            }
                        }
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
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::from_env().unwrap()),
        topology: Arc::new(FakeTopology::default()),
    };
    Arc::new(
        Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap(),
    )
}

/// A client of `url` with RDMA through `lib`.
pub fn rdma_config(url: &str, lib: &Arc<Hipobj>) -> ClientConfig {
    ClientConfig::new(url, AK, SK).with_rdma(lib.clone())
}

pub fn client(cfg: ClientConfig) -> S3Client {
    S3Client::new(cfg).unwrap()
}

/// Deterministic bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// A per-test bucket name.
pub fn bucket(name: &str) -> String {
    format!("b-{}", name.replace('_', "-"))
}
