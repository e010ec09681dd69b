//! The receiver thread of a requester connection: ACKs, NAKs and READ
//! responses (whose data it places straight into local memory), completing
//! requests in order; and the local ACK timer's expiry.

use super::window::{ack_timeout, drop_conn, outstanding, unsent};
use crate::soft::completion::vendor_err;
use crate::soft::memory::{self, dead_region, walk, KeyError, Piece};
use crate::soft::packet::{RespOp, Response, Syndrome, CMA_GRANT_LEN, RESPONSE_LEN};
use crate::soft::psn;
use crate::soft::shared::{CmaGrant, QpCore, QpInner, ReqConn};
use crate::soft::stats::Event;
use crate::soft::timers;
use crate::types::WcStatus;
use std::net::TcpStream;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

/// Moves `una` forward to `new_una`, completing the requests it covers.
/// READs complete only when their data has arrived.
fn advance_to(qp: &QpInner, g: &mut QpCore, new_una: u32) {
    let before = g.una;
    while let Some(h) = g.sq.front() {
        if (h.is_read() && !h.cma_read_done) || psn::diff(new_una, h.end_psn()) < 0 {
            break;
        }
        qp.complete_head(g, WcStatus::Success, 0);
    }
    let target = match g.sq.front() {
        Some(h) if h.is_read() => {
            if psn::diff(h.first_psn, g.una) > 0 {
                h.first_psn
            } else {
                g.una
            }
        }
        _ => new_una,
    };
    if psn::diff(target, g.una) > 0 {
        g.una = target;
    }
    if psn::diff(g.una, g.send_psn) > 0 {
        g.send_psn = g.una;
    }
    if g.una != before {
        progress(qp, g);
    }
}

fn progress(qp: &QpInner, g: &mut QpCore) {
    g.retry_left = g.attr.retry_cnt;
    g.rnr_left = g.attr.rnr_retry;
    g.timer = if outstanding(g) {
        ack_timeout(qp, g).map(|t| Instant::now() + t)
    } else {
        None
    };
    // An engine idle with nothing left to send has nothing to do with the
    // news (its sleep ends by the old deadline, before the new one): the
    // common case of one request at a time costs no wake-up here.
    if unsent(g) || !g.engine_idle {
        qp.wake.notify_all();
    }
}

pub(super) fn on_timeout(qp: &QpInner, g: &mut QpCore) {
    g.timer = None;
    if !outstanding(g) {
        return;
    }
    if g.retry_left == 0 {
        tracing::debug!(
            qpn = format_args!("{:#x}", qp.qpn),
            psn = g.una,
            "soft requester: retries exhausted"
        );
        qp.fail_head(g, WcStatus::RetryExcErr, vendor_err::NO_ACK);
        return;
    }
    g.retry_left -= 1;
    // Go back N: resend everything from the oldest unacknowledged PSN.
    g.send_psn = g.una;
    qp.wake.notify_all();
}

/// Completes everything before `p` (it was executed), then fails the
/// request holding `p` with `status` and moves to ERR.
pub(super) fn fail_at(qp: &QpInner, g: &mut QpCore, p: u32, status: WcStatus, verr: u32) {
    advance_to(qp, g, p);
    qp.fail_head(g, status, verr);
}

pub(super) fn receive(qp: Arc<QpInner>, gen: u64, conn: Arc<ReqConn>, stream: TcpStream) {
    while let Ok(Some(hdr)) = memory::read_header::<RESPONSE_LEN>(&stream) {
        let Some(r) = Response::decode(&hdr) else {
            tracing::warn!(
                qpn = format_args!("{:#x}", qp.qpn),
                "soft requester: malformed response; closing"
            );
            break;
        };
        let mut g = qp.lock();
        if g.gen != gen {
            return;
        }
        match r.op {
            RespOp::Ack => {
                if psn::diff(r.psn, g.una) >= 0 && psn::diff(r.psn, g.sent_hi) < 0 {
                    advance_to(&qp, &mut g, psn::add(r.psn, 1));
                }
            }
            RespOp::Nak => on_nak(&qp, &mut g, r),
            RespOp::CmaGrant => {
                drop(g);
                let Ok(Some(b)) = memory::read_header::<{ CMA_GRANT_LEN as usize }>(&stream) else {
                    break;
                };
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[0..8]);
                let addr = u64::from_le_bytes(w);
                let mut n = [0u8; 4];
                n.copy_from_slice(&b[8..12]);
                let mut g = qp.lock();
                if g.gen != gen {
                    return;
                }
                g.cma_grant = Some(CmaGrant {
                    conn: conn.id,
                    psn: r.psn,
                    nonce: u32::from_le_bytes(n),
                    addr,
                });
                qp.wake.notify_all();
            }
            RespOp::ReadResp => {
                if !on_read_response(&qp, g, gen, &stream, r) {
                    break;
                }
            }
        }
    }
    let mut g = qp.lock();
    if g.gen == gen {
        if g.conn.as_ref().is_some_and(|c| c.id == conn.id) {
            // Ended under the QP, not closed by it.
            qp.dev.stats.count(Event::RequesterConnectionLost);
        }
        drop_conn(&mut g, Some(conn.id));
    }
}

