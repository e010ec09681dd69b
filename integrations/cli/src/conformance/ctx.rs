//! What every check works with: the server's clients (RDMA and plain
//! HTTP), the client library, the suite's bucket, the token connection's
//! pair, and the steps the checks share (a plain PUT or GET of the
//! reference bytes, an RDMA request with a token of the library's, a
//! buffer with guard bytes).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use hipobj::{Direction, Hipobj, Registered};
use hipobj_s3::{RawAnswer, RawAuth, RawRequest, S3Client, Selection};
use hipobj_wire::Reply;
use http::Method;

use super::report::{expect, Expect, Failure, Observed};

/// The byte buffers are filled with around what a transfer moves: the
/// suite sees any write outside it.
pub const GUARD: u8 = 0xa5;

/// The suite's state.
pub struct Ctx<'r> {
    rt: &'r tokio::runtime::Handle,
    /// The client library (on the first NIC).
    pub lib: Arc<Hipobj>,
    /// The client library on each NIC of `--nic` (the first is `lib`), and
    /// an RDMA-only client of each (a client moves the buffers of its own
    /// library only).
    pub nics: Vec<(Arc<Hipobj>, S3Client)>,
    /// Transfers by RDMA only (`require_rdma`).
    pub s3: S3Client,
    /// Plain HTTP only: the reference reads and writes.
    pub plain: S3Client,
    /// A client with other credentials, when given.
    pub alt: Option<S3Client>,
    /// The bucket.
    pub bucket: String,
    /// The server's chunk size (the buffer sizes around it).
    pub chunk: usize,
    /// The restart command, for the re-handshake check.
    pub restart_cmd: Option<String>,
    /// The DC access key of the client's DC targets.
    pub dc_key: u64,
    /// Transfers by hipobj-rc-v2 only (the v2 dialect's client).
    pub v2: Option<S3Client>,
    /// Whether the server declined v2, once asked (`Some(None)`: it speaks
    /// it).
    pub v2_declined: Option<Option<String>>,
    /// Whether the token connection is paired with the server.
    paired: bool,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("bucket", &self.bucket)
            .field("chunk", &self.chunk)
            .field("paired", &self.paired)
            .finish_non_exhaustive()
    }
}

/// What the handshake found.
#[derive(Debug)]
pub enum Handshake {
    /// Paired; the answer.
    Paired(RawAnswer),
    /// Answered without `x-amz-rdma-reply`: the server has no RDMA.
    NoRdma(RawAnswer),
}

