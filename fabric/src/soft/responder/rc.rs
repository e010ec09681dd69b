//! Requests for an RC QP: the peer and state checks, PSN order
//! (duplicates, sequence NAKs), RNR, and executing WRITE, WRITE with
//! immediate, SEND and READ, by the stream or the same-host path.

use super::access::{check_read, check_write, place, read_out, respond, while_accessing};
use super::grant::{cma_read, grant, Granted};
use crate::soft::memory::{self, dead_region, walk, Piece};
use crate::soft::packet::{ReqOp, Request, Response, Syndrome, FLAG_CMA, FLAG_FIRST, FLAG_LAST};
use crate::soft::psn;
use crate::soft::shared::{segments, DeviceShared, QpCore, QpInner};
use crate::soft::stats::Event;
use crate::types::{QpState, WcOpcode, WcStatus};
use std::io;
use std::net::TcpStream;

fn nak_and_error(
    qp: &QpInner,
    mut g: std::sync::MutexGuard<'_, QpCore>,
    stream: &TcpStream,
    req: &Request,
    syn: Syndrome,
) -> io::Result<()> {
    qp.enter_error(&mut g);
    drop(g);
    memory::drain(stream, req.seg_len as usize)?;
    respond(stream, Response::nak(req.psn, syn, 0))
}

/// The last of a WRITE with immediate has landed: its receive completes
/// with the immediate and the message's length.
fn complete_write_imm(qp: &QpInner, g: &mut QpCore, req: &Request) {
    if let Some(r) = g.rq.pop_front() {
        qp.complete_recv(
            g,
            r.wr_id,
            WcStatus::Success,
            WcOpcode::RecvRdmaWithImm,
            req.msg_len,
            Some(req.imm),
            req.src_qpn,
        );
    }
}

