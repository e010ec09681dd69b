//! READY: the data phase of a prepared session, then its outcome (FINAL).
//! The data phase runs in a task of its own (a dropped HTTP connection
//! does not cut it short half-way) under the execute timer; the session
//! leaves the table when it ends, whatever the outcome.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};

use hipobj_fabric::rc::{self, RcParams};
use hipobj_fabric::{WcOpcode, WcStatus};
use hipobj_wire::rc_v2::{Final, Op, Ready, Staging};

use super::answer::{self, V2Error};
use super::prepare::RECV_ID;
use super::sessions::{self, Session};
use crate::body::{Body, BoxError};
use crate::rdma::mover::{Initiator, RemoteBuffer};
use crate::rdma::transfer::{Transfer, V2Get};
use crate::rdma::RdmaEngine;
use crate::tenancy::Policy;
use crate::upstream::{Payload, Upstream};

/// The piece of a PUT's region sent to the store at a time.
const BODY_PIECE: usize = 1 << 20;

type Outcome = Result<Final, Response<Body>>;

impl RdmaEngine {
    pub(in crate::rdma) async fn rc_v2_ready(
        self: &Arc<Self>,
        parts: Parts,
        key: &str,
        policy: &Policy,
        upstream: &Arc<dyn Upstream>,
        request_id: &str,
    ) -> Response<Body> {
        let r = match Ready::read(&super::HeaderView(&parts.headers)) {
            Ok(r) => r,
            Err(e) => return V2Error::from(e).into_response(request_id, false),
        };
        let Some(session) = self
            .v2
            .sessions
            .get(&r.session, key)
            .filter(|s| s.cookie == r.cookie)
        else {
            tracing::info!(session = %sessions::short(&r.session), "hipobj-rc-v2 READY: no such session");
            return V2Error::no_session().into_response(request_id, false);
        };
        // From here on a session exists: answers name the capabilities.
        let refuse = |e: V2Error| e.into_response(request_id, true);
        if r.qpn != session.client.qp_num {
            return refuse(V2Error::invalid(format!(
                "x-amz-rdma-qpn {:#x} is not the QP the PREPARE's token named",
                r.qpn
            )));
        }
        let part = match session.target.part(session.op) {
            Ok(p) => p,
            Err(e) => return refuse(V2Error::invalid(e.to_string())),
        };
        // Authorized again: the tenant's policy may have changed since.
        let object = match super::authorize(policy, session.op, &session.target, &part) {
            Ok(o) => o,
            Err(e) => return refuse(e),
        };
        let buffer = match (session.op, r.buffer) {
            (Op::Get, None) => return refuse(V2Error::invalid(
                "a GET's READY names the client's buffer (x-amz-rdma-mr-addr, x-amz-rdma-mr-rkey)",
            )),
            (_, b) => b,
        };
        let Ok(slot) = self.v2.ready_slots.clone().try_acquire_owned() else {
            return refuse(V2Error::busy());
        };
        let until = Instant::now() + self.v2.cfg.exec_timeout;
        if !session.begin(until) {
            return refuse(V2Error::conflict());
        }
        let (engine, upstream, rid) = (self.clone(), upstream.clone(), request_id.to_string());
        let limit = self.v2.cfg.exec_timeout;
        let task = async move {
            let start = Instant::now();
            let rail = &engine.rails[session.rail];
            let phase = engine.data_phase(&session, object, buffer, &upstream, &rid);
            let outcome = match tokio::time::timeout(limit, phase).await {
                Ok(o) => o,
                Err(_) => {
                    session.stop();
                    Err(
                        V2Error::transfer(format!("the transfer ran past its {limit:?} deadline"))
                            .into_response(&rid, true),
                    )
                }
            };
            let op_name = match session.op {
                Op::Get => "GetObject",
                Op::Put => "PutObject",
            };
            crate::metrics::rdma_transfer(&rail.name, op_name, start.elapsed(), outcome.is_ok());
            engine.v2.sessions.remove(&session);
            session.stop();
            drop(slot);
            match outcome {
                Ok(f) => {
                    tracing::debug!(session = %sessions::short(&session.id), bytes = f.bytes, "hipobj-rc-v2 transfer done");
                    answer::ok(StatusCode::OK, f.headers(), &rid, true)
                }
                Err(r) => {
                    tracing::warn!(session = %sessions::short(&session.id), status = r.status().as_u16(), "hipobj-rc-v2 transfer failed");
                    r
                }
            }
        };
        match tokio::spawn(task).await {
            Ok(r) => r,
            Err(e) => V2Error::internal(format!("the transfer task failed: {e}"))
                .into_response(request_id, true),
        }
    }

