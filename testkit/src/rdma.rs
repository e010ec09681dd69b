//! The client library on the software provider, its S3 callbacks over real
//! requests, the handshake, data patterns and CRC-64/NVME.

use std::sync::Arc;

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::NoTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options, S3Ops};
use hipobj_fabric::soft::SoftProvider;
use hipobj_wire::headers::{RDMA_REPLY, RDMA_TOKEN};
use http::Method;

use crate::s3::{Answer, S3};

/// The client library on a software device (`HIPOBJ_SOFT_ADDRS`, default
/// 127.0.0.1; `HIPOBJ_SOFT_TIMEOUT_SCALE`), GPU-less.
pub fn client() -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::from_env().unwrap()),
        topology: Arc::new(NoTopology),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

/// The application's side of a transfer: each token goes out in a signed
/// S3 request (`x-amz-rdma-token`, UNSIGNED-PAYLOAD, empty body), and its
/// `x-amz-rdma-reply` comes back.
#[derive(Debug)]
pub struct RdmaOps<'a> {
    /// The client the requests go through.
    pub s3: &'a S3,
    /// GET, PUT, HEAD.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Extra headers (a range, ...).
    pub headers: Vec<(String, String)>,
    /// The last answer.
    pub last: Option<Answer>,
    /// Requests sent.
    pub requests: usize,
    /// The header the token goes in (`x-amz-rdma-token`, or a server's
    /// second name for it).
    pub token_header: String,
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
            token_header: RDMA_TOKEN.to_string(),
        }
    }

    /// With the token sent under `name` instead of `x-amz-rdma-token`.
    pub fn with_token_header(mut self, name: &str) -> RdmaOps<'a> {
        self.token_header = name.to_string();
        self
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
    /// Panics when the request gets no answer (the test's failure, not the
    /// library's).
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        self.requests += 1;
        let mut h: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        h.push((self.token_header.as_str(), token));
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
            .and_then(|a| a.header(RDMA_REPLY))
            .ok_or(-1)?;
        out.get_mut(..r.len())
            .ok_or(-2)?
            .copy_from_slice(r.as_bytes());
        Ok(r.len())
    }
}

/// The application-driven handshake: a handshake token sent in a signed
/// HEAD of `path`, and the token connection connected to the server QP its
/// reply names. Returns the reply.
pub fn handshake(s3: &S3, lib: &Hipobj, path: &str) -> String {
    let token = lib.handshake_token().unwrap();
    let a = s3.send(
        Method::HEAD,
        path,
        &[(RDMA_TOKEN, &token)],
        Vec::new(),
        true,
    );
    assert_eq!(a.status, 200, "handshake");
    let reply = a.reply().expect("a handshake reply");
    lib.complete_handshake(&reply).unwrap();
    reply
}

/// `len` bytes of the fabric's test pattern for `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// The CRC-64/NVME of `data`.
pub fn crc64nvme(data: &[u8]) -> u64 {
    let mut d = crc64fast_nvme::Digest::new();
    d.write(data);
    d.sum64()
}

/// The `x-amz-checksum-crc64nvme` value of `data`: base64 of the big-endian
/// CRC-64/NVME.
pub fn crc64nvme_b64(data: &[u8]) -> String {
    hipobj_wire::checksum::crc64nvme_value(crc64nvme(data))
}
