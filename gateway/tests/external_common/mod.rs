//! Processes and clients for tests of the real `hipobj-gateway` binary in
//! front of a store of its own: the gateway as a child process, an
//! `s3s-fs` process (the crate's binary, installed by `.ci/run` under
//! `target/tools/bin`), a signing S3 client, and the client library's
//! callbacks for RDMA transfers over the software provider.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::FakeTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options, S3Ops};
use hipobj_fabric::soft::SoftProvider;
use hipobj_gateway::body::Body;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::Digest;

/// The keys clients sign with for the gateway (its defaults).
pub const GATEWAY_AK: &str = "hipobj-test-key";
/// Its secret.
pub const GATEWAY_SK: &str = "hipobj-test-secret";
/// The region everything is signed for.
pub const REGION: &str = "us-east-1";

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the gateway crate sits in the workspace")
        .to_path_buf()
}

/// A free TCP port on loopback (free when asked).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Bytes that differ at every offset and for every seed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// A random suffix, so that runs against a lasting store do not collide.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{:x}-{:x}",
        std::process::id(),
        nanos & 0xffff_ffff
    )
}

/// Stops a child: SIGTERM (it finishes and cleans up), SIGKILL when it has
/// not exited within 10 s.
pub fn stop_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let termed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if termed {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// An answer: status, headers, whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
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

    /// The body as text, for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The text of the first `<tag>` element of the body.
    pub fn xml(&self, tag: &str) -> Option<String> {
        let s = self.text();
        let open = format!("<{tag}>");
        let start = s.find(&open)? + open.len();
        let end = start + s[start..].find(&format!("</{tag}>"))?;
        Some(s[start..end].to_string())
    }
}

/// A signing S3 client (path-style) for one endpoint and key pair, blocking
/// on its own runtime.
pub struct S3 {
    pub url: String,
    access_key: String,
    secret_key: String,
    rt: tokio::runtime::Runtime,
    client: Client<HttpConnector, Body>,
}

impl std::fmt::Debug for S3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3").field("url", &self.url).finish()
    }
}

impl S3 {
    /// A client of `url` (`http://host:port`) signing with these keys.
    pub fn new(url: &str, access_key: &str, secret_key: &str) -> S3 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        S3 {
            url: url.trim_end_matches('/').to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            rt,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// One signed request: the body signed by its SHA-256, or as
    /// UNSIGNED-PAYLOAD when `unsigned`.
    pub fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Answer {
        let mut req = Request::builder()
            .method(method.clone())
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
        let mut req = req.body(Body::from(body)).unwrap();
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
        .unwrap();
        self.rt.block_on(async {
            let resp = self
                .client
                .request(req)
                .await
                .unwrap_or_else(|e| panic!("{method} {}{path_and_query}: {e}", self.url));
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.expect("HTTP body").to_bytes();
            Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        })
    }

    /// A signed GET.
    pub fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Vec::new(), false)
    }

    /// A signed PUT of `body`.
    pub fn put(&self, path: &str, body: Vec<u8>) -> Answer {
        self.send(Method::PUT, path, &[], body, false)
    }

    /// An unsigned `GET` (health endpoints).
    pub fn get_unsigned(&self, path: &str) -> Answer {
        let req = Request::get(format!("{}{path}", self.url))
            .body(Body::empty())
            .unwrap();
        self.rt.block_on(async {
            let resp = self.client.request(req).await.expect("HTTP request");
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.expect("HTTP body").to_bytes();
            Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        })
    }

    /// Creates `bucket`, which must succeed.
    #[track_caller]
    pub fn create_bucket(&self, bucket: &str) {
        let a = self.put(&format!("/{bucket}"), Vec::new());
        assert!(a.status.is_success(), "create {bucket}: {a:?}");
    }

    /// Asserts that a plain signed GET of `path` answers exactly `data`.
    #[track_caller]
    pub fn assert_object(&self, path: &str, data: &[u8]) {
        let a = self.get(path);
        assert_eq!(
            a.status,
            StatusCode::OK,
            "GET {}{path}: {}",
            self.url,
            a.text()
        );
        assert_eq!(a.body.len(), data.len(), "GET {}{path}: length", self.url);
        assert!(
            a.body[..] == data[..],
            "GET {}{path}: bytes differ",
            self.url
        );
    }
}