fn on_nak(qp: &QpInner, g: &mut QpCore, r: Response) {
    if psn::diff(r.psn, g.una) < 0 || psn::diff(r.psn, g.sent_hi) > 0 {
        return;
    }
    advance_to(qp, g, r.psn);
    match r.syndrome {
        Some(Syndrome::Sequence) => {
            g.send_psn = r.psn;
            qp.wake.notify_all();
        }
        Some(Syndrome::Rnr) => {
            if g.attr.rnr_retry != 7 {
                if g.rnr_left == 0 {
                    qp.fail_head(g, WcStatus::RnrRetryExcErr, vendor_err::RNR);
                    return;
                }
                g.rnr_left -= 1;
            }
            g.send_psn = r.psn;
            g.timer = None;
            g.rnr_until =
                Some(Instant::now() + timers::rnr_delay(r.rnr_timer, qp.dev.config.timeout_scale));
            qp.wake.notify_all();
        }
        Some(Syndrome::InvalidRequest) => qp.fail_head(g, WcStatus::RemInvReqErr, vendor_err::NAK),
        Some(Syndrome::RemoteAccess) => qp.fail_head(g, WcStatus::RemAccessErr, vendor_err::NAK),
        Some(Syndrome::RemoteOperation) | None => {
            qp.fail_head(g, WcStatus::RemOpErr, vendor_err::NAK)
        }
    }
}

/// Places one READ response segment. Returns false when the connection
/// can no longer be used.
fn on_read_response(
    qp: &QpInner,
    mut g: MutexGuard<'_, QpCore>,
    gen: u64,
    stream: &TcpStream,
    r: Response,
) -> bool {
    let len = r.seg_len as usize;
    let stale = psn::diff(r.psn, g.una) < 0;
    let ours = psn::diff(r.psn, g.sent_hi) < 0
        && g.sq
            .iter()
            .find(|w| w.holds(r.psn))
            .is_some_and(|w| w.is_read());
    if stale || !ours {
        if !stale {
            tracing::warn!(
                qpn = format_args!("{:#x}", qp.qpn),
                psn = r.psn,
                "soft requester: READ response for no READ"
            );
            fail_at(
                qp,
                &mut g,
                r.psn,
                WcStatus::BadRespErr,
                vendor_err::BAD_RESPONSE,
            );
        }
        drop(g);
        return memory::drain(stream, len).is_ok();
    }
    // A READ response acknowledges every request before it.
    advance_to(qp, &mut g, r.psn);
    if r.psn != g.una {
        drop(g);
        return memory::drain(stream, len).is_ok();
    }
    let Some(head) = g.sq.front() else {
        drop(g);
        return memory::drain(stream, len).is_ok();
    };
    let k = psn::diff(r.psn, head.first_psn) as u32;
    let (off, want) = head.segment(k);
    let last = k + 1 == head.nsegs;
    if r.seg_len != want {
        qp.fail_head(&mut g, WcStatus::BadRespErr, vendor_err::BAD_RESPONSE);
        drop(g);
        return memory::drain(stream, len).is_ok();
    }
    let pieces = match memory::resolve(&head.wr.sg_list, qp.pd_id, true, |k| qp.dev.mr(k)) {
        Ok(p) => p,
        Err(KeyError::UnknownKey | KeyError::OtherPd | KeyError::Access | KeyError::Bounds) => {
            qp.fail_head(&mut g, WcStatus::LocProtErr, vendor_err::LOCAL_KEY);
            drop(g);
            return memory::drain(stream, len).is_ok();
        }
    };
    // The READ's memory is written outside the lock: a flush waits.
    qp.busy(&mut g);
    drop(g);
    let placed = walk(&pieces, off as usize, len, |p: &Piece, host, n| {
        // SAFETY: `host..host + n` lies inside the live region `p.mr`, which
        // allows local writes (checked by resolve and walk); its guard is
        // held for the call.
        p.mr.while_live(|| unsafe { memory::recv_into(stream, host, n) })
            .unwrap_or_else(|| Err(dead_region()))
    });
    let mut g = qp.lock();
    qp.unbusy(&mut g);
    if g.gen != gen {
        return false;
    }
    if placed.is_err() {
        // The stream is out of step (or the local region went away mid-way).
        qp.fail_head(&mut g, WcStatus::LocProtErr, vendor_err::LOCAL_KEY);
        return false;
    }
    g.una = psn::add(r.psn, 1);
    if last {
        qp.complete_head(&mut g, WcStatus::Success, 0);
    }
    progress(qp, &mut g);
    true
}
