//! [`RdmaPath`], the RDMA path of a client's transfers (and [`Plan`], the
//! choice between it and plain HTTP): a GET or PUT by hipobj-rc-v2 first
//! ([`V2Path`](super::v2_path::V2Path)), then by the handshake flow, whose
//! attempts run stepwise on the caller's task for small transfers and on a
//! blocking thread of the RDMA runtime for the rest; what each answer
//! means (done, no RDMA, declined, busy, failed), and the checks of the
//! bytes an RDMA GET wrote.

use std::sync::Arc;

use bytes::Bytes;
use hipobj::{Direction, Registered};
use hipobj_wire::headers;
use http::header::{HeaderMap, HeaderValue, ETAG, RANGE};
use http::Method;

use super::transfer::{crc_of, fill_get, rdma_get_bytes, Dir};
use super::v2_path::{V2Path, V2Spec, V2Stage};
use super::S3Client;
use crate::checksum;
use crate::http::Answer;
use crate::rdma::{self, Attempt, Ops, RdmaContext, RdmaRequest};
use crate::retry::Verdict;
use crate::{Error, Outcome, Path, Result, Selection};

/// Either RDMA or HTTP (with the reason).
pub(super) enum Plan<'a> {
    Rdma(RdmaPath<'a>),
    Http(String),
}

impl<'a> Plan<'a> {
    /// RDMA, or HTTP and why, for the next transfer of `client`.
    pub(super) fn of(client: &'a S3Client) -> Plan<'a> {
        let Some(ctx) = &client.inner.rdma else {
            return Plan::Http("no client library is configured (rdma_memory is None)".into());
        };
        if let Some(left) = rdma::remembered_no_rdma(client.endpoint()) {
            return Plan::Http(format!(
                "{} was found without RDMA (remembered for {} s more)",
                client.endpoint(),
                left.as_secs()
            ));
        }
        Plan::Rdma(RdmaPath {
            client,
            ctx: ctx.clone(),
        })
    }
}

/// The RDMA path of a client's transfers: the client (its endpoints,
/// configuration and retry policy) and its RDMA context.
pub(super) struct RdmaPath<'a> {
    client: &'a S3Client,
    ctx: Arc<RdmaContext>,
}

/// A transfer RDMA completed: the answer, the attempts made and (GET with
/// `verify`) the CRC of the bytes received.
#[derive(Debug)]
struct Moved {
    pub answer: Answer,
    pub attempts: u32,
    pub crc: Option<String>,
}

/// How the RDMA path ended: the answer and (GET with `verify`) the CRC of
/// the bytes received, or why to fall back to HTTP.
type Ended = std::result::Result<(Answer, Option<String>), String>;

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

/// An InvalidRDMABufferSize answer is a buffer too small for the object.
fn buffer_error(e: Error, len: usize) -> Error {
    if e.code() == Some("InvalidRDMABufferSize") {
        return Error::BufferTooSmall {
            needed: None,
            available: len as u64,
        };
    }
    e
}

/// What the retry policy makes of one attempt's end at the endpoint
/// `ei`; remembers an endpoint without RDMA, and moves on from one that
/// failed (the next attempt goes to the next endpoint).
fn verdict(
    client: &S3Client,
    ei: usize,
    result: Attempt,
    crc: Option<String>,
    attempt: u32,
    len: usize,
) -> Verdict<Result<Ended>> {
    if let Attempt::Failed(e) = &result {
        if crate::endpoints::fails_over(e) {
            client.inner.endpoints.failed(ei, e);
        }
    }
    match result {
        Attempt::Done(a) => Verdict::Done(Ok(Ok((a, crc)))),
        Attempt::NoRdma(reason) => {
            let endpoint = &client.inner.endpoints.all()[ei].base;
            rdma::remember_no_rdma(endpoint, client.inner.cfg.no_rdma_ttl);
            crate::rdma_v2::forget_handshake(endpoint);
            Verdict::Done(Ok(Err(reason)))
        }
        Attempt::Declined(reason) => Verdict::Done(Ok(Err(reason))),
        // No pair free: they are held by other clients' connections and do
        // not free up within a backoff. This request goes over HTTP; the
        // next one tries RDMA again.
        Attempt::Busy {
            handshake: true,
            reason,
        } => Verdict::Done(Ok(Err(reason))),
        // No staging buffer free: they free up as transfers end.
        Attempt::Busy { reason, .. } => Verdict::Again {
            result: Ok(Err(format!("{reason} ({attempt} attempts)"))),
            why: format!("refused for capacity: {reason}"),
        },
        Attempt::Failed(e) if e.is_retryable() => {
            let why = e.to_string();
            Verdict::Again {
                result: Err(buffer_error(e, len)),
                why,
            }
        }
        Attempt::Failed(e) | Attempt::HandshakeFailed(e) => {
            Verdict::Done(Err(buffer_error(e, len)))
        }
    }
}