/// The application's side of an RDMA transfer: each token goes out in a
/// signed S3 request, and the reply comes back.
pub struct RdmaOps<'a> {
    pub s3: &'a S3,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub last: Option<Answer>,
}

impl<'a> RdmaOps<'a> {
    /// A transfer of `method path` through `s3`.
    pub fn new(s3: &'a S3, method: Method, path: &str) -> RdmaOps<'a> {
        RdmaOps {
            s3,
            method,
            path: path.to_string(),
            headers: Vec::new(),
            last: None,
        }
    }

    /// With a header (a `range`, ...).
    pub fn with_header(mut self, k: &str, v: &str) -> RdmaOps<'a> {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }

    /// The last answer.
    pub fn answer(&self) -> &Answer {
        self.last.as_ref().expect("a request was sent")
    }
}

impl S3Ops for RdmaOps<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        let mut h: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        h.push((hipobj_wire::headers::RDMA_TOKEN, token));
        self.last = Some(
            self.s3
                .send(self.method.clone(), &self.path, &h, Vec::new(), true),
        );
        Ok(())
    }

    fn recv_reply(&mut self, out: &mut [u8]) -> Result<usize, i32> {
        let r = self
            .last
            .as_ref()
            .and_then(|a| a.header(hipobj_wire::headers::RDMA_REPLY))
            .ok_or(-1)?;
        out.get_mut(..r.len())
            .ok_or(-2)?
            .copy_from_slice(r.as_bytes());
        Ok(r.len())
    }
}

/// The client library on the software provider's `soft0`, GPU-less.
pub fn rdma_client() -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::from_env().unwrap()),
        topology: Arc::new(FakeTopology::default()),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

/// `hipobj-gateway` as a child process, stopped (SIGTERM) on drop. Its
/// temporary files live in a directory this handle owns; its log is kept
/// there and shown by [`Gateway::log`].
pub struct Gateway {
    child: Child,
    pub url: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("url", &self.url).finish()
    }
}

/// How a gateway start went.
#[derive(Debug)]
pub enum Started {
    /// It listens.
    Listening(Gateway),
    /// It exited first, with this status and log.
    Exited(std::process::ExitStatus, String),
}