    async fn data_phase(
        &self,
        session: &Arc<Session>,
        object: Parts,
        buffer: Option<Staging>,
        upstream: &Arc<dyn Upstream>,
        request_id: &str,
    ) -> Outcome {
        let rail = &self.rails[session.rail];
        let params = RcParams {
            sq_psn: session.server_psn.0,
            ..rail.params
        };
        rc::to_rts(&session.pair.qp, &params).map_err(|e| {
            V2Error::transfer(format!("connecting the session's QP failed: {e}"))
                .into_response(request_id, true)
        })?;
        match (session.op, buffer) {
            (Op::Get, Some(b)) => self.get(session, object, b, upstream, request_id).await,
            (Op::Get, None) => Err(V2Error::invalid("no buffer").into_response(request_id, true)),
            (Op::Put, _) => put(session, object, upstream, request_id).await,
        }
    }

    async fn get(
        &self,
        session: &Arc<Session>,
        mut object: Parts,
        buffer: Staging,
        upstream: &Arc<dyn Upstream>,
        request_id: &str,
    ) -> Outcome {
        let rail = &self.rails[session.rail];
        let span = session.span;
        if object.uri.query().is_none() {
            let last = span.offset + span.size - 1;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes={}-{last}", span.offset)) {
                object.headers.insert(http::header::RANGE, v);
            }
        }
        let share = rail.pool.share(&session.owner);
        let ctx = Transfer {
            pool: &rail.pool,
            device: &rail.name,
            depth: self.depth(),
            progress_timeout: self.progress_timeout(),
            map_files: self.cfg.map_store_files,
            mapped: &rail.mapped,
            pool_timeout: self.pool_timeout(),
            share: &share,
            upstream,
            request_id,
            v2: Some(V2Get {
                size: span.size,
                imm: session.cookie.0,
            }),
        };
        let remote = RemoteBuffer {
            addr: buffer.addr,
            len: span.size,
            rkey: buffer.rkey,
        };
        let initiator = Initiator::Rc(session.pair.clone());
        match crate::rdma::get::run(&ctx, object, initiator, remote).await {
            Ok(r) => {
                let h = r.headers();
                let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
                Ok(Final {
                    bytes: span.size,
                    cookie: session.cookie,
                    etag: text("etag").map(str::to_string),
                    version_id: text("x-amz-version-id").map(str::to_string),
                    checksum: text(hipobj_wire::rc_v2::H_CHECKSUM)
                        .and_then(|c| hipobj_wire::rc_v2::fields::parse_checksum(c).ok()),
                    parts: true,
                    handshake: true,
                })
            }
            Err(r) => Err(translate(r, request_id)),
        }
    }
}

/// A v1 transfer's failure as a v2 answer: the store's own errors pass
/// through; a failed data phase (500) is v2's 502.
fn translate(mut r: Response<Body>, request_id: &str) -> Response<Body> {
    if r.status() == StatusCode::INTERNAL_SERVER_ERROR {
        return V2Error::transfer("the RDMA data phase failed").into_response(request_id, true);
    }
    r.headers_mut().remove(hipobj_wire::headers::RDMA_REPLY);
    answer::decorate(r, true)
}

/// `len` bytes at `at` of a PUT session's region, as a body piece. The
/// region is only read once the client's write has completed and the
/// session's QP is in ERR; it lives as long as the session, which the
/// piece holds.
struct RegionPiece {
    session: Arc<Session>,
    at: usize,
    len: usize,
}

impl AsRef<[u8]> for RegionPiece {
    fn as_ref(&self) -> &[u8] {
        // In bounds by construction (the stream cuts the region's length);
        // an empty piece were it not.
        self.session
            .region
            .as_ref()
            .and_then(|r| r.buf.buf().slice(self.at, self.len).ok())
            .unwrap_or_default()
    }
}

