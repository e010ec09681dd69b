//! The RDMA path of one transfer: its attempts (stepwise on the caller's
//! task for small ones, on a blocking thread of the RDMA runtime for the
//! rest), what each answer means (done, no RDMA, declined, busy, failed),
//! and the checks of the bytes an RDMA GET wrote.

use std::sync::Arc;

use bytes::Bytes;
use hipobj::{Direction, Registered};
use hipobj_wire::headers;
use http::header::{HeaderMap, HeaderValue, CONTENT_RANGE, RANGE};
use http::Method;

use super::S3Client;
use crate::checksum::{self, Crc64Nvme};
use crate::http::Answer;
use crate::rdma::{self, Attempt, Ops, RdmaContext, RdmaRequest};
use crate::retry::Verdict;
use crate::{Error, Result};

/// What a transfer moves.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dir {
    Get,
    Put,
}

/// A transfer RDMA completed: the answer, the attempts made and (GET with
/// `verify`) the CRC of the bytes received.
#[derive(Debug)]
pub(super) struct Moved {
    pub answer: Answer,
    pub attempts: u32,
    pub crc: Option<String>,
}

/// How the RDMA path ended: the answer and (GET with `verify`) the CRC of
/// the bytes received, or why to fall back to HTTP.
type Ended = std::result::Result<(Answer, Option<String>), String>;

/// The bytes an RDMA GET moved, from its answer.
pub(super) fn rdma_get_bytes(a: &Answer) -> Option<u64> {
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

/// The CRC of `len` bytes of `reg` at `off`, read in place.
pub(super) fn crc_of(reg: &Registered<'_, '_>, off: usize, len: usize) -> Result<String> {
    let mut d = Crc64Nvme::new();
    reg.with_bytes(off, len, |b| d.update(b))?;
    Ok(d.header_value())
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

impl S3Client {
    /// RDMA attempts of one transfer, as the retry policy allows: what
    /// moved, or why to fall back.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn rdma_transfer(
        &self,
        ctx: &Arc<RdmaContext>,
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
        let (r, attempts) = self
            .retry()
            .run("RDMA transfer", |attempt| {
                let (c, r) = (ctx.clone(), req.clone());
                // Each attempt goes to the endpoint requests go to now (a
                // pair made with another gateway is answered 421 there, and
                // the library connects again).
                let (ei, ep) = self.endpoint_now();
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
                        Ok(crc) => verdict(self, ei, result, crc, attempt, len),
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
        let probe = match self.plain(Method::GET, path, &hm, Bytes::new()).await {
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