impl Gateway {
    /// Starts the gateway with `args` and `env` on a free loopback port
    /// (the software provider, logs at `warn`), and waits for its first
    /// line on stdout, which names its address; or for its exit.
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Started {
        let dir = tempfile::tempdir().expect("a directory for the gateway");
        let log_path = dir.path().join("gateway.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipobj-gateway"));
        cmd.args(["--listen", "127.0.0.1:0", "--rdma-device", "soft0"])
            .args(args)
            .env("RUST_LOG", "warn")
            .env("TMPDIR", dir.path())
            .env_remove("HIPOBJ_UPSTREAM")
            .env_remove("HIPOBJ_DATA_DIR")
            .env_remove("HIPOBJ_ACCESS_KEY")
            .env_remove("HIPOBJ_SECRET_KEY")
            .env_remove("HIPOBJ_REGION")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start hipobj-gateway");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let Some(url) = line.trim().strip_prefix("hipobj-gateway listening on ") else {
            let status = child.wait().expect("the gateway's exit");
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Started::Exited(status, log);
        };
        Started::Listening(Gateway {
            url: url.to_string(),
            child,
            dir,
        })
    }

    /// As [`Gateway::spawn`], which must start.
    #[track_caller]
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Gateway {
        match Gateway::spawn(args, env) {
            Started::Listening(g) => g,
            Started::Exited(status, log) => panic!("hipobj-gateway exited ({status}):\n{log}"),
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// A client signing with the gateway's client keys.
    pub fn s3(&self) -> S3 {
        S3::new(&self.url, GATEWAY_AK, GATEWAY_SK)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// An S3 store reached over the network: its endpoint and keys.
#[derive(Clone)]
pub struct Store {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("endpoint", &self.endpoint)
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A client straight to the store.
    pub fn s3(&self) -> S3 {
        S3::new(&self.endpoint, &self.access_key, &self.secret_key)
    }

    /// The gateway's flags for this store (the secret goes in the
    /// environment: see [`Store::gateway_env`]).
    pub fn gateway_args(&self) -> Vec<String> {
        vec![
            "--upstream".into(),
            self.endpoint.clone(),
            "--upstream-access-key".into(),
            self.access_key.clone(),
        ]
    }

    /// The gateway's environment for this store.
    pub fn gateway_env(&self) -> Vec<(&'static str, String)> {
        vec![("HIPOBJ_UPSTREAM_SECRET_KEY", self.secret_key.clone())]
    }
}

/// An `s3s-fs` process on a free loopback port with a data directory of its
/// own, stopped (and the directory removed) on drop.
pub struct S3sFs {
    child: Child,
    pub store: Store,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for S3sFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3sFs").field("store", &self.store).finish()
    }
}

/// The `s3s-fs` binary: `target/tools/bin/s3s-fs` (where `.ci/run`
/// installs it), else on `PATH`.
pub fn s3s_fs_binary() -> Option<PathBuf> {
    let local = workspace_root().join("target/tools/bin/s3s-fs");
    if local.is_file() {
        return Some(local);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("s3s-fs"))
        .find(|p| p.is_file())
}

impl S3sFs {
    /// Starts `binary` and waits until it answers HTTP.
    pub fn start(binary: &Path) -> S3sFs {
        let access_key = "S3SFSTESTKEY";
        let secret_key = "s3s-fs-test-secret-0123456789";
        let mut last_log = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("a directory for s3s-fs");
            let data = dir.path().join("data");
            std::fs::create_dir(&data).unwrap();
            let log_path = dir.path().join("s3s-fs.log");
            let port = free_port();
            let mut child = Command::new(binary)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", access_key, "--secret-key", secret_key])
                .arg(&data)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log_path).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    let store = Store {
                        endpoint: format!("http://127.0.0.1:{port}"),
                        access_key: access_key.into(),
                        secret_key: secret_key.into(),
                    };
                    return S3sFs {
                        child,
                        store,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            stop_child(&mut child);
            last_log = std::fs::read_to_string(&log_path).unwrap_or_default();
        }
        panic!("s3s-fs did not start:\n{last_log}");
    }
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// The external store of a test: the one `HIPOBJ_TEST_S3_ENDPOINT`,
/// `HIPOBJ_TEST_S3_ACCESS_KEY` and `HIPOBJ_TEST_S3_SECRET_KEY` name (as
/// `.ci/run` sets them), else an `s3s-fs` started here, else `None` after
/// saying why (a failure with `REQUIRE_S3S_FS=1`).
pub fn external_store(test: &str) -> Option<(Store, Option<S3sFs>)> {
    if let Ok(endpoint) = std::env::var("HIPOBJ_TEST_S3_ENDPOINT") {
        let key = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("{name} must be set with HIPOBJ_TEST_S3_ENDPOINT"))
        };
        let store = Store {
            endpoint,
            access_key: key("HIPOBJ_TEST_S3_ACCESS_KEY"),
            secret_key: key("HIPOBJ_TEST_S3_SECRET_KEY"),
        };
        return Some((store, None));
    }
    if let Some(binary) = s3s_fs_binary() {
        let fs = S3sFs::start(&binary);
        return Some((fs.store.clone(), Some(fs)));
    }
    let why = "no external S3 store: HIPOBJ_TEST_S3_ENDPOINT is not set and s3s-fs is \
               neither in target/tools/bin nor on PATH (install it with `cargo install \
               s3s-fs --version 0.14.1 --features binary --locked --root target/tools`)";
    if std::env::var("REQUIRE_S3S_FS").is_ok_and(|v| v == "1") {
        panic!("{test}: {why}, and REQUIRE_S3S_FS=1");
    }
    eprintln!("{test}: skipped: {why}");
    None
}
