//! End-to-end tests in containers: `hipobj-gateway` in front of a real MinIO
//! started with testcontainers. This library is their harness: whether a
//! Docker engine answers (and the skip when none does), the gateway binary
//! as a process, a signing S3 client, and the client library's callbacks
//! over real S3 requests (as in `test-server/tests/common/mod.rs`).
//!
//! Where `docker info` fails, every test prints that it was skipped and
//! passes; with `REQUIRE_DOCKER=1` the skip is a failure.

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use bytes::Bytes;
use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::FakeTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options, S3Ops};
use hipobj_fabric::soft::SoftProvider;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::Digest;

pub use testcontainers_modules;

/// The keys clients sign with at the gateway (its defaults).
pub const AK: &str = "hipobj-test-key";
/// The secret clients sign with at the gateway.
pub const SK: &str = "hipobj-test-secret";
/// The region everything is signed for.
pub const REGION: &str = "us-east-1";
/// MinIO's root user in the tests, and the gateway's upstream key.
pub const MINIO_USER: &str = "hipobj-minio-user";
/// MinIO's root password in the tests, and the gateway's upstream secret.
pub const MINIO_PASSWORD: &str = "hipobj-minio-password-0123";
/// Set to 1 to make a missing Docker engine a failure instead of a skip.
pub const REQUIRE_DOCKER: &str = "REQUIRE_DOCKER";

// ---------------------------------------------------------------------------
// Docker, or the skip.

/// Whether a Docker engine answers `docker info` (asked once per process,
/// given at most 30 seconds), or why not.
fn docker_engine() -> &'static Result<(), String> {
    static ANSWER: OnceLock<Result<(), String>> = OnceLock::new();
    ANSWER.get_or_init(|| {
        let mut child = match Command::new("docker")
            .args(["info", "--format", "{{.ServerVersion}}"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return Err(format!("the docker CLI cannot be run: {e}")),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut err);
                    }
                    let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    return Err(format!("`docker info` failed ({status}): {}", first.trim()));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("`docker info` did not answer within 30 s".into());
                }
                Err(e) => return Err(format!("waiting for `docker info`: {e}")),
            }
        }
    })
}

/// True when a Docker engine answers and `test` should run. When none
/// does, prints `test` was skipped (straight to stderr, past the test
/// harness's capture) and returns false, or panics when `REQUIRE_DOCKER=1`.
pub fn docker_or_skip(test: &str) -> bool {
    match docker_engine() {
        Ok(()) => true,
        Err(why) => {
            if std::env::var(REQUIRE_DOCKER).is_ok_and(|v| v.trim() == "1") {
                panic!("{test}: {REQUIRE_DOCKER}=1 and no Docker engine answers: {why}");
            }
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped: no Docker engine answers ({why}); {REQUIRE_DOCKER}=1 makes this a failure"
            );
            false
        }
    }
}

// ---------------------------------------------------------------------------
// MinIO.

/// Set to `http://host:port` of an S3 server that is already running to
/// run the tests against it instead of a MinIO container (no Docker then).
pub const S3_URL_ENV: &str = "HIPOBJ_E2E_S3_URL";
/// Its access key (default: the tests' MinIO user).
pub const S3_ACCESS_KEY_ENV: &str = "HIPOBJ_E2E_S3_ACCESS_KEY";
/// Its secret key (default: the tests' MinIO password).
pub const S3_SECRET_KEY_ENV: &str = "HIPOBJ_E2E_S3_SECRET_KEY";

type MinioContainer =
    testcontainers_modules::testcontainers::Container<testcontainers_modules::minio::MinIO>;

/// The store behind the gateway: a MinIO container (the testcontainers
/// module's image) with the test credentials, removed when dropped; or the
/// server `HIPOBJ_E2E_S3_URL` names.
#[derive(Debug)]
pub struct Minio {
    _container: Option<MinioContainer>,
    /// `http://host:port` of its S3 API, reachable from this machine.
    pub url: String,
    /// Its access key (the gateway's upstream key).
    pub access_key: String,
    /// Its secret key.
    pub secret_key: String,
}

/// The store for `test`: the server `HIPOBJ_E2E_S3_URL` names, else a
/// fresh MinIO container; `None` (the test is skipped) when that needs
/// Docker and no engine answers, a failure with `REQUIRE_DOCKER=1`.
pub fn minio_or_skip(test: &str) -> Option<Minio> {
    if let Some(url) = std::env::var(S3_URL_ENV).ok().filter(|u| !u.is_empty()) {
        let key = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.into());
        let minio = Minio {
            _container: None,
            url: url.trim_end_matches('/').to_string(),
            access_key: key(S3_ACCESS_KEY_ENV, MINIO_USER),
            secret_key: key(S3_SECRET_KEY_ENV, MINIO_PASSWORD),
        };
        minio.wait_ready();
        return Some(minio);
    }
    docker_or_skip(test).then(Minio::start)
}