pub(super) fn rc_request(
    dev: &DeviceShared,
    qp: &QpInner,
    stream: &TcpStream,
    req: &Request,
    pending: &mut Option<Request>,
) -> io::Result<()> {
    let mut g = qp.lock();
    let peer_ok = g.attr.dest_qp_num == req.src_qpn
        && g.attr
            .ah_attr
            .grh
            .is_some_and(|grh| grh.dgid == req.src_gid);
    let ready = matches!(g.state, QpState::Rtr | QpState::Rts);
    if !ready || !peer_ok {
        // Silently dropped, as a NIC drops packets for a QP that is not
        // ready or not connected to the sender (and counts them).
        drop(g);
        dev.stats.count(if ready {
            Event::DroppedOtherPeer
        } else {
            Event::DroppedNotReady
        });
        return memory::drain(stream, req.seg_len as usize);
    }
    let d = psn::diff(req.psn, g.epsn);
    if d > 0 {
        let first = !g.nak_seq_sent;
        g.nak_seq_sent = true;
        let epsn = g.epsn;
        drop(g);
        memory::drain(stream, req.seg_len as usize)?;
        return if first {
            respond(stream, Response::nak(epsn, Syndrome::Sequence, 0))
        } else {
            Ok(())
        };
    }
    let qp_access = g.attr.qp_access_flags;
    if d < 0 {
        // A duplicate: WRITE/SEND are acknowledged again without being
        // executed twice; a READ is executed again.
        let last_done = psn::add(g.epsn, psn::PSN_MASK);
        drop(g);
        if req.op == ReqOp::ReadReq {
            let Ok(target) = check_read(dev, qp.pd_id, req, qp_access) else {
                return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
            };
            return match target {
                Some((mr, host)) if req.flags & FLAG_CMA != 0 => {
                    cma_read(dev, stream, req, &mr, host, pending)
                }
                _ => read_out(dev, stream, req, qp.pd_id, qp_access),
            };
        }
        memory::drain(stream, req.seg_len as usize)?;
        return respond(stream, Response::ack(last_done));
    }
    g.nak_seq_sent = false;
    let first = req.flags & FLAG_FIRST != 0;
    let last = req.flags & FLAG_LAST != 0;
    match req.op {
        ReqOp::ReadReq => {
            let Ok(target) = check_read(dev, qp.pd_id, req, qp_access) else {
                return nak_and_error(qp, g, stream, req, Syndrome::RemoteAccess);
            };
            g.epsn = psn::add(req.psn, segments(req.msg_len));
            drop(g);
            match target {
                Some((mr, host)) if req.flags & FLAG_CMA != 0 => {
                    cma_read(dev, stream, req, &mr, host, pending)
                }
                _ => read_out(dev, stream, req, qp.pd_id, qp_access),
            }
        }
        // Answered in `serve` (never reaches a QP).
        ReqOp::CmaDone => Ok(()),
        ReqOp::Write | ReqOp::WriteImm if req.flags & FLAG_CMA != 0 => {
            // As on the stream: a WRITE with immediate needs a receive to
            // consume, checked before any byte lands.
            if req.op == ReqOp::WriteImm && first && g.rq.is_empty() {
                let timer = g.attr.min_rnr_timer;
                drop(g);
                return respond(stream, Response::nak(req.psn, Syndrome::Rnr, timer));
            }
            let Ok(Some((mr, host))) = check_write(dev, qp.pd_id, req, req.cma_len, qp_access)
            else {
                return nak_and_error(qp, g, stream, req, Syndrome::RemoteAccess);
            };
            let gen = g.gen;
            drop(g);
            match grant(dev, stream, &mr, host, req)? {
                Granted::Done => {}
                Granted::Failed => return Ok(()),
                Granted::Superseded(next) => {
                    *pending = Some(next);
                    return Ok(());
                }
                Granted::Dead => {
                    return nak_and_error(qp, qp.lock(), stream, req, Syndrome::RemoteAccess)
                }
            }
            let mut g = qp.lock();
            if g.gen != gen {
                return Ok(());
            }
            let n = segments(req.cma_len);
            g.epsn = psn::add(req.psn, n);
            if last && req.op == ReqOp::WriteImm {
                complete_write_imm(qp, &mut g, req);
            }
            drop(g);
            respond(stream, Response::ack(psn::add(req.psn, n - 1)))
        }
        ReqOp::Write | ReqOp::WriteImm => {
            if req.op == ReqOp::WriteImm && first && g.rq.is_empty() {
                let timer = g.attr.min_rnr_timer;
                drop(g);
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::nak(req.psn, Syndrome::Rnr, timer));
            }
            // Every segment is checked for its own range too.
            let Ok(target) = check_write(dev, qp.pd_id, req, u64::from(req.seg_len), qp_access)
            else {
                return nak_and_error(qp, g, stream, req, Syndrome::RemoteAccess);
            };
            let gen = g.gen;
            drop(g);
            if let Some((mr, host)) = target {
                if let Err(e) = place(dev, stream, &mr, host, req.seg_len as usize) {
                    if e.kind() != io::ErrorKind::NotFound {
                        return Err(e);
                    }
                    // Deregistered before this segment was placed: its
                    // payload is still unread, and the request is refused.
                    return nak_and_error(qp, qp.lock(), stream, req, Syndrome::RemoteAccess);
                }
            }
            let mut g = qp.lock();
            if g.gen != gen {
                return Ok(());
            }
            g.epsn = psn::add(req.psn, 1);
            if last && req.op == ReqOp::WriteImm {
                complete_write_imm(qp, &mut g, req);
            }
            drop(g);
            respond(stream, Response::ack(req.psn))
        }
        ReqOp::Send | ReqOp::SendImm => {
            let Some(recv) = g.rq.front().cloned() else {
                let timer = g.attr.min_rnr_timer;
                drop(g);
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::nak(req.psn, Syndrome::Rnr, timer));
            };
            let room: u64 = recv.sg_list.iter().map(|s| u64::from(s.length)).sum();
            if req.msg_len > room {
                g.rq.pop_front();
                qp.complete_recv(
                    &mut g,
                    recv.wr_id,
                    WcStatus::LocLenErr,
                    WcOpcode::Recv,
                    0,
                    None,
                    req.src_qpn,
                );
                return nak_and_error(qp, g, stream, req, Syndrome::InvalidRequest);
            }
            let pieces = match memory::resolve(&recv.sg_list, qp.pd_id, true, |k| dev.mr(k)) {
                Ok(p) => p,
                Err(_) => {
                    g.rq.pop_front();
                    qp.complete_recv(
                        &mut g,
                        recv.wr_id,
                        WcStatus::LocProtErr,
                        WcOpcode::Recv,
                        0,
                        None,
                        req.src_qpn,
                    );
                    return nak_and_error(qp, g, stream, req, Syndrome::RemoteOperation);
                }
            };
            let gen = g.gen;
            let Ok(off) = usize::try_from(req.va) else {
                return nak_and_error(qp, g, stream, req, Syndrome::InvalidRequest);
            };
            // The receive's memory is being written: a flush of it waits.
            qp.busy(&mut g);
            drop(g);
            let placed = walk(&pieces, off, req.seg_len as usize, |p: &Piece, host, n| {
                // SAFETY: `host..host + n` lies inside the live region
                // `p.mr`, which allows local writes (checked by resolve and
                // walk); its guard is held for the call.
                while_accessing(dev, &p.mr, host, n, || unsafe {
                    memory::recv_into(stream, host, n)
                })
                .unwrap_or_else(|| Err(dead_region()))
            });
            let mut g = qp.lock();
            qp.unbusy(&mut g);
            match placed {
                Ok(()) => {}
                Err(memory::WalkError::Io(e)) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(e)
                }
                Err(_) => return Err(io::Error::other("receive buffer went away during a send")),
            }
            if g.gen != gen {
                return Ok(());
            }
            g.epsn = psn::add(req.psn, 1);
            if last {
                if let Some(r) = g.rq.pop_front() {
                    let imm = (req.op == ReqOp::SendImm).then_some(req.imm);
                    qp.complete_recv(
                        &mut g,
                        r.wr_id,
                        WcStatus::Success,
                        WcOpcode::Recv,
                        req.msg_len,
                        imm,
                        req.src_qpn,
                    );
                }
            }
            drop(g);
            respond(stream, Response::ack(req.psn))
        }
    }
}
