//! The async client: the [`S3Client`] handle and what every operation
//! shares (the configuration checks, RDMA or HTTP, the fallback rule), with
//! one module per kind of operation:
//!
//! - [`send`]: signed requests with small bodies, GETs opened for their
//!   body, streamed request bodies (the HTTP plumbing under the others);
//! - [`buckets`] and [`listing`]: CreateBucket, DeleteBucket, ListBuckets,
//!   ListObjectsV2;
//! - [`rdma_path`]: [`Plan`](rdma_path::Plan), RDMA or HTTP, and
//!   [`RdmaPath`](rdma_path::RdmaPath), a GET or PUT by RDMA: by
//!   hipobj-rc-v2 first ([`v2_path`]), then by the handshake flow;
//! - [`transfer`]: what the RDMA and HTTP paths of a transfer share;
//! - [`get`]: GETs into a registered buffer (RDMA, or HTTP into the same
//!   bytes);
//! - [`upload`]: one PutObject or UploadPart of a buffer range;
//! - [`multipart`]: multipart uploads, split, run and completed by
//!   [`MultipartPlan`](planner::MultipartPlan) ([`planner`]);
//! - [`objects`]: PUT of a buffer (one request or multipart), HEAD, DELETE;
//! - [`streams`]: plain-HTTP PUTs of bytes, files and streams, and GETs
//!   into writers.
//!
//! Every retry goes through [`crate::retry`].

mod buckets;
mod get;
mod listing;
mod multipart;
mod objects;
mod planner;
mod rdma_path;
mod send;
mod streams;
mod transfer;
mod upload;
mod v2_path;

use std::sync::Arc;
use std::time::Duration;

use hipobj::Registered;

use crate::endpoints::{self, Endpoints};
use crate::http::{self as h, HttpClient};
use crate::rdma::{self, RdmaContext};
use crate::retry::{self, Retry};
use crate::sign::Signer;
use crate::{ClientConfig, Error, Result, MIN_PART_SIZE};

/// The largest body read into memory (error documents, listings).
const SMALL_BODY_CAP: usize = 16 << 20;
/// Chunks of buffer reads (checksums, HTTP bodies).
const CHUNK: usize = 1 << 20;
/// The largest single PUT S3 accepts.
const MAX_SINGLE_PUT: u64 = 5 << 30;

/// An S3 client that moves objects between S3 and registered memory by
/// RDMA, with plain-HTTP fallback. Cheap to clone (the clones share
/// connections).
///
/// Dropping a transfer's future before it completes waits (blocking) until
/// the RDMA transfer in flight has ended, bounded by the timeouts: the
/// server may still be writing or reading the buffer until then.
///
/// ```no_run
/// use std::sync::Arc;
/// use hipobj::{Config, Hipobj};
/// use hipobj_s3::{ClientConfig, S3Client, Selection};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let lib = Arc::new(Hipobj::new(&Config::with_nic("soft0"))?);
/// let mut cfg = ClientConfig::new("http://127.0.0.1:9000", "hipobj-test-key", "hipobj-test-secret");
/// cfg.rdma_memory = Some(lib.clone());
/// cfg.require_rdma = true; // prove RDMA was used
/// let s3 = S3Client::new(cfg)?;
///
/// let buf = lib.register_owned(vec![0u8; 1 << 20])?;
/// // Bytes 100..=199 of the object into the buffer at offset 4096.
/// let got = s3.get_object("bucket", "key", &buf, 4096, Some((100, 199))).await?;
/// assert_eq!(got.bytes, 100);
/// // Part 2 of an object uploaded in parts.
/// let part = s3.get_object_selection("bucket", "big", &buf, 0, Selection::Part(2)).await?;
/// # let _ = part;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct S3Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cfg: ClientConfig,
    endpoints: Endpoints,
    signer: Signer,
    http: HttpClient,
    rdma: Option<Arc<RdmaContext>>,
}