impl RdmaPath<'_> {
    /// The hipobj-rc-v2 stage of this path's transfers.
    fn v2(&self) -> V2Path<'_> {
        V2Path {
            client: self.client,
            ctx: &self.ctx,
        }
    }

    /// A GET of `want` bytes of the [`Selection`] into `reg` at
    /// `buf_offset` (`path_query` and `hm` the GET's), by hipobj-rc-v2 then
    /// the handshake flow: the outcome, or the reason to fall back to HTTP
    /// (allowed by the fallback rule).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn get(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        want: usize,
        sel: Selection,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<std::result::Result<Outcome, String>> {
        let client = self.client;
        let cfg = &client.inner.cfg;
        let (object_offset, size, query) = match sel {
            Selection::Whole => (0, None, None),
            Selection::Range { first, .. } => (first, Some(want as u64), None),
            Selection::Part(n) => (0, None, Some(format!("partNumber={n}"))),
        };
        let spec = V2Spec {
            bucket: bucket.to_string(),
            key: key.to_string(),
            query,
            object_offset,
            size,
        };
        let v2 = self.v2();
        match v2.stage(reg, Dir::Get, buf_offset, want, spec).await? {
            V2Stage::Done(f, bytes, attempts, total) => {
                return Ok(Ok(v2.get_outcome(
                    &f,
                    bytes,
                    attempts,
                    total,
                    sel,
                    object_offset,
                    reg,
                )));
            }
            V2Stage::Skipped(reason) => {
                if let Some(reason) = v2.after(reason)? {
                    return Ok(Err(reason));
                }
            }
            V2Stage::TooLarge(cap) => {
                let reason = format!("over the server's hipobj-rc-v2 cap of {cap} bytes");
                if let Some(reason) = v2.after(reason)? {
                    return Ok(Err(reason));
                }
            }
        }
        let req = RdmaRequest {
            method: Method::GET,
            path_query: path_query.to_string(),
            headers: hm.clone(),
            limit: cfg.timeouts.for_bytes(want as u64),
            handshake_limit: cfg.timeouts.request,
        };
        let verify = sel == Selection::Whole;
        match self
            .transfer(reg, Dir::Get, buf_offset, want, req, verify)
            .await?
        {
            Ok(Moved {
                answer: a,
                attempts,
                crc: actual,
            }) => {
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
                out.rdma_protocol = Some(crate::PROTOCOL_HANDSHAKE);
                if let (Some(d), Some(actual)) = (&declared, &actual) {
                    checksum::verify(d, actual, Path::Rdma)?;
                    out.checksum_verified = true;
                }
                out.checksum_crc64nvme = declared;
                out.attempts = attempts;
                fill_get(&mut out, &a, sel, bytes);
                Ok(Ok(out))
            }
            Err(reason) => client.fallback(reason).map(Err),
        }
    }

    /// One PutObject or UploadPart of `len` bytes of `reg` at `offset`
    /// (`v2` and `whole` as [`S3Client::put_one`] takes them), by
    /// hipobj-rc-v2 then the handshake flow: the outcome, or the reason to
    /// fall back to HTTP (allowed by the fallback rule) and the CRC64NVME
    /// of the bytes.
    pub(super) async fn put(
        &self,
        path_query: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
        v2: V2Spec,
        whole: bool,
    ) -> Result<std::result::Result<Outcome, (String, String)>> {
        let client = self.client;
        let cfg = &client.inner.cfg;
        let (bucket, key) = (v2.bucket.clone(), v2.key.clone());
        let (spec, v2) = (v2, self.v2());
        let v2_reason = match v2.stage(reg, Dir::Put, offset, len, spec).await? {
            V2Stage::Done(f, bytes, attempts, _) => {
                let mut out = Outcome::new(Path::Rdma, bytes);
                out.rdma_protocol = Some(crate::PROTOCOL_V2);
                out.etag = f.etag;
                out.checksum_crc64nvme = f.checksum.map(hipobj_wire::checksum::crc64nvme_value);
                out.status = 200;
                out.attempts = attempts;
                return Ok(Ok(out));
            }
            V2Stage::TooLarge(cap) if whole => {
                tracing::info!(
                    endpoint = client.endpoint(),
                    cap,
                    "hipobj-rc-v2 PUT over the server's cap: a multipart upload"
                );
                return Box::pin(client.put_multipart(&bucket, &key, reg, offset, len))
                    .await
                    .map(Ok);
            }
            V2Stage::TooLarge(cap) => v2.after(format!(
                "the part is over the server's hipobj-rc-v2 cap of {cap} bytes"
            ))?,
            V2Stage::Skipped(reason) => v2.after(reason)?,
        };
        // A small buffer's checksum costs less than a thread hop.
        let crc = if len <= rdma::STEPWISE_MAX {
            crc_of(reg, offset, len)?
        } else {
            rdma::run_blocking(&self.ctx, reg.handle(), move |r| crc_of(r, offset, len)).await??
        };
        if let Some(reason) = v2_reason {
            return Ok(Err((reason, crc)));
        }
        let mut hm = HeaderMap::new();
        crate::http::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let req = RdmaRequest {
            method: Method::PUT,
            path_query: path_query.to_string(),
            headers: hm,
            limit: cfg.timeouts.for_bytes(len as u64),
            handshake_limit: cfg.timeouts.request,
        };
        match self
            .transfer(reg, Dir::Put, offset, len, req, false)
            .await?
        {
            Ok(Moved {
                answer: a,
                attempts,
                ..
            }) => {
                let mut out = Outcome::new(Path::Rdma, len as u64);
                out.rdma_protocol = Some(crate::PROTOCOL_HANDSHAKE);
                out.etag = a.header(ETAG.as_str());
                out.checksum_crc64nvme = Some(crc);
                out.status = a.status.as_u16();
                out.attempts = attempts;
                Ok(Ok(out))
            }
            Err(reason) => Ok(Err((client.fallback(reason)?, crc))),
        }
    }

    /// RDMA attempts of one transfer, as the retry policy allows: what
    /// moved, or why to fall back.
    async fn transfer(
        &self,
        reg: &Registered<'_, 'static>,
        dir: Dir,
        buf_off: usize,
        len: usize,
        req: RdmaRequest,
        verify: bool,
    ) -> Result<std::result::Result<Moved, String>> {
        let path_query = &req.path_query.clone();
        let req = Arc::new(req);
        // A handle of this future's own: were the future forgotten while
        // the server still reads or writes the buffer, the registration and
        // its memory would stay alive (leaked) rather than be freed under
        // the transfer; a blocking thread gets a handle of its own too.
        let reg = &reg.handle();
        let (ctx, client) = (&self.ctx, self.client);
        let (r, attempts) = client
            .retry()
            .run("RDMA transfer", |attempt| {
                let (c, r) = (ctx.clone(), req.clone());
                // Each attempt goes to the endpoint requests go to now (a
                // pair made with another gateway is answered 421 there, and
                // the library connects again).
                let (ei, ep) = client.endpoint_now();
                let ep = ep.clone();
                async move {
                    let quick = if len <= rdma::STEPWISE_MAX {
                        let d = match dir {
                            Dir::Get => Direction::Get,
                            Dir::Put => Direction::Put,
                        };
                        rdma::stepwise(ctx, &r, &ep, reg, d, buf_off as u64, len).await
                    } else {
                        None
                    };
                    let (result, crc) = if let Some(a) = quick {
                        let mut crc = None;
                        if let (Attempt::Done(ans), true) = (&a, verify) {
                            crc = verify_crc(ans, reg, buf_off, len);
                        }
                        (a, crc)
                    } else {
                        let ran = rdma::run_blocking(ctx, reg.handle(), move |reg| {
                            let mut ops = Ops::new(c, r, ep);
                            let res = match dir {
                                Dir::Get => reg.get(buf_off as u64, len, &mut ops),
                                Dir::Put => reg.put(buf_off as u64, len, &mut ops),
                            };
                            let a = rdma::classify(res, ops);
                            let mut crc = None;
                            if let (Attempt::Done(ans), true) = (&a, verify) {
                                crc = verify_crc(ans, reg, buf_off, len);
                            }
                            (a, crc)
                        })
                        .await;
                        match ran {
                            Ok(v) => v,
                            Err(e) => return Verdict::Done(Err(e)),
                        }
                    };
                    let result = match result {
                        Attempt::HandshakeFailed(e) => {
                            Attempt::Failed(self.explain_handshake(path_query, e).await)
                        }
                        other => other,
                    };
                    match crc.transpose() {
                        Ok(crc) => verdict(client, ei, result, crc, attempt, len),
                        Err(e) => Verdict::Done(Err(e)),
                    }
                }
            })
            .await;
        Ok(r?.map(|(answer, crc)| Moved {
            answer,
            attempts,
            crc,
        }))
    }

    /// The S3 error of a handshake whose answer (to a HEAD) had no error
    /// document: the same object asked by a plain signed GET of its first
    /// byte, whose error answer has one. Its code, message and request id
    /// are taken when it fails with the same status (an authentication
    /// failure fails the same way for any method); otherwise, or for a 5xx
    /// (retried anyway), the error stays as it was.
    async fn explain_handshake(&self, path_query: &str, e: Error) -> Error {
        let Error::S3 { status, reply, .. } = &e else {
            return e;
        };
        if !(400..500).contains(status) {
            return e;
        }
        let (status, reply) = (*status, reply.clone());
        let path = path_query.split('?').next().unwrap_or(path_query);
        let mut hm = HeaderMap::new();
        hm.insert(RANGE, HeaderValue::from_static("bytes=0-0"));
        let probe = match self
            .client
            .plain(Method::GET, path, &hm, Bytes::new())
            .await
        {
            Ok(a) if a.status.as_u16() == status => a.error(None),
            Ok(_) | Err(_) => return e,
        };
        if probe.code_from_status() {
            return e;
        }
        match probe {
            Error::S3 {
                code,
                message,
                request_id,
                ..
            } => Error::S3 {
                status,
                code,
                message,
                request_id,
                reply,
            },
            _ => e,
        }
    }
}
