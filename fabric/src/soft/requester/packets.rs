//! Which packet the engine sends next: the next segment of the send
//! queue within the window, a READ request within `max_rd_atomic`, or a
//! same-host request covering several segments.

use super::window::{outstanding, CMA_MIN, WINDOW};
use crate::soft::packet::{
    ReqOp, Request, FLAG_CMA, FLAG_FIRST, FLAG_LAST, MAX_CMA_WRITE, SEGMENT,
};
use crate::soft::psn;
use crate::soft::shared::QpCore;
use crate::types::{SendOp, Sge};
use std::net::Shutdown;

/// One packet the engine is about to send.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub req: Request,
    pub sges: Vec<Sge>,
    /// Offset of the payload in the message.
    pub off: u64,
    /// By the same-host path (see [`super::transmit`]).
    pub cma: bool,
}

pub(super) fn next_packet(g: &mut QpCore, cma: bool) -> Option<Outgoing> {
    if psn::diff(g.send_psn, g.next_psn) >= 0 {
        return None;
    }
    let idx = g.sq.iter().position(|w| w.holds(g.send_psn))?;
    let a = &g.sq[idx];
    let k = psn::diff(g.send_psn, a.first_psn) as u32;
    if let Some(t) = a.wr.dc {
        if g.dc_target != Some(t) {
            // A DC initiator talks to one target at a time: drain first.
            if outstanding(g) {
                return None;
            }
            g.dc_target = Some(t);
            if let Some(c) = g.conn.take() {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
        }
    }
    let a = &g.sq[idx];
    let dc_key = a.wr.dc.map_or(0, |d| d.dc_key);
    let (off, seg_len) = a.segment(k);
    let mut req = Request {
        op: ReqOp::Write,
        flags: 0,
        dst_qpn: 0,
        src_qpn: 0,
        src_gid: hipobj_wire::Gid::ZERO,
        psn: g.send_psn,
        rkey: 0,
        va: 0,
        seg_len,
        msg_len: a.len,
        imm: 0,
        dc_key,
        cma_len: 0,
    };
    if k == 0 {
        req.flags |= FLAG_FIRST;
    }
    if k + 1 == a.nsegs {
        req.flags |= FLAG_LAST;
    }
    let mut by_cma = false;
    let next;
    match a.wr.op {
        SendOp::RdmaRead(remote) => {
            let reads_out =
                g.sq.iter()
                    .take(idx)
                    .filter(|w| w.is_read() && psn::diff(w.first_psn, g.send_psn) < 0)
                    .count();
            if reads_out >= usize::from(g.attr.max_rd_atomic.max(1)) {
                return None;
            }
            req.op = ReqOp::ReadReq;
            req.flags = FLAG_FIRST | FLAG_LAST;
            req.rkey = remote.rkey;
            req.va = remote.addr.wrapping_add(off);
            req.seg_len = 0;
            req.msg_len = a.len - off;
            if cma && req.msg_len >= CMA_MIN {
                req.flags |= FLAG_CMA;
                by_cma = true;
            }
            next = a.end_psn();
        }
        op => {
            if psn::diff(g.send_psn, g.una) >= WINDOW {
                return None;
            }
            match op {
                SendOp::RdmaWrite(r) | SendOp::RdmaWriteWithImm(r, _) => {
                    req.rkey = r.rkey;
                    req.va = r.addr.wrapping_add(off);
                }
                _ => req.va = off,
            }
            req.op = match op {
                SendOp::RdmaWrite(_) => ReqOp::Write,
                SendOp::RdmaWriteWithImm(_, imm) => {
                    req.imm = imm;
                    ReqOp::WriteImm
                }
                SendOp::Send => ReqOp::Send,
                SendOp::SendWithImm(imm) => {
                    req.imm = imm;
                    ReqOp::SendImm
                }
                SendOp::RdmaRead(_) => ReqOp::ReadReq,
            };
            // Whole segments, as many as the window has room for.
            let room = (WINDOW - psn::diff(g.send_psn, g.una)).max(1) as u32;
            let n = (a.nsegs - k).min(room);
            let covered = (u64::from(n) * u64::from(SEGMENT))
                .min(a.len - off)
                .min(MAX_CMA_WRITE);
            let write = matches!(op, SendOp::RdmaWrite(_) | SendOp::RdmaWriteWithImm(..));
            next = if cma && write && covered >= CMA_MIN {
                req.flags |= FLAG_CMA;
                if k + n == a.nsegs {
                    req.flags |= FLAG_LAST;
                }
                req.seg_len = 0;
                req.cma_len = covered;
                by_cma = true;
                psn::add(g.send_psn, n)
            } else {
                psn::add(g.send_psn, 1)
            };
        }
    }
    let sges = a.wr.sg_list.clone();
    g.send_psn = next;
    if psn::diff(next, g.sent_hi) > 0 {
        g.sent_hi = next;
    }
    Some(Outgoing {
        req,
        sges,
        off,
        cma: by_cma,
    })
}
