//! End-to-end harness: the test server as a process, a signing HTTP client,
//! and the client library's callbacks over real S3 requests.
#![allow(dead_code)]

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
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::SystemTime;

pub const AK: &str = "hipobj-test-key";
pub const SK: &str = "hipobj-test-secret";
pub const REGION: &str = "us-east-1";

/// The test server in its own process. Its temporary store lives in a
/// directory this handle owns (`TMPDIR` for the child), removed on drop even
/// when the process had to be killed.
pub struct Server {
    child: Child,
    pub url: String,
    pub port: u16,
    _tmp: tempfile::TempDir,
}

impl Server {
    pub fn start(port: u16) -> Server {
        let tmp = tempfile::tempdir().expect("a directory for the server's store");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hipobj-test-server"))
            .arg(port.to_string())
            .env("RUST_LOG", "warn")
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start hipobj-test-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_string();
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        Server {
            child,
            url,
            port,
            _tmp: tmp,
        }
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// SIGTERM (the server finishes and removes its store), SIGKILL if it
    /// has not exited within 5 s.
    pub fn stop(&mut self) {
        stop_child(&mut self.child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops a server process: SIGTERM, then SIGKILL after 5 s.
pub fn stop_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A signing S3 client (path-style), blocking on its own runtime.
pub struct S3 {
    pub url: String,
    rt: tokio::runtime::Runtime,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Body>,
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

impl S3 {
    pub fn new(url: &str) -> S3 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http();
        S3 {
            url: url.to_string(),
            rt,
            client,
        }
    }

    /// One signed request; `payload` is signed as its SHA-256, or
    /// UNSIGNED-PAYLOAD when `unsigned`.
    pub fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Answer {
        self.send_ext(method, path_and_query, headers, body, unsigned, SK, &[])
    }

    /// As [`send`](Self::send), signed with `secret`, with `after` added
    /// once the request is signed (so they are not among the signed
    /// headers).
    #[allow(clippy::too_many_arguments)]
    pub fn send_ext(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
        secret: &str,
        after: &[(&str, &str)],
    ) -> Answer {
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
        let mut req = req.body(Body::from(body)).unwrap();
        req.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        hipobj_gateway::auth::sign_request(&mut req, AK, secret, REGION, &hash, SystemTime::now())
            .unwrap();
        for (k, v) in after {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        self.request(req)
    }

    /// A signed request given up after `after`: its connection is closed
    /// while the server may still be serving it. `None` when it was given
    /// up, the answer when it came first.
    pub fn send_abandoned(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        after: std::time::Duration,
    ) -> Option<Answer> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.url, path_and_query));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(0));
        hipobj_gateway::auth::sign_request(
            &mut req,
            AK,
            SK,
            REGION,
            "UNSIGNED-PAYLOAD",
            SystemTime::now(),
        )
        .unwrap();
        // A client of its own, so that no pooled connection survives.
        let client: Client<_, Body> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http();
        self.rt.block_on(async {
            let resp = tokio::time::timeout(after, client.request(req))
                .await
                .ok()?;
            let (parts, body) = resp.expect("HTTP request").into_parts();
            let body = body.collect().await.expect("HTTP body").to_bytes();
            Some(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        })
    }

    fn request(&self, req: Request<Body>) -> Answer {
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

    pub fn put_plain(&self, path: &str, body: Vec<u8>) -> Answer {
        self.send(Method::PUT, path, &[], body, false)
    }

    pub fn get_plain(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Vec::new(), false)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let a = self.put_plain(&format!("/{bucket}"), Vec::new());
        assert!(
            a.status.is_success(),
            "create bucket: {} {:?}",
            a.status,
            a.body
        );
    }
}

/// The application's side of a transfer: each token goes out in a signed
/// S3 request, and the reply comes back.
pub struct RdmaOps<'a> {
    pub s3: &'a S3,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub last: Option<Answer>,
    pub requests: usize,
}

impl<'a> RdmaOps<'a> {
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

    pub fn with_header(mut self, k: &str, v: &str) -> RdmaOps<'a> {
        self.headers.push((k.to_string(), v.to_string()));
        self
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
        h.push(("x-amz-rdma-token", token));
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
            .and_then(|a| a.header("x-amz-rdma-reply"))
            .ok_or(-1)?;
        out.get_mut(..r.len())
            .ok_or(-2)?
            .copy_from_slice(r.as_bytes());
        Ok(r.len())
    }
}