impl Minio {
    /// Starts MinIO and waits until its S3 API answers.
    pub fn start() -> Minio {
        use testcontainers_modules::testcontainers::runners::SyncRunner as _;
        use testcontainers_modules::testcontainers::ImageExt as _;
        let container = testcontainers_modules::minio::MinIO::default()
            .with_env_var("MINIO_ROOT_USER", MINIO_USER)
            .with_env_var("MINIO_ROOT_PASSWORD", MINIO_PASSWORD)
            .start()
            .expect("start the MinIO container");
        let host = container.get_host().expect("MinIO's host").to_string();
        let port = container
            .get_host_port_ipv4(9000)
            .expect("MinIO's mapped port 9000");
        // The gateway runs on this machine and reaches MinIO where Docker
        // maps its port (localhost as a rule; IPv4, as it is mapped).
        let host = if host == "localhost" {
            "127.0.0.1".to_string()
        } else {
            host
        };
        let minio = Minio {
            _container: Some(container),
            url: format!("http://{host}:{port}"),
            access_key: MINIO_USER.into(),
            secret_key: MINIO_PASSWORD.into(),
        };
        minio.wait_ready();
        minio
    }

    /// A client signing with MinIO's own credentials, straight to MinIO.
    pub fn direct(&self) -> S3 {
        S3::with_keys(&self.url, &self.access_key, &self.secret_key)
    }

    /// Until a signed ListBuckets answers 200 (MinIO logs "API:" a moment
    /// before it serves).
    fn wait_ready(&self) {
        let s3 = self.direct();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match s3.try_send(Method::GET, "/", &[], Vec::new(), false) {
                Ok(a) if a.status == StatusCode::OK => return,
                // Wrong keys do not get better by waiting.
                Ok(a) if a.status == StatusCode::FORBIDDEN => panic!(
                    "the S3 server at {} refuses the tests' keys: {}",
                    self.url,
                    a.text()
                ),
                other if Instant::now() > deadline => panic!(
                    "the S3 server at {} is not ready: {:?}",
                    self.url,
                    other.map(|a| (a.status, a.text()))
                ),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

/// A bucket name no earlier run used: `prefix` and a unique suffix (the
/// tests may run against a long-lived server).
pub fn bucket_name(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{prefix}-{:x}-{:x}-{n}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    )
}

// ---------------------------------------------------------------------------
// The gateway.

/// The gateway binary the workspace built: `HIPOBJ_GATEWAY_BIN`, else
/// `hipobj-gateway` in the profile directory of this test executable
/// (`target/<profile>/deps/<test>` → `target/<profile>/hipobj-gateway`).
pub fn gateway_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HIPOBJ_GATEWAY_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe
        .parent()
        .expect("the test executable's directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(format!("hipobj-gateway{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p hipobj-gateway` with this profile; \
         `cargo test --workspace` builds it), or name one in HIPOBJ_GATEWAY_BIN",
        bin.display()
    );
    bin
}

/// `hipobj-gateway` as a process in front of `upstream`, on loopback, with
/// the software RDMA provider on 127.0.0.1.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    /// `http://127.0.0.1:port`.
    pub url: String,
}

impl Gateway {
    /// Starts the gateway in front of `store` (signing for it with its
    /// keys) and waits until it accepts connections.
    pub fn start(store: &Minio) -> Gateway {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = Command::new(gateway_bin())
            .args([
                "--listen",
                &listen,
                "--upstream",
                &store.url,
                "--upstream-access-key",
                &store.access_key,
                "--upstream-secret-key",
                &store.secret_key,
                // The software provider even where the host has a NIC.
                "--rdma-device",
                "soft0",
                "--staging-buffers",
                "8",
            ])
            .env("HIPOBJ_SOFT_ADDRS", "127.0.0.1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start hipobj-gateway");
        let addr: SocketAddr = listen.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        // It binds its listener once the engine has started.
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("hipobj-gateway exited at start: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hipobj-gateway did not listen on {listen} within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Gateway {
            child,
            url: format!("http://{listen}"),
        }
    }

    /// A client signing with the gateway's client credentials.
    pub fn client(&self) -> S3 {
        S3::new(&self.url)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------
// A signing S3 client.

/// A signing S3 client (path-style), blocking on its own runtime.
#[derive(Debug)]
pub struct S3 {
    /// `http://host:port`.
    pub url: String,
    access_key: String,
    secret_key: String,
    rt: tokio::runtime::Runtime,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Body>,
}

/// An answer, its body read whole.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The `x-amz-rdma-reply` value.
    pub fn reply(&self) -> Option<String> {
        self.header(hipobj_wire::headers::RDMA_REPLY)
    }

    /// The body as text, for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl S3 {
    /// A client of `url` signing with the gateway's test credentials.
    pub fn new(url: &str) -> S3 {
        S3::with_keys(url, AK, SK)
    }

    /// A client of `url` signing with `access_key` and `secret_key`.
    pub fn with_keys(url: &str, access_key: &str, secret_key: &str) -> S3 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http();
        S3 {
            url: url.to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            rt,
            client,
        }
    }

    /// One signed request; the payload is signed as its SHA-256, or as
    /// UNSIGNED-PAYLOAD when `unsigned`. Panics when no answer comes.
    pub fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Answer {
        self.try_send(method.clone(), path_and_query, headers, body, unsigned)
            .unwrap_or_else(|e| panic!("{method} {}{path_and_query}: {e}", self.url))
    }

    /// As [`send`](Self::send), with a connection error as an error.
    pub fn try_send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Result<Answer, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.url, path_and_query));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let hash = if unsigned {
            "UNSIGNED-PAYLOAD".to_string()
        } else {
            hex::encode(sha2::Sha256::digest(&body))
        };
        let len = body.len();
        let mut req = req.body(Body::from(body)).map_err(|e| e.to_string())?;
        req.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        hipobj_gateway::auth::sign_request(
            &mut req,
            &self.access_key,
            &self.secret_key,
            REGION,
            &hash,
            SystemTime::now(),
        )
        .map_err(|e| e.to_string())?;
        self.rt.block_on(async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("HTTP request: {e}"))?;
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("HTTP body: {e}"))?
                .to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        })
    }

    /// A signed PUT of `body`.
    pub fn put_plain(&self, path: &str, body: Vec<u8>) -> Answer {
        self.send(Method::PUT, path, &[], body, false)
    }

    /// A signed GET.
    pub fn get_plain(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Vec::new(), false)
    }

    /// Creates `bucket`; panics unless it is created.
    pub fn create_bucket(&self, bucket: &str) {
        let a = self.put_plain(&format!("/{bucket}"), Vec::new());
        assert!(
            a.status.is_success(),
            "create bucket {bucket}: {} {}",
            a.status,
            a.text()
        );
    }
}

