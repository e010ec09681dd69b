//! [`V2Path`], the hipobj-rc-v2 stage of one transfer, before the
//! handshake flow:
//! whether to try it, its attempts (a busy server is asked again with a
//! new PREPARE; nothing is retried after READY), and what its end means:
//! done, not spoken here (remembered; the handshake flow or plain HTTP
//! next), too large for one PUT (split into parts), or a failure.

use std::sync::Arc;

use bytes::Bytes;
use hipobj::v2::V2Transfer;
use hipobj::{OpError, Registered};
use hipobj_wire::rc_v2::{Final, Target, MAX_TRANSFER};
use http::header::{HeaderMap, CONTENT_LENGTH};
use http::Method;

use super::transfer::Dir;
use super::S3Client;
use crate::rdma::{self, RdmaContext};
use crate::rdma_v2::{self, V2Http};
use crate::{Error, Outcome, Path, RdmaProtocol, Result, Selection, MIN_PART_SIZE};

/// What a v2 transfer moves: the object (or part) and where in it.
#[derive(Debug, Clone)]
pub(super) struct V2Spec {
    pub bucket: String,
    pub key: String,
    /// `partNumber=N`, or `uploadId=U&partNumber=N`.
    pub query: Option<String>,
    /// The first byte in the object.
    pub object_offset: u64,
    /// How many bytes; `None`: the object's (or part's) size, asked by a
    /// HEAD first.
    pub size: Option<u64>,
}

/// How the v2 stage ended.
#[derive(Debug)]
pub(super) enum V2Stage {
    /// Moved: FINAL, the bytes, the attempts, and for a GET the size of
    /// the object (or part) it is from.
    Done(Final, u64, u32, Option<u64>),
    /// v2 is not used for this transfer (not asked for, not spoken by the
    /// server, busy, outside its limits): the reason. The handshake flow
    /// comes next under `auto`, plain HTTP under `v2`.
    Skipped(String),
    /// A PUT over what the server stages at once: its cap.
    TooLarge(u64),
}

/// The hipobj-rc-v2 stage of a client's RDMA transfers: the client and
/// its RDMA context.
pub(super) struct V2Path<'a> {
    pub(super) client: &'a S3Client,
    pub(super) ctx: &'a Arc<RdmaContext>,
}

