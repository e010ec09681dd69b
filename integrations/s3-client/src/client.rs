//! The async client.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use hipobj::{Direction, Registered};
use hipobj_wire::headers;
use http::header::{HeaderMap, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, LAST_MODIFIED};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::checksum::{self, Crc64Nvme};
use crate::http::{self as h, Answer, BoxError, HttpClient};
use crate::rdma::{self, Attempt, Ops, RdmaContext, RdmaRequest};
use crate::sign::{Signer, EMPTY_SHA256};
use crate::{
    BucketEntry, ClientConfig, CompletedPart, Error, ListOptions, ListPage, ObjectInfo, Outcome,
    Path, Result, Selection, MIN_PART_SIZE,
};

/// The largest body read into memory (error documents, listings).
const SMALL_BODY_CAP: usize = 16 << 20;
/// Chunks of buffer reads (checksums, HTTP bodies).
const CHUNK: usize = 1 << 20;
/// The largest single PUT S3 accepts.
const MAX_SINGLE_PUT: u64 = 5 << 30;
/// The most parts of a multipart upload.
const MAX_PARTS: usize = 10_000;

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
    endpoint: h::Endpoint,
    signer: Signer,
    http: HttpClient,
    rdma: Option<Arc<RdmaContext>>,
}

/// What a transfer moves.
#[derive(Clone, Copy)]
enum Dir {
    Get,
    Put,
}

/// Either RDMA (with the context) or HTTP (with the reason).
enum Plan {
    Rdma(Arc<RdmaContext>),
    Http(String),
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 * u64::from(attempt))
}

fn sha256_hex(b: &[u8]) -> String {
    if b.is_empty() {
        EMPTY_SHA256.to_string()
    } else {
        hex::encode(sha2::Sha256::digest(b))
    }
}

/// The bytes an RDMA GET moved, from its answer.
fn rdma_get_bytes(a: &Answer) -> Option<u64> {
    let n = a
        .header(headers::RDMA_BYTES_TRANSFERRED)
        .or_else(|| a.header(headers::NOOBAA_RDMA_BYTES))
        .and_then(|v| v.trim().parse().ok());
    n.or_else(|| {
        let cr = a.header(CONTENT_RANGE.as_str())?;
        let span = cr.trim().strip_prefix("bytes ")?.split('/').next()?;
        let (first, last) = span.split_once('-')?;
        let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
        Some(last.checked_sub(first)? + 1)
    })
}

/// The CRC of `len` bytes of `reg` at `off`, read in place.
/// The CRC64NVME of the bytes an RDMA GET wrote, when the answer declares
/// a full-object one to compare it with.
fn verify_crc(
    ans: &Answer,
    reg: &Registered<'_, '_>,
    buf_off: usize,
    len: usize,
) -> Option<Result<String>> {
    let declared = ans.header(headers::CHECKSUM_CRC64NVME);
    if !declared.as_deref().is_some_and(checksum::is_full_object) {
        return None;
    }
    match rdma_get_bytes(ans) {
        Some(n) if n <= len as u64 => Some(crc_of(reg, buf_off, n as usize)),
        _ => None,
    }
}

fn crc_of(reg: &Registered<'_, '_>, off: usize, len: usize) -> Result<String> {
    let mut d = Crc64Nvme::new();
    reg.with_bytes(off, len, |b| d.update(b))?;
    Ok(d.header_value())
}