/// A PUT: the client's WRITE_WITH_IMM (perhaps already there), checked,
/// then the region to the store.
async fn put(
    session: &Arc<Session>,
    object: Parts,
    upstream: &Arc<dyn Upstream>,
    request_id: &str,
) -> Outcome {
    let fail = |e: V2Error| e.into_response(request_id, true);
    let size = session.span.size;
    // The execute timer bounds this wait (the caller's timeout).
    let wc = loop {
        match session
            .pair
            .cq
            .next(std::time::Duration::from_secs(3600))
            .await
        {
            Ok(Some(wc)) if wc.wr_id == RECV_ID => break wc,
            Ok(Some(_)) => continue,
            Ok(None) => return Err(fail(V2Error::transfer("the client's write never came"))),
            Err(e) => {
                return Err(fail(V2Error::transfer(format!(
                    "polling the CQ failed: {e}"
                ))))
            }
        }
    };
    // Nothing more may land in the region while it is read.
    session.stop();
    if wc.status != WcStatus::Success {
        return Err(fail(V2Error::transfer(format!(
            "the client's write completed with {}",
            wc.status
        ))));
    }
    if wc.opcode != WcOpcode::RecvRdmaWithImm || wc.imm_data != Some(session.cookie.0) {
        return Err(fail(V2Error::invalid(
            "the client's write is not a WRITE_WITH_IMM carrying the session's cookie",
        )));
    }
    if u64::from(wc.byte_len) != size {
        return Err(fail(V2Error::invalid(format!(
            "the client wrote {} bytes, not the {size} prepared",
            wc.byte_len
        ))));
    }
    let Some(region) = session.region.as_ref() else {
        return Err(fail(V2Error::internal("a PUT session without a region")));
    };
    let len = region.buf.buf().len();
    // The CRC of the bytes, off the event loop, read in place: the write
    // that filled the region has completed and the QP that alone may write
    // it is in ERR (`stop` above), so nothing legitimate changes it now.
    let s = session.clone();
    let crc = tokio::task::spawn_blocking(move || {
        let region = s.region.as_ref()?;
        let bytes = region.buf.buf().slice(0, len).ok()?;
        let mut d = crc64fast_nvme::Digest::new();
        d.write(bytes);
        Some(d.sum64())
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| fail(V2Error::internal("reading the staging region failed")))?;
    // The store gets the region a piece at a time, each piece a view of
    // the region itself (no copy), which holds the session, and so the
    // region, until the store is done with it.
    let s = session.clone();
    let body = Body::from_stream(futures::stream::unfold(0usize, move |at| {
        let s = s.clone();
        async move {
            let len = s.region.as_ref()?.buf.buf().len();
            if at >= len {
                return None;
            }
            let n = (len - at).min(BODY_PIECE);
            let piece: Result<Bytes, BoxError> = Ok(Bytes::from_owner(RegionPiece {
                session: s,
                at,
                len: n,
            }));
            Some((piece, at + n))
        }
    }));
    let op = if object.uri.query().is_some() {
        "UploadPart"
    } else {
        "PutObject"
    };
    let mut req = http::Request::builder()
        .method(http::Method::PUT)
        .uri(object.uri.clone());
    if let Some(x) = req.extensions_mut() {
        crate::tenancy::StoreIdentity::carry(&object.extensions, x);
    }
    if let Some(h) = req.headers_mut() {
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(size));
        // The store records the checksum of what arrived (as a v1 PUT's
        // declared one), and returns it to later GETs, which check it.
        if let Ok(v) = HeaderValue::from_str(&hipobj_wire::checksum::crc64nvme_value(crc)) {
            h.insert(hipobj_wire::headers::CHECKSUM_CRC64NVME, v);
        }
    }
    let req = req
        .body(body)
        .map_err(|e| fail(V2Error::internal(e.to_string())))?;
    let resp = crate::upstream::timed(op, upstream.send(req, Payload::Unsigned))
        .await
        .map_err(|e| fail(V2Error::transfer(format!("the store failed: {e}"))))?;
    if !resp.status().is_success() {
        crate::metrics::rdma_failure("StoreError");
        return Err(answer::decorate(resp, true));
    }
    let h = resp.headers();
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    Ok(Final {
        bytes: size,
        cookie: session.cookie,
        etag: text("etag").map(str::to_string),
        version_id: text("x-amz-version-id").map(str::to_string),
        checksum: Some(crc),
        parts: true,
        handshake: true,
    })
}
