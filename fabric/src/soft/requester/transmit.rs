//! Sending one packet: over the stream (header, then the payload straight
//! from registered memory), or by the same-host path (request, grant,
//! copy, done).

use super::packets::Outgoing;
use super::window::{ack_timeout, resend_from, wait};
use crate::soft::cma;
use crate::soft::config::count_cma_bytes;
use crate::soft::memory::{self, dead_region, walk, Piece};
use crate::soft::packet::{ReqOp, Request, CMA_FAILED};
use crate::soft::psn;
use crate::soft::shared::{CmaGrant, QpInner, ReqConn};
use crate::types::QpType;
use std::net::Shutdown;
use std::time::{Duration, Instant};

/// Why a packet was not sent.
pub(super) enum TxError {
    Unreachable,
    Io,
    LocalKey,
}

/// Sends a same-host request ([`FLAG_CMA`]), waits for its grant, copies
/// the bytes between this process and the responder's, and says done.
///
/// The copy happens only between the grant and the done, on this thread,
/// so the responder keeps its region registered for the whole of it; and
/// only while the work request is still outstanding. A request whose grant
/// does not come in time is abandoned without copying (the ACK timer
/// resends it). When the kernel refuses the copy, the path is turned off
/// for the connection and the request is sent again over the stream.
pub(super) fn transmit_cma(
    qp: &QpInner,
    conn: &ReqConn,
    out: &Outgoing,
    gen: u64,
) -> Result<(), TxError> {
    let Some(pid) = conn.cma() else {
        // Turned off since the packet was made: send it again the usual way.
        resend_from(qp, gen, out.req.psn);
        return Ok(());
    };
    let read = out.req.op == ReqOp::ReadReq;
    let mut req = out.req;
    req.src_qpn = qp.qpn;
    req.src_gid = qp.dev.gid;
    let (limit, nonce) = {
        let mut g = qp.lock();
        req.dst_qpn = g.attr.dest_qp_num;
        g.cma_nonce = g.cma_nonce.wrapping_add(1);
        let limit = ack_timeout(qp, &g).unwrap_or(Duration::from_secs(2));
        (limit, g.cma_nonce)
    };
    req.dc_key = u64::from(nonce);
    let len = if read { req.msg_len } else { req.cma_len } as usize;
    let pieces = memory::resolve(&out.sges, qp.pd_id, read, |k| qp.dev.mr(k))
        .map_err(|_| TxError::LocalKey)?;
    memory::send_bytes(&conn.stream, &req.encode(), false).map_err(|_| TxError::Io)?;

    let deadline = Instant::now() + limit;
    let mut g = qp.lock();
    let grant = loop {
        if g.gen != gen || g.state != crate::QpState::Rts {
            return Ok(());
        }
        let awaited = |gr: &CmaGrant| gr.conn == conn.id && gr.psn == req.psn && gr.nonce == nonce;
        if let Some(gr) = g.cma_grant.filter(awaited) {
            g.cma_grant = None;
            break gr;
        }
        // Gone back past it (a NAK, a timeout), or no longer outstanding:
        // nothing is copied for this request.
        let outstanding = g.sq.iter().any(|w| w.holds(req.psn) && !w.cma_read_done);
        if psn::diff(g.send_psn, req.psn) <= 0 || !outstanding || Instant::now() >= deadline {
            return Ok(());
        }
        g = wait(qp, g, Some(deadline));
    };
    let Ok(remote) = usize::try_from(grant.addr) else {
        return Err(TxError::Io);
    };
    #[cfg(feature = "testing")]
    {
        // A `testing` gate may stop a requester here, the grant taken and
        // nothing copied; it then finds out below what happened meanwhile.
        drop(g);
        let mut off = out.off as usize;
        let start = pieces.iter().find_map(|p| {
            if off < p.len {
                Some((p, p.host + off))
            } else {
                off -= p.len;
                None
            }
        });
        if let Some((p, host)) = start {
            crate::soft::testing::requester_grant(&p.mr, host, len);
        }
        g = qp.lock();
    }
    // The grant holds only while its connection does: one the responder
    // closed (it waited too long for the done) or the QP dropped is not
    // copied to; the ACK timer resends the request.
    if g.gen != gen || g.conn.as_ref().map(|c| c.id) != Some(conn.id) {
        return Ok(());
    }
    // Set only when the copy is sure to start: it is cleared after it.
    g.cma_copying = true;
    drop(g);

    let mut at = remote;
    let copied = walk(&pieces, out.off as usize, len, |p: &Piece, host, n| {
        let to = at;
        at += n;
        // SAFETY: `host..host + n` lies inside the live region `p.mr`
        // (checked by resolve and walk, writable for a READ), whose guard is
        // held for the call; the remote range is the one the responder
        // checked and granted, and keeps registered until our done.
        p.mr.while_live(|| unsafe { cma::copy(pid, !read, &[(host, n)], to) })
            .unwrap_or_else(|| Err(dead_region()))
    });
    let mut g = qp.lock();
    g.cma_copying = false;
    let deferred = g.cma_deferred_close.take();
    let alive = g.gen == gen;
    if alive && copied.is_ok() {
        if read {
            if let Some(w) = g.sq.iter_mut().find(|w| w.holds(req.psn)) {
                w.cma_read_done = true;
            }
        }
        // Progress: the acknowledgement timer starts again.
        g.timer = ack_timeout(qp, &g).map(|t| Instant::now() + t);
    }
    drop(g);
    if let Some(c) = deferred {
        // The QP left RTS during the copy: the connection closes now.
        let _ = c.stream.shutdown(Shutdown::Both);
    }
    if !alive {
        return Ok(());
    }
    let done = Request {
        op: ReqOp::CmaDone,
        flags: 0,
        dst_qpn: req.dst_qpn,
        src_qpn: req.src_qpn,
        src_gid: req.src_gid,
        psn: req.psn,
        rkey: nonce,
        va: 0,
        seg_len: 0,
        msg_len: 0,
        imm: if copied.is_ok() { 0 } else { CMA_FAILED },
        dc_key: 0,
        cma_len: 0,
    };
    memory::send_bytes(&conn.stream, &done.encode(), false).map_err(|_| TxError::Io)?;
    match copied {
        Ok(()) => {
            count_cma_bytes(len);
            Ok(())
        }
        Err(memory::WalkError::Io(e)) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::debug!(
                qpn = format_args!("{:#x}", qp.qpn),
                error = %e,
                "soft requester: the kernel refused the same-host copy; this connection sends bytes over the stream"
            );
            conn.cma_live
                .store(false, std::sync::atomic::Ordering::Release);
            resend_from(qp, gen, req.psn);
            Ok(())
        }
        Err(_) => Err(TxError::LocalKey),
    }
}