/// Asserts that a plain signed GET of `path` answers exactly `data`.
#[track_caller]
pub fn assert_object(s3: &S3, path: &str, data: &[u8]) {
    let a = s3.get_plain(path);
    assert_eq!(a.status.as_u16(), 200, "GET {}{path}: {}", s3.url, a.text());
    assert_eq!(a.body.len(), data.len(), "GET {}{path}: length", s3.url);
    assert!(a.body[..] == data[..], "GET {}{path}: bytes differ", s3.url);
}

// ---------------------------------------------------------------------------
// The client library.

/// The application's side of a transfer: each token goes out in a signed
/// S3 request, and the reply comes back.
#[derive(Debug)]
pub struct RdmaOps<'a> {
    /// The client the requests go through.
    pub s3: &'a S3,
    /// GET, or PUT.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Extra headers (a range, ...).
    pub headers: Vec<(String, String)>,
    /// The last answer.
    pub last: Option<Answer>,
    /// Requests sent.
    pub requests: usize,
}

impl<'a> RdmaOps<'a> {
    /// A transfer of `path` by `method` through `s3`.
    pub fn new(s3: &'a S3, method: Method, path: &str) -> RdmaOps<'a> {
        RdmaOps {
            s3,
            method,
            path: path.to_string(),
            headers: Vec::new(),
            last: None,
            requests: 0,
        }
    }

    /// With one more header in each request.
    pub fn with_header(mut self, k: &str, v: &str) -> RdmaOps<'a> {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }

    /// The last answer; panics when no request went out.
    pub fn last(&self) -> &Answer {
        self.last.as_ref().expect("no request went out")
    }
}

impl S3Ops for RdmaOps<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        self.requests += 1;
        let mut h: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        h.push((hipobj_wire::headers::RDMA_TOKEN, token));
        let answer = self
            .s3
            .try_send(self.method.clone(), &self.path, &h, Vec::new(), true)
            .map_err(|_| -1)?;
        self.last = Some(answer);
        Ok(())
    }

    fn recv_reply(&mut self, out: &mut [u8]) -> Result<usize, i32> {
        let r = self.last.as_ref().and_then(Answer::reply).ok_or(-1)?;
        out.get_mut(..r.len())
            .ok_or(-2)?
            .copy_from_slice(r.as_bytes());
        Ok(r.len())
    }
}

/// The client library on a software device on 127.0.0.1, GPU-less.
pub fn client() -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::default()),
        topology: Arc::new(FakeTopology::default()),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

/// `len` bytes of the fabric's test pattern for `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// The text of the first `<tag>` element of an XML body.
pub fn xml_field(body: &[u8], tag: &str) -> Option<String> {
    let s = String::from_utf8_lossy(body);
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = s.find(&open)? + open.len();
    let end = start + s[start..].find(&close)?;
    Some(s[start..end].to_string())
}