impl V2Path<'_> {
    /// Whether v2 is tried now; the reason when not.
    fn wanted(&self) -> std::result::Result<(), String> {
        let client = self.client;
        if !client.inner.cfg.rdma_protocol.tries_v2() {
            return Err("rdma_protocol is handshake".into());
        }
        if let Some(left) = rdma_v2::remembered_no_v2(client.endpoint()) {
            return Err(format!(
                "{} was found without hipobj-rc-v2 (remembered for {} s more)",
                client.endpoint(),
                left.as_secs()
            ));
        }
        Ok(())
    }

    /// Under `auto`, the reason to take the handshake flow for a transfer
    /// of `bytes` instead: small enough
    /// ([`auto_handshake_max`](crate::ClientConfig::auto_handshake_max)),
    /// at an endpoint known to serve it.
    fn handshake_preferred(&self, bytes: u64) -> Option<String> {
        let client = self.client;
        let cfg = &client.inner.cfg;
        let small = bytes <= cfg.auto_handshake_max;
        if cfg.rdma_protocol != RdmaProtocol::Auto
            || !small
            || !rdma_v2::serves_handshake(client.endpoint())
        {
            return None;
        }
        Some(format!(
            "{bytes} bytes (auto_handshake_max {}) go by the handshake flow, which {} serves",
            cfg.auto_handshake_max,
            client.endpoint()
        ))
    }

    /// What to do when v2 was skipped: under `v2`, plain HTTP (the
    /// fallback rule); under `auto`, the handshake flow (`Ok(None)`).
    pub(super) fn after(&self, reason: String) -> Result<Option<String>> {
        match self.client.inner.cfg.rdma_protocol {
            RdmaProtocol::V2 => self.client.fallback(reason).map(Some),
            _ => Ok(None),
        }
    }

    /// The size of the object (or part) `spec` names, from a signed HEAD.
    async fn size(&self, spec: &V2Spec) -> Result<std::result::Result<u64, String>> {
        let q: Vec<(&str, Option<&str>)> = match spec.query.as_deref() {
            Some(q) => q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k, Some(v)),
                    None => (kv, None),
                })
                .collect(),
            None => Vec::new(),
        };
        let path = crate::http::path_query(&spec.bucket, Some(&spec.key), &q);
        let a = self
            .client
            .plain(Method::HEAD, &path, &HeaderMap::new(), Bytes::new())
            .await?;
        if !a.status.is_success() {
            // The error is the transfer's to report, in its own terms (a
            // HEAD's answer has no error document).
            return Ok(Err(format!(
                "the object's HEAD answered HTTP {}",
                a.status.as_u16()
            )));
        }
        Ok(a.header(CONTENT_LENGTH.as_str())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| "the object's HEAD has no Content-Length".to_string()))
    }

    /// The v2 stage of a transfer of `len` bytes of `reg` at `buf_off`
    /// (for a GET: the room there; the object's bytes must fit).
    pub(super) async fn stage(
        &self,
        reg: &Registered<'_, 'static>,
        dir: Dir,
        buf_off: usize,
        len: usize,
        spec: V2Spec,
    ) -> Result<V2Stage> {
        if let Err(reason) = self.wanted() {
            return Ok(V2Stage::Skipped(reason));
        }
        // A GET of the whole object names no size: its room bounds it.
        if let Some(reason) = self.handshake_preferred(spec.size.unwrap_or(len as u64)) {
            return Ok(V2Stage::Skipped(reason));
        }
        let (client, ctx) = (self.client, self.ctx);
        // A handle of this future's own, as the handshake flow takes: were
        // the future forgotten mid-transfer, the registration would leak
        // rather than be freed under it.
        let reg = &reg.handle();
        let (size, total) = match (dir, spec.size) {
            (Dir::Put, Some(s)) => (s, None),
            // A GET learns the object's (or part's) size first: v2 moves
            // exactly the bytes PREPARE names, where S3 clamps a range at
            // the object's end.
            (_, want) => match self.size(&spec).await? {
                Ok(total) => {
                    let rest = total.saturating_sub(spec.object_offset);
                    (want.map_or(rest, |w| w.min(rest)), Some(total))
                }
                Err(reason) => return Ok(V2Stage::Skipped(reason)),
            },
        };
        if size == 0 || size > len as u64 {
            // Empty, or larger than the room: the handshake flow (or HTTP)
            // says so in its own terms.
            return Ok(V2Stage::Skipped(format!(
                "{size} bytes do not make a hipobj-rc-v2 transfer into {len} bytes"
            )));
        }
        if spec.object_offset.saturating_add(size) > MAX_TRANSFER {
            return Ok(V2Stage::Skipped(format!(
                "bytes {}..{} of the object lie beyond hipobj-rc-v2's 2^31 - 1",
                spec.object_offset,
                spec.object_offset.saturating_add(size)
            )));
        }
        if let (Dir::Put, Some(cap)) = (dir, rdma_v2::put_cap(client.endpoint())) {
            if size > cap {
                return Ok(V2Stage::TooLarge(cap));
            }
        }
        let cfg = &client.inner.cfg;
        let t = V2Transfer {
            target: Target {
                bucket: spec.bucket.clone(),
                key: spec.key.clone(),
                query: spec.query.clone(),
            },
            object_offset: spec.object_offset,
            buffer_offset: buf_off as u64,
            size,
        };
        let request_limit = cfg.timeouts.request;
        let ready_limit = cfg.timeouts.for_bytes(size);
        let attempts = cfg.attempts.max(1);
        let mut last_busy = String::new();
        // With several endpoints, a transfer broken off by its gateway
        // (no answer to a control request, READY's included, or the RDMA
        // itself failing) starts over at the next one: a session lives on
        // one gateway, and the client's QP of the session is gone when the
        // attempt returns, so nothing of the old one reaches the buffer.
        let several = client.inner.endpoints.all().len() > 1;
        for attempt in 1..=attempts {
            let (c, t2) = (ctx.clone(), t.clone());
            let (ei, ep) = client.endpoint_now();
            let ep = ep.clone();
            let endpoint = ep.base.clone();
            let (res, ops) = rdma::run_blocking(ctx, reg.handle(), move |reg| {
                let mut ops = V2Http::new(c, ep, request_limit, ready_limit);
                let r = match dir {
                    Dir::Get => reg.get_v2(&t2, &mut ops),
                    Dir::Put => reg.put_v2(&t2, &mut ops),
                };
                (r, ops)
            })
            .await?;
            let e = match res {
                Ok(f) => {
                    if f.handshake {
                        rdma_v2::remember_handshake(&endpoint);
                    }
                    return Ok(V2Stage::Done(f, size, attempt, total));
                }
                Err(e) => e,
            };
            if let Some(f) = ops.failure {
                // No answer to a control request: before READY a new
                // transfer may go; after it, nothing is retried, unless
                // another endpoint takes it.
                let moved_on = several && crate::endpoints::fails_over(&f);
                if moved_on {
                    client.inner.endpoints.failed(ei, &f);
                }
                if (!ops.ready_sent || moved_on) && f.is_retryable() && attempt < attempts {
                    tokio::time::sleep(client.retry().delay(attempt)).await;
                    continue;
                }
                return Err(f);
            }
            if several && e.op == OpError::RdmaError && attempt < attempts {
                // The RDMA of the session failed (its gateway gone).
                client.inner.endpoints.failed(ei, &e);
                tokio::time::sleep(client.retry().delay(attempt)).await;
                continue;
            }
            let Some(p) = &ops.prepare else {
                return Err(Error::Library(e));
            };
            if !ops.ready_sent && (p.status.as_u16() != 200 || !rdma_v2::echoes(p)) {
                // PREPARE refused, or answered by a server that does not
                // know it.
                let status = p.status.as_u16();
                // An authentication failure is the same for any request:
                // it is the answer, whatever the server speaks.
                let code = p.error(None).code().map(str::to_string);
                if matches!(
                    code.as_deref(),
                    Some(
                        "SignatureDoesNotMatch"
                            | "InvalidAccessKeyId"
                            | "RequestTimeTooSkewed"
                            | "ExpiredToken"
                    )
                ) {
                    return Err(p.error(None));
                }
                if e.op == OpError::NotSupported || !rdma_v2::echoes(p) {
                    rdma_v2::remember_no_v2(&endpoint, cfg.no_rdma_ttl);
                    return Ok(V2Stage::Skipped(format!(
                        "the server answered hipobj-rc-v2's PREPARE with HTTP {status}{}: it does not speak v2",
                        if e.op == OpError::NotSupported {
                            " and x-amz-rdma-protocol-status: unsupported"
                        } else {
                            " without the protocol echo"
                        }
                    )));
                }
                if e.op == OpError::SizeTooLarge {
                    let cap = p
                        .header(hipobj::v2::H_MAX_SIZE)
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    return match (dir, cap) {
                        (Dir::Put, Some(cap)) if cap >= MIN_PART_SIZE as u64 => {
                            rdma_v2::remember_put_cap(&endpoint, cap);
                            Ok(V2Stage::TooLarge(cap))
                        }
                        _ => Ok(V2Stage::Skipped(format!(
                            "the server refused a {size}-byte hipobj-rc-v2 transfer as too large (413{})",
                            cap.map(|c| format!(", x-amz-rdma-max-size {c}"))
                                .unwrap_or_default()
                        ))),
                    };
                }
                if e.op == OpError::Busy {
                    last_busy = format!("HTTP {status}: {}", e.message);
                    if attempt < attempts {
                        tokio::time::sleep(client.retry().delay(attempt)).await;
                        continue;
                    }
                    break;
                }
                return Err(p.error(None));
            }
            if let Some(r) = &ops.ready {
                let status = r.status.as_u16();
                if status != 200 && status != 204 {
                    if e.op == OpError::Busy && attempt < attempts {
                        // A 409 at READY: the session is gone; a new
                        // PREPARE may go (nothing moved).
                        last_busy = format!("HTTP {status}: {}", e.message);
                        tokio::time::sleep(client.retry().delay(attempt)).await;
                        continue;
                    }
                    if !r.body.is_empty() && status < 500 {
                        return Err(r.error(None));
                    }
                }
            }
            return Err(Error::Library(e));
        }
        Ok(V2Stage::Skipped(format!(
            "the server stayed busy for hipobj-rc-v2 ({attempts} attempts; {last_busy})"
        )))
    }

    /// The outcome of a v2 GET.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn get_outcome(
        &self,
        f: &Final,
        bytes: u64,
        attempts: u32,
        total: Option<u64>,
        sel: Selection,
        first: u64,
        reg: &Registered<'_, '_>,
    ) -> Outcome {
        let whole = sel == Selection::Whole;
        let mut out = Outcome::new(Path::Rdma, bytes);
        out.rdma_protocol = Some(crate::PROTOCOL_V2);
        out.etag = f.etag.clone();
        out.status = if whole { 200 } else { 206 };
        out.attempts = attempts;
        // FINAL's checksum is of the bytes moved: the object's own only
        // when they are the whole object.
        if let (Some(c), true) = (f.checksum, whole) {
            out.checksum_crc64nvme = Some(hipobj_wire::checksum::crc64nvme_value(c));
            // The library compared it with the buffer's bytes, unless the
            // CPU cannot read them (GPU memory registered directly).
            out.checksum_verified = self
                .client
                .inner
                .cfg
                .rdma_memory
                .as_ref()
                .is_some_and(|lib| {
                    lib.instance().buffers.find(reg.addr()).is_ok_and(|e| {
                        !matches!(e.kind, hipobj::buffer::Registration::GpuDirect { .. })
                    })
                });
        }
        match sel {
            Selection::Whole => out.object_size = Some(bytes),
            Selection::Range { .. } => {
                out.object_size = total;
                out.content_range = Some(format!(
                    "bytes {first}-{}/{}",
                    first + bytes - 1,
                    total.map_or("*".to_string(), |t| t.to_string())
                ));
            }
            // A part's total is the object's, which its HEAD did not say.
            Selection::Part(_) => {}
        }
        out
    }
}