impl S3Client {
    /// A client for `cfg.endpoint`. Needs no runtime; with
    /// `cfg.rdma_memory` it starts a small runtime of its own for the RDMA
    /// requests.
    pub fn new(cfg: ClientConfig) -> Result<S3Client> {
        let endpoint = h::Endpoint::parse(&cfg.endpoint)?.virtual_hosted(cfg.virtual_host);
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
                endpoint.clone(),
                cfg.timeouts.connect,
                cfg.bind_to_token_nic,
            )?)),
            None => None,
        };
        Ok(S3Client {
            inner: Arc::new(Inner {
                http: h::client(None, cfg.timeouts.connect),
                cfg,
                endpoint,
                signer,
                rdma,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    /// The endpoint as the client uses it (`http://host:port`).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint.base
    }

    /// How much longer the endpoint is remembered as having no RDMA, if it
    /// is.
    pub fn no_rdma_remembered(&self) -> Option<Duration> {
        rdma::remembered_no_rdma(self.endpoint())
    }

    /// Forgets that the endpoint had no RDMA: the next transfer tries again.
    pub fn forget_no_rdma(&self) {
        rdma::forget(self.endpoint());
    }

    /// What a raw request needs: the endpoint, the signer, the HTTP client
    /// and the configuration.
    pub(crate) fn raw_parts(&self) -> (&h::Endpoint, &Signer, &HttpClient, &ClientConfig) {
        let i = &self.inner;
        (&i.endpoint, &i.signer, &i.http, &i.cfg)
    }

    // ---------------------------------------------------------------------
    // Plain requests.

    /// A signed request with a small body, retried on transport failures,
    /// timeouts and 5xx; the answer whatever its status.
    async fn plain(
        &self,
        method: Method,
        path_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer> {
        let cfg = &self.inner.cfg;
        let hash = sha256_hex(&body);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let target = self.inner.endpoint.target(path_query)?;
            let req = h::signed(
                &self.inner.signer,
                method.clone(),
                target,
                headers.clone(),
                h::full(body.clone()),
                body.len() as u64,
                &hash,
            )?;
            let limit = cfg.timeouts.for_bytes(body.len() as u64);
            let r = async {
                let resp = h::send(&self.inner.http, req, limit).await?;
                let (parts, mut b) = resp.into_parts();
                let body = h::read_capped(&mut b, SMALL_BODY_CAP, cfg.timeouts.request).await?;
                Ok::<_, Error>(Answer {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                })
            }
            .await;
            let retry = match &r {
                Ok(a) => a.status.is_server_error(),
                Err(e) => e.is_retryable(),
            };
            if retry && attempt < cfg.attempts {
                tracing::debug!(%method, path_query, attempt, "retrying");
                tokio::time::sleep(backoff(attempt)).await;
                continue;
            }
            return r;
        }
    }

    /// `PUT /bucket` (with a LocationConstraint outside us-east-1).
    pub async fn create_bucket(&self, bucket: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        let body = if self.inner.cfg.region == "us-east-1" {
            Bytes::new()
        } else {
            Bytes::from(crate::xml::create_bucket_body(&self.inner.cfg.region))
        };
        self.plain(
            Method::PUT,
            &h::path_query(bucket, None, &[]),
            &HeaderMap::new(),
            body,
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `DELETE /bucket` (it must be empty).
    pub async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, None, &[]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `GET /`: the buckets.
    pub async fn list_buckets(&self) -> Result<Vec<BucketEntry>> {
        let a = self
            .plain(Method::GET, "/", &HeaderMap::new(), Bytes::new())
            .await?
            .ok()?;
        crate::xml::list_buckets(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }

    /// `DELETE /bucket/key`. Deleting a missing key succeeds, as in S3.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, Some(key), &[]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `HEAD /bucket/key`. A missing object is an [`Error::S3`] with status
    /// 404 ([`Error::is_not_found`]).
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<ObjectInfo> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let a = self
            .plain(
                Method::HEAD,
                &h::path_query(bucket, Some(key), &[]),
                &hm,
                Bytes::new(),
            )
            .await?
            .ok()?;
        let size = a
            .header(CONTENT_LENGTH.as_str())
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| Error::Protocol("HEAD answered without Content-Length".into()))?;
        Ok(ObjectInfo {
            size,
            etag: a.header(ETAG.as_str()),
            last_modified: a.header(LAST_MODIFIED.as_str()),
            content_type: a.header(CONTENT_TYPE.as_str()),
            checksum_crc64nvme: a.header(headers::CHECKSUM_CRC64NVME),
        })
    }

    /// `GET /bucket?list-type=2`: one page of keys.
    ///
    /// ```no_run
    /// # async fn demo(s3: hipobj_s3::S3Client) -> hipobj_s3::Result<()> {
    /// use hipobj_s3::ListOptions;
    /// let mut opts = ListOptions { prefix: Some("dir/".into()), delimiter: Some("/".into()), ..Default::default() };
    /// loop {
    ///     let page = s3.list_objects_v2("bucket", &opts).await?;
    ///     for o in &page.objects { println!("{} {}", o.size, o.key); }
    ///     for p in &page.common_prefixes { println!("PRE {p}"); }
    ///     if !page.is_truncated { break; }
    ///     opts.continuation_token = page.next_continuation_token;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_objects_v2(&self, bucket: &str, opts: &ListOptions) -> Result<ListPage> {
        h::check_bucket(bucket)?;
        let max = opts.max_keys.map(|m| m.to_string());
        // Sorted by name, as the canonical request wants them anyway.
        let mut q: Vec<(&str, Option<&str>)> = vec![("list-type", Some("2"))];
        if let Some(t) = &opts.continuation_token {
            q.push(("continuation-token", Some(t)));
        }
        if let Some(d) = &opts.delimiter {
            q.push(("delimiter", Some(d)));
        }
        if let Some(m) = &max {
            q.push(("max-keys", Some(m)));
        }
        if let Some(p) = &opts.prefix {
            q.push(("prefix", Some(p)));
        }
        if let Some(s) = &opts.start_after {
            q.push(("start-after", Some(s)));
        }
        q.sort_by(|a, b| a.0.cmp(b.0));
        let a = self
            .plain(
                Method::GET,
                &h::path_query(bucket, None, &q),
                &HeaderMap::new(),
                Bytes::new(),
            )
            .await?
            .ok()?;
        crate::xml::list_objects(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }

    /// `POST /bucket/key?uploads`: a new multipart upload's id.
    pub async fn create_multipart_upload(&self, bucket: &str, key: &str) -> Result<String> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let a = self
            .plain(
                Method::POST,
                &h::path_query(bucket, Some(key), &[("uploads", None)]),
                &HeaderMap::new(),
                Bytes::new(),
            )
            .await?
            .ok()?;
        crate::xml::upload_id(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }

    /// `POST /bucket/key?uploadId=`: completes an upload with its parts (in
    /// part-number order); the object's ETag.
    pub async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
    ) -> Result<Option<String>> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let body = crate::xml::complete_body(parts);
        let a = self
            .plain(
                Method::POST,
                &h::path_query(bucket, Some(key), &[("uploadId", Some(upload_id))]),
                &HeaderMap::new(),
                Bytes::from(body),
            )
            .await?
            .ok()?;
        Ok(crate::xml::first(&String::from_utf8_lossy(&a.body), "ETag")
            .or_else(|| a.header(ETAG.as_str())))
    }

    /// `DELETE /bucket/key?uploadId=`: abandons an upload and its parts.
    pub async fn abort_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<()> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, Some(key), &[("uploadId", Some(upload_id))]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    // ---------------------------------------------------------------------
    // Transfers with registered buffers.

    /// RDMA, or HTTP and why.
    fn plan(&self) -> Plan {
        let Some(ctx) = &self.inner.rdma else {
            return Plan::Http("no client library is configured (rdma_memory is None)".into());
        };
        if let Some(left) = rdma::remembered_no_rdma(self.endpoint()) {
            return Plan::Http(format!(
                "{} was found without RDMA (remembered for {} s more)",
                self.endpoint(),
                left.as_secs()
            ));
        }
        Plan::Rdma(ctx.clone())
    }

    /// Checks that the buffer can be read and written by the client: host
    /// memory registered with the client's library.
    fn check_buffer(&self, reg: &Registered<'_, '_>) -> Result<()> {
        let Some(lib) = &self.inner.cfg.rdma_memory else {
            return Ok(());
        };
        let entry = lib.instance().buffers.find(reg.addr()).map_err(|_| {
            Error::InvalidArgument(format!(
                "the buffer at {:#x} is not registered with the client's library",
                reg.addr()
            ))
        })?;
        if entry.kind != hipobj::buffer::Registration::Host {
            return Err(Error::InvalidArgument(
                "the buffer is not host memory: register it with Hipobj::register_owned".into(),
            ));
        }
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

    /// RDMA attempts of one transfer: the answer, the attempts made and
    /// (GET with `verify`) the CRC of the bytes received; or why to fall
    /// back.
    #[allow(clippy::too_many_arguments)]
    async fn rdma_transfer(
        &self,
        ctx: &Arc<RdmaContext>,
        reg: &Registered<'_, 'static>,
        dir: Dir,
        buf_off: usize,
        len: usize,
        req: RdmaRequest,
        verify: bool,
    ) -> Result<std::result::Result<(Answer, u32, Option<String>), String>> {
        let cfg = &self.inner.cfg;
        let req = Arc::new(req);
        // A handle of this future's own: were the future forgotten while
        // the server still reads or writes the buffer, the registration and
        // its memory would stay alive (leaked) rather than be freed under
        // the transfer; a blocking thread gets a handle of its own too.
        let reg = &reg.handle();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let quick = if len <= rdma::STEPWISE_MAX {
                let d = match dir {
                    Dir::Get => Direction::Get,
                    Dir::Put => Direction::Put,
                };
                rdma::stepwise(ctx, &req, reg, d, buf_off as u64, len).await
            } else {
                None
            };
            let (c, r) = (ctx.clone(), req.clone());
            let (result, actual) = if let Some(a) = quick {
                let mut actual = None;
                if let (Attempt::Done(ans), true) = (&a, verify) {
                    actual = verify_crc(ans, reg, buf_off, len);
                }
                (a, actual)
            } else {
                rdma::run_blocking(ctx, reg.handle(), move |reg| {
                    let mut ops = Ops::new(c, r);
                    let res = match dir {
                        Dir::Get => reg.get(buf_off as u64, len, &mut ops),
                        Dir::Put => reg.put(buf_off as u64, len, &mut ops),
                    };
                    let a = rdma::classify(res, ops);
                    let mut actual = None;
                    if let (Attempt::Done(ans), true) = (&a, verify) {
                        actual = verify_crc(ans, reg, buf_off, len);
                    }
                    (a, actual)
                })
                .await?
            };
            let actual = actual.transpose()?;
            match result {
                Attempt::Done(a) => return Ok(Ok((a, attempt, actual))),
                Attempt::NoRdma(reason) => {
                    rdma::remember_no_rdma(self.endpoint(), cfg.no_rdma_ttl);
                    return Ok(Err(reason));
                }
                Attempt::Declined(reason) => return Ok(Err(reason)),
                // No pair free: they are held by other clients' connections
                // and do not free up within a backoff. This request goes
                // over HTTP; the next one tries RDMA again.
                Attempt::Busy {
                    handshake: true,
                    reason,
                } => return Ok(Err(reason)),
                // No staging buffer free: they free up as transfers end.
                Attempt::Busy { reason, .. } if attempt < cfg.attempts => {
                    tracing::debug!(
                        attempt,
                        "RDMA transfer refused for capacity, retrying: {reason}"
                    );
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Attempt::Busy { reason, .. } => {
                    return Ok(Err(format!("{reason} ({attempt} attempts)")))
                }
                Attempt::Failed(e) if e.is_retryable() && attempt < cfg.attempts => {
                    tracing::debug!(attempt, "RDMA attempt failed, retrying: {e}");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Attempt::Failed(e) => {
                    if e.code() == Some("InvalidRDMABufferSize") {
                        return Err(Error::BufferTooSmall {
                            needed: None,
                            available: len as u64,
                        });
                    }
                    return Err(e);
                }
            }
        }
    }

    /// GET of the whole object into `reg` at `buf_offset`, or of bytes
    /// `first..=last` with `range: Some((first, last))`. The object (or
    /// range) must fit in the rest of the buffer.
    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        range: Option<(u64, u64)>,
    ) -> Result<Outcome> {
        let sel = match range {
            Some((first, last)) => Selection::Range { first, last },
            None => Selection::Whole,
        };
        self.get_object_selection(bucket, key, reg, buf_offset, sel)
            .await
    }

    /// GET of one part (`?partNumber=`) of an object uploaded in parts.
    pub async fn get_object_part(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        part_number: u32,
    ) -> Result<Outcome> {
        self.get_object_selection(bucket, key, reg, buf_offset, Selection::Part(part_number))
            .await
    }

    /// GET of the [`Selection`] into `reg` at `buf_offset`: by RDMA when
    /// possible, else over HTTP into the same bytes. Whole objects are
    /// checked against the server's `x-amz-checksum-crc64nvme`, when it
    /// sends one.
    pub async fn get_object_selection(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        sel: Selection,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        let space = reg
            .len()
            .checked_sub(buf_offset)
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "offset {buf_offset} leaves no room in the {}-byte buffer",
                    reg.len()
                ))
            })?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let part;
        let mut query: Vec<(&str, Option<&str>)> = Vec::new();
        let want = match sel {
            Selection::Whole => space,
            Selection::Range { first, last } => {
                let n = last
                    .checked_sub(first)
                    .and_then(|d| d.checked_add(1))
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("range {first}-{last} is empty"))
                    })?;
                if n > space as u64 {
                    return Err(Error::BufferTooSmall {
                        needed: Some(n),
                        available: space as u64,
                    });
                }
                h::set(&mut hm, "range", &format!("bytes={first}-{last}"))?;
                n as usize
            }
            Selection::Part(n) => {
                if n == 0 {
                    return Err(Error::InvalidArgument("part numbers start at 1".into()));
                }
                part = n.to_string();
                query.push(("partNumber", Some(&part)));
                space
            }
        };
        let path_query = h::path_query(bucket, Some(key), &query);
        let cfg = &self.inner.cfg;
        let reason = match self.plan() {
            Plan::Rdma(ctx) => {
                let req = RdmaRequest {
                    method: Method::GET,
                    path_query: path_query.clone(),
                    headers: hm.clone(),
                    limit: cfg.timeouts.for_bytes(want as u64),
                    handshake_limit: cfg.timeouts.request,
                };
                let verify = sel == Selection::Whole;
                match self
                    .rdma_transfer(&ctx, reg, Dir::Get, buf_offset, want, req, verify)
                    .await?
                {
                    Ok((a, attempts, actual)) => {
                        let bytes = rdma_get_bytes(&a).ok_or_else(|| {
                            Error::Protocol(
                                "an RDMA GET answered without x-amz-rdma-bytes-transferred".into(),
                            )
                        })?;
                        if bytes > want as u64 {
                            return Err(Error::Protocol(format!(
                                "the server reports {bytes} bytes written into a {want}-byte token"
                            )));
                        }
                        let declared = a.header(headers::CHECKSUM_CRC64NVME);
                        let mut out = Outcome::new(Path::Rdma, bytes);
                        if let (Some(d), Some(actual)) = (&declared, &actual) {
                            checksum::verify(d, actual, Path::Rdma)?;
                            out.checksum_verified = true;
                        }
                        out.checksum_crc64nvme = declared;
                        out.attempts = attempts;
                        fill_get(&mut out, &a, sel, bytes);
                        return Ok(out);
                    }
                    Err(reason) => self.fallback(reason)?,
                }
            }
            Plan::Http(reason) => self.fallback(reason)?,
        };
        let mut out = self
            .http_get_into(reg, buf_offset, space, &path_query, &hm, sel)
            .await?;
        out.fallback_reason = Some(reason);
        Ok(out)
    }

    /// GET over HTTP into the buffer.
    async fn http_get_into(
        &self,
        reg: &Registered<'_, '_>,
        buf_off: usize,
        space: usize,
        path_query: &str,
        hm: &HeaderMap,
        sel: Selection,
    ) -> Result<Outcome> {
        let cfg = &self.inner.cfg;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let r = self
                .http_get_once(reg, buf_off, space, path_query, hm, sel)
                .await;
            match r {
                Err(e) if e.is_retryable() && attempt < cfg.attempts => {
                    tracing::debug!(attempt, "HTTP GET failed, retrying: {e}");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(e) => return Err(e),
                Ok(mut out) => {
                    out.attempts = attempt;
                    return Ok(out);
                }
            }
        }
    }

    async fn http_get_once(
        &self,
        reg: &Registered<'_, '_>,
        buf_off: usize,
        space: usize,
        path_query: &str,
        hm: &HeaderMap,
        sel: Selection,
    ) -> Result<Outcome> {
        let cfg = &self.inner.cfg;
        let (a, mut body) = self.open_get(path_query, hm).await?;
        if let Some(n) = a
            .header(CONTENT_LENGTH.as_str())
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            if n > space as u64 {
                return Err(Error::BufferTooSmall {
                    needed: Some(n),
                    available: space as u64,
                });
            }
        }
        let deadline = tokio::time::Instant::now() + cfg.timeouts.for_bytes(space as u64);
        let mut crc = Crc64Nvme::new();
        let mut n = 0usize;
        loop {
            let chunk =
                tokio::time::timeout_at(deadline, h::next_chunk(&mut body, cfg.timeouts.request))
                    .await
                    .map_err(|_| Error::Timeout("the HTTP GET body took too long".into()))??;
            let Some(d) = chunk else { break };
            if d.len() > space - n {
                return Err(Error::BufferTooSmall {
                    needed: None,
                    available: space as u64,
                });
            }
            reg.write(buf_off + n, &d)?;
            crc.update(&d);
            n += d.len();
        }
        let mut out = Outcome::new(Path::Http, n as u64);
        let declared = a.header(headers::CHECKSUM_CRC64NVME);
        if let Some(d) = &declared {
            if sel == Selection::Whole && a.status == StatusCode::OK {
                checksum::verify(d, &crc.header_value(), Path::Http)?;
                out.checksum_verified = checksum::is_full_object(d);
            }
        }
        out.checksum_crc64nvme = declared;
        fill_get(&mut out, &a, sel, n as u64);
        Ok(out)
    }

    /// Sends a GET; a successful answer's head and its body, or the S3
    /// error.
    async fn open_get(
        &self,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<(Answer, hyper::body::Incoming)> {
        let cfg = &self.inner.cfg;
        let target = self.inner.endpoint.target(path_query)?;
        let req = h::signed(
            &self.inner.signer,
            Method::GET,
            target,
            hm.clone(),
            h::empty(),
            0,
            EMPTY_SHA256,
        )?;
        let resp = h::send(&self.inner.http, req, cfg.timeouts.request).await?;
        let (parts, mut body) = resp.into_parts();
        let mut a = Answer {
            status: parts.status,
            headers: parts.headers,
            body: Bytes::new(),
        };
        if !a.status.is_success() {
            a.body = h::read_capped(&mut body, SMALL_BODY_CAP, cfg.timeouts.request).await?;
            return Err(a.error(None));
        }
        Ok((a, body))
    }

    /// PUT of `len` bytes of `reg` at `offset` as the object: one request
    /// up to [`ClientConfig::part_size`], a multipart upload with
    /// [`ClientConfig::concurrency`] parts at once above it. Each request
    /// carries the CRC64NVME of its bytes. An empty object goes over HTTP
    /// (RDMA cannot move zero bytes), even with `require_rdma`.
    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        check_range(reg, offset, len)?;
        if len == 0 {
            return self.put_object_http(bucket, key, Bytes::new()).await;
        }
        if len <= self.inner.cfg.part_size {
            let path_query = h::path_query(bucket, Some(key), &[]);
            return self.put_one(&path_query, reg, offset, len).await;
        }
        self.put_multipart(bucket, key, reg, offset, len).await
    }

    /// A multipart upload of `len` bytes of `reg` at `offset`, in parts of
    /// [`ClientConfig::part_size`], [`ClientConfig::concurrency`] at once;
    /// aborted if any part fails, so no object is left behind.
    async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        let ps = self.inner.cfg.part_size;
        let count = len.div_ceil(ps);
        if count > MAX_PARTS {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes in {ps}-byte parts would be {count} parts, more than {MAX_PARTS}"
            )));
        }
        if self.inner.cfg.require_rdma {
            if let Plan::Http(reason) = self.plan() {
                return Err(Error::RdmaRequired { reason });
            }
        }
        let upload_id = self.create_multipart_upload(bucket, key).await?;
        let uid = upload_id.as_str();
        let results: Vec<Result<(u32, Outcome)>> = futures::stream::iter(0..count)
            .map(|i| async move {
                let n = (i + 1) as u32;
                let off = offset + i * ps;
                let l = ps.min(len - i * ps);
                self.upload_part(bucket, key, uid, n, reg, off, l)
                    .await
                    .map(|o| (n, o))
            })
            .buffer_unordered(self.inner.cfg.concurrency)
            .collect()
            .await;
        let mut parts = Vec::with_capacity(count);
        let mut first_err = None;
        for r in results {
            match r {
                Ok(p) => parts.push(p),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            if let Err(ae) = self.abort_multipart_upload(bucket, key, uid).await {
                tracing::warn!("aborting multipart upload {uid}: {ae}");
            }
            return Err(e);
        }
        parts.sort_by_key(|p| p.0);
        let mut path = parts[0].1.path;
        let mut attempts = 1;
        let mut reason = None;
        let mut completed = Vec::with_capacity(count);
        for (n, o) in &parts {
            path = path.join(o.path);
            attempts = attempts.max(o.attempts);
            if reason.is_none() {
                reason.clone_from(&o.fallback_reason);
            }
            completed.push(CompletedPart {
                part_number: *n,
                etag: o.etag.clone().ok_or_else(|| {
                    Error::Protocol(format!("part {n} was answered without an ETag"))
                })?,
            });
        }
        let etag = match self
            .complete_multipart_upload(bucket, key, uid, &completed)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                if let Err(ae) = self.abort_multipart_upload(bucket, key, uid).await {
                    tracing::warn!("aborting multipart upload {uid}: {ae}");
                }
                return Err(e);
            }
        };
        let mut out = Outcome::new(path, len as u64);
        out.etag = etag;
        out.parts = count as u32;
        out.attempts = attempts;
        out.fallback_reason = reason;
        Ok(out)
    }

    /// UploadPart of `len` bytes of `reg` at `offset`, by RDMA when
    /// possible; the Outcome's `etag` goes into the [`CompletedPart`].
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        check_range(reg, offset, len)?;
        if len == 0 || part_number == 0 {
            return Err(Error::InvalidArgument(
                "a part needs at least one byte and a number from 1".into(),
            ));
        }
        let n = part_number.to_string();
        let path_query = h::path_query(
            bucket,
            Some(key),
            &[("partNumber", Some(&n)), ("uploadId", Some(upload_id))],
        );
        self.put_one(&path_query, reg, offset, len).await
    }

    /// One PutObject or UploadPart of a non-empty range of the buffer.
    async fn put_one(
        &self,
        path_query: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        let cfg = &self.inner.cfg;
        let plan = self.plan();
        let crc = match &plan {
            // A small buffer's checksum costs less than a thread hop.
            Plan::Rdma(_) if len <= rdma::STEPWISE_MAX => crc_of(reg, offset, len)?,
            Plan::Rdma(ctx) => {
                rdma::run_blocking(ctx, reg.handle(), move |r| crc_of(r, offset, len)).await??
            }
            Plan::Http(_) => self.crc_inline(reg, offset, len).await?,
        };
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let reason = match plan {
            Plan::Rdma(ctx) => {
                let req = RdmaRequest {
                    method: Method::PUT,
                    path_query: path_query.to_string(),
                    headers: hm.clone(),
                    limit: cfg.timeouts.for_bytes(len as u64),
                    handshake_limit: cfg.timeouts.request,
                };
                match self
                    .rdma_transfer(&ctx, reg, Dir::Put, offset, len, req, false)
                    .await?
                {
                    Ok((a, attempts, _)) => {
                        let mut out = Outcome::new(Path::Rdma, len as u64);
                        out.etag = a.header(ETAG.as_str());
                        out.checksum_crc64nvme = Some(crc);
                        out.status = a.status.as_u16();
                        out.attempts = attempts;
                        return Ok(out);
                    }
                    Err(reason) => self.fallback(reason)?,
                }
            }
            Plan::Http(reason) => self.fallback(reason)?,
        };
        let (a, attempts) = self
            .http_put_from(reg, offset, len, path_query, &hm)
            .await?;
        let mut out = Outcome::new(Path::Http, len as u64);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = Some(crc);
        out.status = a.status.as_u16();
        out.attempts = attempts;
        out.fallback_reason = Some(reason);
        Ok(out)
    }

    /// The CRC of a buffer range on this task, in place, yielding between
    /// chunks.
    async fn crc_inline(&self, reg: &Registered<'_, '_>, off: usize, len: usize) -> Result<String> {
        let mut d = Crc64Nvme::new();
        let mut pos = 0;
        while pos < len {
            let n = (8 * CHUNK).min(len - pos);
            reg.with_bytes(off + pos, n, |b| d.update(b))?;
            pos += n;
            if pos < len {
                tokio::task::yield_now().await;
            }
        }
        Ok(d.header_value())
    }

    /// PUT over HTTP of a buffer range, streamed from the buffer.
    async fn http_put_from(
        &self,
        reg: &Registered<'_, '_>,
        off: usize,
        len: usize,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<(Answer, u32)> {
        let cfg = &self.inner.cfg;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, BoxError>>(4);
            let producer = async move {
                let mut pos = 0;
                while pos < len {
                    let n = CHUNK.min(len - pos);
                    let mut v = vec![0u8; n];
                    if let Err(e) = reg.read(off + pos, &mut v) {
                        let _ = tx.send(Err(e.to_string().into())).await;
                        return Err(Error::from(e));
                    }
                    if tx.send(Ok(Bytes::from(v))).await.is_err() {
                        break;
                    }
                    pos += n;
                }
                Ok(())
            };
            let r = self
                .send_streamed(Method::PUT, path_query, hm, rx, len as u64, producer)
                .await;
            let retry = match &r {
                Ok(a) => a.status.is_server_error(),
                Err(e) => e.is_retryable(),
            };
            if retry && attempt < cfg.attempts {
                tokio::time::sleep(backoff(attempt)).await;
                continue;
            }
            return Ok((r?.ok()?, attempt));
        }
    }

    /// Sends a request whose body comes from `rx`, fed by `producer`
    /// concurrently; the answer whatever its status.
    async fn send_streamed<P>(
        &self,
        method: Method,
        path_query: &str,
        hm: &HeaderMap,
        rx: tokio::sync::mpsc::Receiver<std::result::Result<Bytes, BoxError>>,
        len: u64,
        producer: P,
    ) -> Result<Answer>
    where
        P: std::future::Future<Output = Result<()>>,
    {
        let cfg = &self.inner.cfg;
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|c| (c.map(Frame::data), rx))
        });
        let body = BodyExt::boxed_unsync(StreamBody::new(stream));
        let target = self.inner.endpoint.target(path_query)?;
        let req = h::signed(
            &self.inner.signer,
            method,
            target,
            hm.clone(),
            body,
            len,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let limit = cfg.timeouts.for_bytes(len);
        let send = async {
            let resp = h::send(&self.inner.http, req, limit).await?;
            let (parts, mut b) = resp.into_parts();
            let body = h::read_capped(&mut b, SMALL_BODY_CAP, cfg.timeouts.request).await?;
            Ok::<_, Error>(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        futures::pin_mut!(send);
        futures::pin_mut!(producer);
        match futures::future::select(send, producer).await {
            futures::future::Either::Left((r, _)) => r,
            futures::future::Either::Right((p, send)) => {
                p?;
                send.await
            }
        }
    }

    // ---------------------------------------------------------------------
    // Plain HTTP transfers of streams and files.

    /// PUT of `data` over plain HTTP, with its CRC64NVME.
    pub async fn put_object_http(&self, bucket: &str, key: &str, data: Bytes) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let crc = checksum::crc64nvme(&data);
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let len = data.len() as u64;
        let a = self
            .plain(
                Method::PUT,
                &h::path_query(bucket, Some(key), &[]),
                &hm,
                data,
            )
            .await?
            .ok()?;
        let mut out = Outcome::new(Path::Http, len);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = Some(crc);
        out.status = a.status.as_u16();
        Ok(out)
    }

    /// PUT of a local file over plain HTTP in one request (up to 5 GiB),
    /// streamed, with its CRC64NVME (the file is read twice).
    pub async fn put_object_http_file(
        &self,
        bucket: &str,
        key: &str,
        file: &std::path::Path,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut f = tokio::fs::File::open(file).await?;
        let mut crc = Crc64Nvme::new();
        let mut buf = vec![0u8; CHUNK];
        let mut len = 0u64;
        loop {
            let n = f.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            crc.update(&buf[..n]);
            len += n as u64;
        }
        if len > MAX_SINGLE_PUT {
            return Err(Error::InvalidArgument(format!(
                "{} is {len} bytes, more than one PUT takes (5 GiB)",
                file.display()
            )));
        }
        let crc = crc.header_value();
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let path_query = h::path_query(bucket, Some(key), &[]);
        let cfg = &self.inner.cfg;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let producer = async move {
                let mut f = tokio::fs::File::open(file).await?;
                let mut sent = 0u64;
                while sent < len {
                    let mut v = vec![0u8; CHUNK.min((len - sent) as usize)];
                    let n = f.read(&mut v).await?;
                    if n == 0 {
                        let _ = tx
                            .send(Err("the file shrank while it was sent".into()))
                            .await;
                        return Err(Error::InvalidArgument(format!(
                            "{} shrank while it was sent",
                            file.display()
                        )));
                    }
                    v.truncate(n);
                    if tx.send(Ok(Bytes::from(v))).await.is_err() {
                        break;
                    }
                    sent += n as u64;
                }
                Ok(())
            };
            let r = self
                .send_streamed(Method::PUT, &path_query, &hm, rx, len, producer)
                .await;
            let retry = match &r {
                Ok(a) => a.status.is_server_error(),
                Err(e) => e.is_retryable(),
            };
            if retry && attempt < cfg.attempts {
                tokio::time::sleep(backoff(attempt)).await;
                continue;
            }
            let a = r?.ok()?;
            let mut out = Outcome::new(Path::Http, len);
            out.etag = a.header(ETAG.as_str());
            out.checksum_crc64nvme = Some(crc);
            out.status = a.status.as_u16();
            out.attempts = attempt;
            return Ok(out);
        }
    }

    /// PUT of `len` bytes from a stream over plain HTTP in one request (one
    /// attempt: a stream cannot be replayed). `checksum_crc64nvme`, when
    /// known, is sent for the server to check.
    pub async fn put_object_http_stream<S>(
        &self,
        bucket: &str,
        key: &str,
        len: u64,
        stream: S,
        checksum_crc64nvme: Option<String>,
    ) -> Result<Outcome>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        if let Some(c) = &checksum_crc64nvme {
            h::set(&mut hm, headers::CHECKSUM_CRC64NVME, c)?;
        }
        let body = BodyExt::boxed_unsync(StreamBody::new(
            stream.map_ok(Frame::data).map_err(BoxError::from),
        ));
        let target = self
            .inner
            .endpoint
            .target(&h::path_query(bucket, Some(key), &[]))?;
        let req = h::signed(
            &self.inner.signer,
            Method::PUT,
            target,
            hm,
            body,
            len,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let cfg = &self.inner.cfg;
        let resp = h::send(&self.inner.http, req, cfg.timeouts.for_bytes(len)).await?;
        let (parts, mut b) = resp.into_parts();
        let body = h::read_capped(&mut b, SMALL_BODY_CAP, cfg.timeouts.request).await?;
        let a = Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        }
        .ok()?;
        let mut out = Outcome::new(Path::Http, len);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = checksum_crc64nvme;
        out.status = a.status.as_u16();
        Ok(out)
    }

    /// GET over plain HTTP into a writer (a file, stdout, a `Vec<u8>`).
    /// Whole objects are checked against the server's CRC64NVME when it
    /// sends one, after the last byte is written: on
    /// [`Error::ChecksumMismatch`] discard what was written. Retried only
    /// until the first byte is written.
    pub async fn get_object_http<W>(
        &self,
        bucket: &str,
        key: &str,
        sel: Selection,
        writer: &mut W,
    ) -> Result<Outcome>
    where
        W: AsyncWrite + Unpin + ?Sized,
    {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let part;
        let mut query: Vec<(&str, Option<&str>)> = Vec::new();
        match sel {
            Selection::Whole => {}
            Selection::Range { first, last } => {
                if last < first {
                    return Err(Error::InvalidArgument(format!(
                        "range {first}-{last} is empty"
                    )));
                }
                h::set(&mut hm, "range", &format!("bytes={first}-{last}"))?;
            }
            Selection::Part(n) => {
                part = n.to_string();
                query.push(("partNumber", Some(&part)));
            }
        }
        let path_query = h::path_query(bucket, Some(key), &query);
        let cfg = &self.inner.cfg;
        let mut attempt = 0;
        let (a, mut body) = loop {
            attempt += 1;
            match self.open_get(&path_query, &hm).await {
                Err(e) if e.is_retryable() && attempt < cfg.attempts => {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                r => break r?,
            }
        };
        let mut crc = Crc64Nvme::new();
        let mut n = 0u64;
        while let Some(d) = h::next_chunk(&mut body, cfg.timeouts.request).await? {
            writer.write_all(&d).await?;
            crc.update(&d);
            n += d.len() as u64;
        }
        writer.flush().await?;
        let mut out = Outcome::new(Path::Http, n);
        let declared = a.header(headers::CHECKSUM_CRC64NVME);
        if let Some(d) = &declared {
            if sel == Selection::Whole && a.status == StatusCode::OK {
                checksum::verify(d, &crc.header_value(), Path::Http)?;
                out.checksum_verified = checksum::is_full_object(d);
            }
        }
        out.checksum_crc64nvme = declared;
        out.attempts = attempt;
        fill_get(&mut out, &a, sel, n);
        Ok(out)
    }
}