/// The client library on a software device, GPU-less.
pub fn client() -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::from_env().unwrap()),
        topology: Arc::new(FakeTopology::default()),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Answer {
    /// The `<Code>` of an S3 XML error body.
    pub fn code(&self) -> Option<String> {
        xml_field(&self.body, "Code")
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

/// The text of the first `<tag>` element of an XML body.
pub fn xml_field(body: &[u8], tag: &str) -> Option<String> {
    let s = String::from_utf8_lossy(body);
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = s.find(&open)? + open.len();
    let end = start + s[start..].find(&close)?;
    Some(s[start..end].to_string())
}

/// Asserts an S3 error answer exactly: HTTP status, `<Code>`, and the
/// `x-amz-rdma-reply` value (or its absence).
#[track_caller]
pub fn assert_error(a: &Answer, status: u16, code: &str, reply: Option<&str>, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: status ({})", a.text());
    assert_eq!(
        a.code().as_deref(),
        Some(code),
        "{what}: code ({})",
        a.text()
    );
    assert_eq!(a.reply().as_deref(), reply, "{what}: x-amz-rdma-reply");
}

/// Asserts that a plain signed GET of `path` answers 404 NoSuchKey.
#[track_caller]
pub fn assert_absent(s3: &S3, path: &str) {
    let a = s3.get_plain(path);
    assert_eq!(
        a.status.as_u16(),
        404,
        "{path} should be absent: {} bytes there",
        a.body.len()
    );
    assert_eq!(
        a.code().as_deref(),
        Some("NoSuchKey"),
        "{path}: {}",
        a.text()
    );
}

/// Asserts that a plain signed GET of `path` answers exactly `data`.
#[track_caller]
pub fn assert_object(s3: &S3, path: &str, data: &[u8]) {
    let a = s3.get_plain(path);
    assert_eq!(a.status.as_u16(), 200, "GET {path}: {}", a.text());
    assert_eq!(a.body.len(), data.len(), "GET {path}: length");
    assert!(a.body[..] == data[..], "GET {path}: bytes differ");
}

/// The application-driven handshake: a handshake token sent in a signed
/// HEAD of `path`, and the token connection connected to the server QP its
/// reply names. Returns the reply.
pub fn handshake(s3: &S3, lib: &Hipobj, path: &str) -> String {
    let token = lib.handshake_token().unwrap();
    let a = s3.send(
        Method::HEAD,
        path,
        &[(hipobj_wire::headers::RDMA_TOKEN, &token)],
        Vec::new(),
        true,
    );
    assert_eq!(a.status, 200, "handshake");
    let reply = a.reply().expect("a handshake reply");
    lib.complete_handshake(&reply).unwrap();
    reply
}

/// The `x-amz-checksum-crc64nvme` value of `data`: base64 of the big-endian
/// CRC-64/NVME.
pub fn crc64nvme_b64(data: &[u8]) -> String {
    use base64::Engine as _;
    let mut d = crc64fast_nvme::Digest::new();
    d.write(data);
    base64::engine::general_purpose::STANDARD.encode(d.sum64().to_be_bytes())
}

impl Server {
    /// Whether the server process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `GET /health` answers 200.
    pub fn healthy(&self) -> bool {
        let s3 = S3::new(&self.url);
        s3.rt.block_on(async {
            let req = Request::get(format!("{}/health", self.url))
                .body(Body::empty())
                .unwrap();
            matches!(s3.client.request(req).await, Ok(r) if r.status() == 200)
        })
    }
}

/// Environment variable naming what a child client process does.
pub const CHILD_ROLE: &str = "HIPOBJ_TEST_CHILD_ROLE";
/// The line a child prints when its transfer is about to start.
pub const CHILD_READY: &str = "HIPOBJ-TEST-CHILD-READY";

/// Re-runs this test binary as a child client process: only its ignored
/// test `entry` runs, with `role` and `env` in its environment.
pub fn spawn_child(entry: &str, role: &str, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        entry,
        "--nocapture",
        "--ignored",
        "--test-threads=1",
    ])
    .env(CHILD_ROLE, role)
    .env("RUST_LOG", "error")
    .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn the child client process")
}

/// Reads a child's stdout until it says it is ready; false if it ended first.
pub fn wait_ready(child: &mut Child) -> bool {
    let Some(out) = child.stdout.take() else {
        return false;
    };
    let mut lines = BufReader::new(out).lines();
    let ready = lines.any(|l| l.is_ok_and(|l| l.contains(CHILD_READY)));
    // Keep draining in the background so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    ready
}