pub(super) fn transmit(qp: &QpInner, conn: &ReqConn, out: &Outgoing) -> Result<(), TxError> {
    let mut req = out.req;
    req.src_qpn = qp.qpn;
    req.src_gid = qp.dev.gid;
    {
        let g = qp.lock();
        req.dst_qpn = match qp.qp_type {
            QpType::Rc => g.attr.dest_qp_num,
            QpType::DcInitiator => g.dc_target.map_or(0, |t| t.dct_num),
        };
    }
    let len = req.seg_len as usize;
    let pieces = if len > 0 {
        memory::resolve(&out.sges, qp.pd_id, false, |k| qp.dev.mr(k))
            .map_err(|_| TxError::LocalKey)?
    } else {
        Vec::new()
    };
    let s = &conn.stream;
    memory::send_bytes(s, &req.encode(), len > 0).map_err(|_| TxError::Io)?;
    let mut sent = 0usize;
    let r = walk(&pieces, out.off as usize, len, |p: &Piece, host, n| {
        sent += n;
        let more = sent < len;
        // SAFETY: `host..host + n` lies inside the live region `p.mr`
        // (checked by resolve and walk), whose guard is held for the call.
        p.mr.while_live(|| unsafe { memory::send_from(s, host, n, more) })
            .unwrap_or_else(|| Err(dead_region()))
    });
    match r {
        Ok(()) => Ok(()),
        Err(memory::WalkError::Io(e)) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(TxError::Io)
        }
        Err(_) => Err(TxError::LocalKey),
    }
}