impl<'r> Ctx<'r> {
    /// A context; `paired` starts false.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: &'r tokio::runtime::Handle,
        lib: Arc<Hipobj>,
        s3: S3Client,
        plain: S3Client,
        alt: Option<S3Client>,
        bucket: String,
        chunk: usize,
        restart_cmd: Option<String>,
        dc_key: u64,
    ) -> Ctx<'r> {
        Ctx {
            rt,
            nics: vec![(lib.clone(), s3.clone())],
            lib,
            s3,
            plain,
            alt,
            bucket,
            chunk,
            restart_cmd,
            dc_key,
            v2: None,
            v2_declined: None,
            paired: false,
        }
    }

    /// The runtime, to start a request that runs beside the next.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt
    }

    /// Runs `f` to its end.
    pub fn block<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The key of `name` in the suite's bucket.
    pub fn key(&self, name: &str) -> String {
        format!("hipobj-conformance/{name}")
    }

    /// `/bucket/key` of `name`.
    pub fn path(&self, name: &str) -> String {
        format!("/{}/{}", self.bucket, self.key(name))
    }

    /// Stores `data` as `name` over plain HTTP.
    pub fn put_http(&self, name: &str, data: &[u8]) -> Result<(), Failure> {
        let key = self.key(name);
        self.block(
            self.plain
                .put_object_http(&self.bucket, &key, Bytes::copy_from_slice(data)),
        )
        .map(|_| ())
        .map_err(|e| Failure::error(format!("plain HTTP PUT of {key}"), e))
    }

    /// Reads `sel` of `name` over plain HTTP.
    pub fn get_http(&self, name: &str, sel: Selection) -> Result<Vec<u8>, Failure> {
        let key = self.key(name);
        let mut out = Vec::new();
        self.block(
            self.plain
                .get_object_http(&self.bucket, &key, sel, &mut out),
        )
        .map_err(|e| Failure::error(format!("plain HTTP GET of {key}"), e))?;
        Ok(out)
    }

    /// Whether `name` exists (HEAD 200), over plain HTTP.
    pub fn exists(&self, name: &str) -> Result<bool, Failure> {
        let key = self.key(name);
        match self.block(self.plain.head_object(&self.bucket, &key)) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(Failure::error(format!("HEAD of {key}"), e)),
        }
    }

    /// A registered buffer of `len` bytes, every byte [`GUARD`].
    pub fn buffer(&self, len: usize) -> Result<Registered<'static, 'static>, Failure> {
        self.lib
            .register_owned(vec![GUARD; len])
            .map_err(|e| Failure::error(format!("registering {len} bytes"), e))
    }

    /// Writes `data` at `off` into `reg`.
    pub fn fill(&self, reg: &Registered<'_, '_>, off: usize, data: &[u8]) -> Result<(), Failure> {
        reg.write(off, data)
            .map_err(|e| Failure::error("writing the buffer", e))
    }

    /// The whole buffer.
    pub fn contents(&self, reg: &Registered<'_, '_>) -> Result<Vec<u8>, Failure> {
        reg.to_vec()
            .map_err(|e| Failure::error("reading the buffer", e))
    }

    /// One raw request.
    pub fn raw(&self, step: &str, req: RawRequest) -> Result<RawAnswer, Failure> {
        self.block(self.s3.raw(req))
            .map_err(|e| Failure::error(step, e))
    }

    /// A raw request through `client` (the alternative credentials).
    pub fn raw_with(
        &self,
        client: &S3Client,
        step: &str,
        req: RawRequest,
    ) -> Result<RawAnswer, Failure> {
        self.block(client.raw(req))
            .map_err(|e| Failure::error(step, e))
    }

    /// The RC handshake of the token connection, in a HEAD of `name`.
    pub fn handshake(&mut self, name: &str) -> Result<Handshake, Failure> {
        self.paired = false;
        let token = self
            .lib
            .handshake_token()
            .map_err(|e| Failure::error("minting a handshake token", e))?;
        let req = RawRequest::new(Method::HEAD, self.path(name)).with_token(token);
        let a = self.raw("handshake", req)?;
        let Some(reply) = a.reply() else {
            return Ok(Handshake::NoRdma(a));
        };
        expect("handshake", &a, Expect::ok(200))?;
        match Reply::parse(reply.as_bytes()) {
            Ok(Reply::Peer(t)) if t.is_handshake() => {}
            _ => {
                return Err(Failure::new(
                    "handshake",
                    "x-amz-rdma-reply \"200:<88-hex RC token of length 0>\"",
                    Observed::of(&a),
                ))
            }
        }
        self.lib
            .complete_handshake(&reply)
            .map_err(|e| Failure::error("connecting to the server's QP", e))?;
        self.paired = true;
        Ok(Handshake::Paired(a))
    }

    /// Pairs the token connection unless it is.
    pub fn pair(&mut self) -> Result<(), Failure> {
        if self.paired {
            return Ok(());
        }
        match self.handshake("handshake")? {
            Handshake::Paired(_) => Ok(()),
            Handshake::NoRdma(a) => Err(Failure::new(
                "handshake",
                "an x-amz-rdma-reply",
                Observed::of(&a),
            )),
        }
    }

    /// Forgets the pair (the server dropped it: a failed transfer, a
    /// restart).
    pub fn unpair(&mut self) {
        self.paired = false;
    }

    /// A token of the token connection for `size` bytes at `off` of `reg`.
    pub fn token(
        &mut self,
        reg: &Registered<'_, '_>,
        dir: Direction,
        off: usize,
        size: usize,
    ) -> Result<String, Failure> {
        self.pair()?;
        reg.token(dir, off as u64, size)
            .map_err(|e| Failure::error("minting a token", e))
    }

    /// A GET of `path_query` by RDMA into `size` bytes at `off` of `reg`,
    /// with `headers`.
    pub fn rdma_get(
        &mut self,
        path_query: &str,
        reg: &Registered<'_, '_>,
        off: usize,
        size: usize,
        headers: &[(&str, &str)],
    ) -> Result<RawAnswer, Failure> {
        self.rdma(Direction::Get, path_query, reg, off, size, headers)
    }

    /// A PUT (PutObject, or UploadPart with its query) of `path_query` by
    /// RDMA from `size` bytes at `off` of `reg`, with `headers` (a
    /// checksum).
    pub fn rdma_put(
        &mut self,
        path_query: &str,
        reg: &Registered<'_, '_>,
        off: usize,
        size: usize,
        headers: &[(&str, &str)],
    ) -> Result<RawAnswer, Failure> {
        self.rdma(Direction::Put, path_query, reg, off, size, headers)
    }

    /// The request `rdma_get` and `rdma_put` send: GET or PUT by `dir`.
    fn rdma(
        &mut self,
        dir: Direction,
        path_query: &str,
        reg: &Registered<'_, '_>,
        off: usize,
        size: usize,
        headers: &[(&str, &str)],
    ) -> Result<RawAnswer, Failure> {
        let (method, what) = match dir {
            Direction::Get => (Method::GET, "RDMA GET"),
            Direction::Put => (Method::PUT, "RDMA PUT"),
        };
        let token = self.token(reg, dir, off, size)?;
        let mut req = RawRequest::new(method, path_query).with_token(token);
        req.moves = size as u64;
        for (k, v) in headers {
            req = req
                .with_header(k, v)
                .map_err(|e| Failure::error("building the request", e))?;
        }
        self.raw(what, req)
    }

    /// A request of `path_query` with `token`, authenticated as `auth`.
    pub fn with_token(
        &self,
        method: Method,
        path_query: &str,
        token: &str,
        auth: RawAuth,
    ) -> Result<RawAnswer, Failure> {
        let req = RawRequest::new(method, path_query)
            .with_token(token)
            .with_auth(auth);
        self.raw("request", req)
    }
}

/// `len` bytes of a pattern that differs for each `seed` and repeats only
/// after 2^64 bytes (xorshift64*, 8 bytes at a time).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    pattern_into(seed, 0, &mut v);
    v
}

/// The bytes of [`pattern`]`(seed, ..)` from `at` (a multiple of 8) into
/// `out`.
pub fn pattern_into(seed: u64, at: u64, out: &mut [u8]) {
    debug_assert_eq!(at % 8, 0);
    for (i, c) in out.chunks_mut(8).enumerate() {
        let n = (at / 8 + i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
        let mut x = n ^ (n >> 31);
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 29;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// The CRC-64/NVME header value of `data`.
pub fn crc(data: &[u8]) -> String {
    hipobj_s3::crc64nvme(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_differ_by_seed_and_continue_across_pieces() {
        let a = pattern(1, 100);
        assert_ne!(a, pattern(2, 100));
        let mut tail = vec![0u8; 36];
        pattern_into(1, 64, &mut tail);
        assert_eq!(&a[64..], &tail[..]);
    }
}
