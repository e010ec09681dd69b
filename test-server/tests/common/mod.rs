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

/// The test server in its own process.
pub struct Server {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl Server {
    pub fn start(port: u16) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hipobj-test-server"))
            .arg(port.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start hipobj-test-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_string();
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        Server { child, url, port }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
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
        hipobj_gateway::auth::sign_request(&mut req, AK, SK, REGION, &hash, SystemTime::now())
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