impl S3Client {
    /// A client for `cfg.endpoint` (one, or several separated by commas,
    /// each checked). Needs no runtime; with `cfg.rdma_memory` it starts a
    /// small runtime of its own for the RDMA requests.
    pub fn new(cfg: ClientConfig) -> Result<S3Client> {
        let list = endpoints::parse_list(&cfg.endpoint)?
            .into_iter()
            .map(|e| e.virtual_hosted(cfg.virtual_host))
            .collect();
        let endpoints = Endpoints::new(list, cfg.endpoint_cooldown)?;
        if cfg.part_size < MIN_PART_SIZE || cfg.part_size as u64 > MAX_SINGLE_PUT {
            return Err(Error::Config(format!(
                "part size {} is outside 5 MiB..=5 GiB",
                cfg.part_size
            )));
        }
        if cfg.concurrency == 0 || cfg.attempts == 0 {
            return Err(Error::Config(
                "concurrency and attempts must be at least 1".into(),
            ));
        }
        if cfg.access_key.is_empty() || cfg.region.is_empty() {
            return Err(Error::Config("empty access key or region".into()));
        }
        let signer = Signer {
            access_key: cfg.access_key.clone(),
            secret_key: cfg.secret_key.clone(),
            region: cfg.region.clone(),
        };
        let rdma = match &cfg.rdma_memory {
            Some(_) => Some(Arc::new(RdmaContext::new(
                signer.clone(),
                cfg.timeouts.connect,
                cfg.bind_to_token_nic,
            )?)),
            None => None,
        };
        Ok(S3Client {
            inner: Arc::new(Inner {
                http: h::client(None, cfg.timeouts.connect),
                cfg,
                endpoints,
                signer,
                rdma,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    /// The endpoint requests go to now, as the client uses it
    /// (`http://host:port`): the first of several until it fails.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoints.current().base
    }

    /// Every endpoint, in order, as the client uses them.
    pub fn endpoints(&self) -> Vec<&str> {
        self.inner
            .endpoints
            .all()
            .iter()
            .map(|e| e.base.as_str())
            .collect()
    }

    /// How much longer the current endpoint is remembered as having no
    /// RDMA, if it is.
    pub fn no_rdma_remembered(&self) -> Option<Duration> {
        rdma::remembered_no_rdma(self.endpoint())
    }

    /// Says goodbye to the servers for the RDMA pairs of this client's
    /// library that are not in use (`x-amz-rdma-goodbye`, docs/protocol.md),
    /// so that they release them now rather than when their probes find
    /// this process gone: call it when done (the `hipobj` command does
    /// before it exits). The library's connections connect again if used
    /// after. Best effort, each goodbye bounded by the handshake timeout;
    /// how many servers answered.
    pub async fn close(&self) -> usize {
        match (&self.inner.rdma, &self.inner.cfg.rdma_memory) {
            (Some(ctx), Some(lib)) => ctx.goodbyes(lib, self.inner.cfg.timeouts.request).await,
            _ => 0,
        }
    }

    /// Forgets that the endpoints had no RDMA: the next transfer tries
    /// again.
    pub fn forget_no_rdma(&self) {
        for e in self.inner.endpoints.all() {
            rdma::forget(&e.base);
        }
    }

    /// What a raw request needs: the endpoint (the one requests go to
    /// now), the signer, the HTTP client and the configuration.
    pub(crate) fn raw_parts(&self) -> (&h::Endpoint, &Signer, &HttpClient, &ClientConfig) {
        let i = &self.inner;
        (i.endpoints.pick().1, &i.signer, &i.http, &i.cfg)
    }

    /// The endpoint of the next attempt and its index (to note its end
    /// with [`Endpoints::note`]).
    fn endpoint_now(&self) -> (usize, &h::Endpoint) {
        self.inner.endpoints.pick()
    }

    /// The part size of multipart uploads from a buffer: the configured
    /// one, or a smaller cap of hipobj-rc-v2 PUTs the server announced
    /// (at least 5 MiB), so that each part goes by v2.
    fn part_size(&self) -> usize {
        let ps = self.inner.cfg.part_size;
        if !self.inner.cfg.rdma_protocol.tries_v2() || self.inner.rdma.is_none() {
            return ps;
        }
        match crate::rdma_v2::put_cap(self.endpoint()) {
            Some(cap) if cap >= MIN_PART_SIZE as u64 => ps.min(usize::try_from(cap).unwrap_or(ps)),
            _ => ps,
        }
    }

    /// The retry policy of every request.
    fn retry(&self) -> Retry {
        retry::policy(self.inner.cfg.attempts)
    }

    /// Checks that the buffer can be read and written by the client:
    /// memory registered with the client's library, host or GPU (the
    /// checksums and the fallback read and write GPU memory through the
    /// GPU runtime's copies: [`Registered::read`] and
    /// [`Registered::write`]).
    fn check_buffer(&self, reg: &Registered<'_, '_>) -> Result<()> {
        let Some(lib) = &self.inner.cfg.rdma_memory else {
            return Ok(());
        };
        lib.instance().buffers.find(reg.addr()).map_err(|_| {
            Error::InvalidArgument(format!(
                "the buffer at {:#x} is not registered with the client's library",
                reg.addr()
            ))
        })?;
        Ok(())
    }

    /// A fallback, or the error `require_rdma` makes of it.
    fn fallback(&self, reason: String) -> Result<String> {
        if self.inner.cfg.require_rdma {
            return Err(Error::RdmaRequired { reason });
        }
        tracing::info!(endpoint = self.endpoint(), "plain HTTP: {reason}");
        Ok(reason)
    }
}

/// Checks that `len` bytes at `offset` lie in the buffer.
fn check_range(reg: &Registered<'_, '_>, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= reg.len() => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{len} bytes at {offset} exceed the {}-byte buffer",
            reg.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListOptions, Selection};

    /// The futures can be moved across threads (spawned, joined).
    #[allow(dead_code)]
    fn futures_are_send(s: &S3Client, reg: &Registered<'_, 'static>) {
        fn send<T: Send>(_: T) {}
        send(s.get_object("b", "k", reg, 0, None));
        send(s.put_object("b", "k", reg, 0, 1));
        send(s.upload_part("b", "k", "u", 1, reg, 0, 1));
        send(s.upload_part_http("b", "k", "u", 1, bytes::Bytes::new()));
        send(s.complete_multipart_upload_sized("b", "k", "u", &[], Some(1)));
        send(s.put_object_http_parts("b", "k", 1, |_, _| Ok(bytes::Bytes::new())));
        send(s.list_objects_v2("b", &ListOptions::default()));
        send(s.put_object_http_file("b", "k", std::path::Path::new("f")));
        let mut v = Vec::new();
        send(s.get_object_http("b", "k", Selection::Whole, &mut v));
    }

    #[test]
    fn configs_are_checked() {
        let ok = ClientConfig::new("http://127.0.0.1:1", "a", "s");
        assert!(S3Client::new(ok.clone()).is_ok());
        let mut bad = ok.clone();
        bad.part_size = 1 << 20;
        assert!(matches!(S3Client::new(bad), Err(Error::Config(_))));
        let mut bad = ok.clone();
        bad.concurrency = 0;
        assert!(matches!(S3Client::new(bad), Err(Error::Config(_))));
        let mut bad = ok.clone();
        bad.endpoint = "ftp://x".into();
        assert!(matches!(S3Client::new(bad), Err(Error::Config(_))));
        // Several endpoints, each checked.
        let two = ok
            .clone()
            .with_endpoints(["http://127.0.0.1:1", " http://127.0.0.1:2 "]);
        let s = S3Client::new(two).unwrap();
        assert_eq!(s.endpoints(), ["http://127.0.0.1:1", "http://127.0.0.1:2"]);
        assert_eq!(s.endpoint(), "http://127.0.0.1:1");
        for bad_list in ["http://127.0.0.1:1,ftp://x", "http://127.0.0.1:1,", ","] {
            let mut bad = ok.clone();
            bad.endpoint = bad_list.into();
            assert!(
                matches!(S3Client::new(bad), Err(Error::Config(_))),
                "{bad_list}"
            );
        }
    }
}