/// The fields of a GET's Outcome from its answer.
fn fill_get(out: &mut Outcome, a: &Answer, sel: Selection, bytes: u64) {
    out.etag = a.header(ETAG.as_str());
    out.status = a.status.as_u16();
    out.content_range = a.header(CONTENT_RANGE.as_str());
    out.object_size = match &out.content_range {
        Some(cr) => h::range_total(cr),
        None if sel == Selection::Whole => Some(bytes),
        None => None,
    };
}

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

    #[test]
    fn rdma_bytes_from_headers() {
        let mut a = Answer {
            status: StatusCode::PARTIAL_CONTENT,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        assert_eq!(rdma_get_bytes(&a), None);
        h::set(&mut a.headers, "content-range", "bytes 10-19/100").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(10));
        h::set(&mut a.headers, "x-amz-rdma-bytes", "7").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(7));
        h::set(&mut a.headers, "x-amz-rdma-bytes-transferred", "5").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(5));
        let mut out = Outcome::new(Path::Rdma, 5);
        fill_get(
            &mut out,
            &a,
            Selection::Range {
                first: 10,
                last: 19,
            },
            5,
        );
        assert_eq!(out.object_size, Some(100));
    }

    /// The futures can be moved across threads (spawned, joined).
    #[allow(dead_code)]
    fn futures_are_send(s: &S3Client, reg: &Registered<'_, 'static>) {
        fn send<T: Send>(_: T) {}
        send(s.get_object("b", "k", reg, 0, None));
        send(s.put_object("b", "k", reg, 0, 1));
        send(s.upload_part("b", "k", "u", 1, reg, 0, 1));
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
        let mut bad = ok;
        bad.endpoint = "ftp://x".into();
        assert!(matches!(S3Client::new(bad), Err(Error::Config(_))));
    }
}
