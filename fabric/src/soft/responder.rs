//! The responder side: a thread per incoming connection that checks each
//! request against the target QP or DCT and its memory, as a NIC does,
//! places or reads the bytes, and answers with ACKs, NAKs and READ data.
//!
//! A request for a QP that is not in RTR or RTS, or that is connected to a
//! different peer, is dropped without an answer (its payload is read and
//! discarded): the requester's timer then retransmits and finally fails
//! with RETRY_EXC_ERR. A key, protection-domain, bounds or access failure
//! is answered with a remote-access NAK and moves the QP to ERR.

use super::cma;
use super::dct::DctInner;
use super::device::{DeviceShared, Target};
use super::memory::{self, dead_region, walk, MrInner, Piece};
use super::packet::{
    Hello, HelloAck, ReqOp, Request, Response, Syndrome, CMA_FAILED, FLAG_CMA, FLAG_FIRST,
    FLAG_LAST, HELLO_LEN, REQUEST_LEN,
};
use super::psn;
use super::qp::{segments, QpCore, QpInner};
use crate::types::{AccessFlags, QpState, WcOpcode, WcStatus};
use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// How long a new connection may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a same-host grant keeps its region registered waiting for the
/// requester's done (the copy of at most 2 GiB between two processes);
/// after it the connection is closed.
const CMA_DONE_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads and checks the hello a connection must open with, and answers it.
/// `None`: the stream is not a soft requester's (closed by the caller).
/// With the hello, whether the same-host path was offered.
fn accept_hello(dev: &DeviceShared, stream: &TcpStream) -> Option<(Hello, bool)> {
    let peer = stream.peer_addr().ok()?;
    stream.set_read_timeout(Some(HELLO_TIMEOUT)).ok()?;
    let hello = match memory::read_header::<HELLO_LEN>(stream) {
        Ok(Some(b)) => Hello::decode(&b),
        _ => None,
    };
    let Some(hello) = hello else {
        tracing::warn!(%peer, "soft responder: a connection did not open with a hello; closed");
        return None;
    };
    // The GID a requester claims must be the address it connects from.
    let claimed = hello.src_gid.ipv4().map(std::net::IpAddr::V4);
    if claimed != Some(peer.ip()) {
        tracing::warn!(%peer, claimed = ?hello.src_gid, "soft responder: hello from another address than its GID; closed");
        return None;
    }
    stream.set_read_timeout(None).ok()?;
    let cma = dev.config.cma && cma::is_local(peer.ip(), std::net::IpAddr::V4(dev.ip));
    let ack = if cma {
        HelloAck {
            cma: true,
            pid: std::process::id(),
        }
    } else {
        HelloAck::PLAIN
    };
    memory::send_bytes(stream, &ack.encode(), false).ok()?;
    tracing::trace!(%peer, dst = format_args!("{:#x}", hello.dst_qpn), dev = %dev.ip, cma, "soft responder: hello");
    Some((hello, cma))
}

/// How a same-host grant ended.
enum Granted {
    /// The requester copied the range.
    Done,
    /// The requester could not copy; it sends the bytes over the stream.
    Failed,
    /// The requester sent another request instead (it gave up waiting for
    /// the grant, and copied nothing): served next.
    Superseded(Request),
    /// The region was deregistered before the grant.
    Dead,
}

/// Grants the requester the checked range at `host` of `mr` for the
/// request `req`, and keeps the region registered until its answer.
fn grant(stream: &TcpStream, mr: &MrInner, host: usize, req: &Request) -> io::Result<Granted> {
    let nonce = req.imm;
    let held = mr.while_live(|| -> io::Result<Granted> {
        let mut payload = [0u8; super::packet::CMA_GRANT_LEN as usize];
        payload[0..8].copy_from_slice(&(host as u64).to_le_bytes());
        payload[8..12].copy_from_slice(&nonce.to_le_bytes());
        memory::send_bytes(stream, &Response::cma_grant(req.psn).encode(), true)?;
        memory::send_bytes(stream, &payload, false)?;
        stream.set_read_timeout(Some(CMA_DONE_TIMEOUT))?;
        let next = memory::read_header::<REQUEST_LEN>(stream);
        stream.set_read_timeout(None)?;
        let Some(hdr) = next? else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        let Some(r) = Request::decode(&hdr) else {
            return Err(io::Error::other(
                "malformed request after a same-host grant",
            ));
        };
        if r.op == ReqOp::CmaDone && r.psn == req.psn && r.rkey == nonce {
            return Ok(if r.imm == CMA_FAILED {
                Granted::Failed
            } else {
                Granted::Done
            });
        }
        Ok(Granted::Superseded(r))
    });
    held.unwrap_or(Ok(Granted::Dead))
}

/// Serves one connection until it closes.
pub(crate) fn serve(dev: Arc<DeviceShared>, stream: TcpStream, conn_id: u64) {
    let Some((hello, cma_offered)) = accept_hello(&dev, &stream) else {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        dev.unregister_conn(conn_id);
        return;
    };
    let mut dct_epsn: HashMap<u32, u32> = HashMap::new();
    let mut pending: Option<Request> = None;
    let r = loop {
        let req = match pending.take() {
            Some(r) => r,
            None => {
                let hdr = match memory::read_header::<REQUEST_LEN>(&stream) {
                    Ok(Some(h)) => h,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                let Some(req) = Request::decode(&hdr) else {
                    tracing::warn!("soft responder: malformed request; closing the connection");
                    break Ok(());
                };
                req
            }
        };
        if (req.flags & FLAG_CMA != 0 || req.op == ReqOp::CmaDone) && !cma_offered {
            tracing::warn!("soft responder: a same-host request where none was offered; closing the connection");
            break Ok(());
        }
        if req.op == ReqOp::CmaDone {
            // For a grant this responder no longer waits for.
            continue;
        }
        if req.src_gid != hello.src_gid
            || req.src_qpn != hello.src_qpn
            || req.dst_qpn != hello.dst_qpn
        {
            tracing::warn!(
                src_qpn = format_args!("{:#x}", req.src_qpn),
                dst_qpn = format_args!("{:#x}", req.dst_qpn),
                "soft responder: a request that is not the hello's; closing the connection"
            );
            break Ok(());
        }
        let step = match dev.target(req.dst_qpn) {
            Some(Target::Rc(w)) => match w.upgrade() {
                Some(qp) => rc_request(&dev, &qp, &stream, &req, &mut pending),
                None => memory::drain(&stream, req.seg_len as usize),
            },
            Some(Target::Dct(w)) => match w.upgrade() {
                Some(dct) => dct_request(&dev, &dct, &stream, &req, &mut dct_epsn),
                None => memory::drain(&stream, req.seg_len as usize),
            },
            None => memory::drain(&stream, req.seg_len as usize),
        };
        if let Err(e) = step {
            break Err(e);
        }
    };
    if let Err(e) = r {
        tracing::debug!(error = %e, "soft responder connection ended");
    }
    dev.unregister_conn(conn_id);
}

fn respond(stream: &TcpStream, r: Response) -> io::Result<()> {
    memory::send_bytes(stream, &r.encode(), false)
}

/// Checks a remote access of `len` bytes at `va` through key `rkey`.
/// A zero-length access needs no valid key, as in the IB specification.
fn check_remote(
    dev: &DeviceShared,
    pd_id: u64,
    rkey: u32,
    va: u64,
    len: u64,
    need: AccessFlags,
    qp_access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    if len == 0 {
        return Ok(None);
    }
    let mr = dev.mr(rkey).ok_or(())?;
    let host = mr.check(pd_id, va, len, need, qp_access).map_err(|_| ())?;
    Ok(Some((mr, host)))
}

/// Checks a WRITE request's range of `len` bytes from `va` (its segment,
/// or what a same-host request covers); on the first segment also the whole
/// message, whose length it carries (RETH).
fn check_write(
    dev: &DeviceShared,
    pd_id: u64,
    req: &Request,
    len: u64,
    access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    if req.flags & FLAG_FIRST != 0 {
        check_remote(
            dev,
            pd_id,
            req.rkey,
            req.va,
            req.msg_len,
            AccessFlags::REMOTE_WRITE,
            access,
        )?;
    }
    check_remote(
        dev,
        pd_id,
        req.rkey,
        req.va,
        len,
        AccessFlags::REMOTE_WRITE,
        access,
    )
}

/// Checks a READ request's whole range.
fn check_read(
    dev: &DeviceShared,
    pd_id: u64,
    req: &Request,
    access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    check_remote(
        dev,
        pd_id,
        req.rkey,
        req.va,
        req.msg_len,
        AccessFlags::REMOTE_READ,
        access,
    )
}

/// Receives a segment's payload into `host` of live region `mr`.
fn place(stream: &TcpStream, mr: &MrInner, host: usize, len: usize) -> io::Result<()> {
    // SAFETY: `host..host + len` was checked to lie inside `mr`, which is
    // registered for remote write; its live guard is held for the call.
    mr.while_live(|| unsafe { memory::recv_into(stream, host, len) })
        .unwrap_or_else(|| Err(dead_region()))
}

/// Sends READ data for the request `req` (already checked), segment by
/// segment, starting at PSN `req.psn`.
fn read_out(
    dev: &DeviceShared,
    stream: &TcpStream,
    req: &Request,
    pd_id: u64,
    qp_access: AccessFlags,
) -> io::Result<()> {
    let n = segments(req.msg_len);
    for k in 0..n {
        let off = u64::from(k) * u64::from(super::packet::SEGMENT);
        let len = (req.msg_len - off).min(u64::from(super::packet::SEGMENT)) as u32;
        let p = psn::add(req.psn, k);
        let va = req.va.wrapping_add(off);
        // Checked again per segment: a region deregistered mid-read stops it.
        let target = check_remote(
            dev,
            pd_id,
            req.rkey,
            va,
            u64::from(len),
            AccessFlags::REMOTE_READ,
            qp_access,
        );
        match target {
            Err(()) => return respond(stream, Response::nak(p, Syndrome::RemoteAccess, 0)),
            Ok(None) => respond(stream, Response::read(p, 0))?,
            Ok(Some((mr, host))) => {
                let sent = mr.while_live(|| {
                    memory::send_bytes(stream, &Response::read(p, len).encode(), true)?;
                    // SAFETY: the range lies inside `mr`, which allows remote
                    // reads; its live guard is held for the call.
                    unsafe { memory::send_from(stream, host, len as usize, false) }
                });
                match sent {
                    Some(r) => r?,
                    None => return respond(stream, Response::nak(p, Syndrome::RemoteAccess, 0)),
                }
            }
        }
    }
    Ok(())
}

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

fn rc_request(
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
    if !matches!(g.state, QpState::Rtr | QpState::Rts) || !peer_ok {
        // Silently dropped, as a NIC drops packets for a QP that is not
        // ready or not connected to the sender.
        drop(g);
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
                    cma_read(stream, req, &mr, host, pending)
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
                    cma_read(stream, req, &mr, host, pending)
                }
                _ => read_out(dev, stream, req, qp.pd_id, qp_access),
            }
        }
        // Answered in `serve` (never reaches a QP).
        ReqOp::CmaDone => Ok(()),
        ReqOp::Write if req.flags & FLAG_CMA != 0 => {
            let Ok(Some((mr, host))) = check_write(dev, qp.pd_id, req, req.cma_len, qp_access)
            else {
                return nak_and_error(qp, g, stream, req, Syndrome::RemoteAccess);
            };
            let gen = g.gen;
            drop(g);
            match grant(stream, &mr, host, req)? {
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
                if let Err(e) = place(stream, &mr, host, req.seg_len as usize) {
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
                if let Some(r) = g.rq.pop_front() {
                    qp.complete_recv(
                        &mut g,
                        r.wr_id,
                        WcStatus::Success,
                        WcOpcode::RecvRdmaWithImm,
                        req.msg_len,
                        Some(req.imm),
                        req.src_qpn,
                    );
                }
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
                p.mr.while_live(|| unsafe { memory::recv_into(stream, host, n) })
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

/// A same-host READ, already checked (and its PSNs taken): grants its whole
/// range, at `host` of `mr`, and acknowledges its last PSN once the
/// requester has copied it.
fn cma_read(
    stream: &TcpStream,
    req: &Request,
    mr: &MrInner,
    host: usize,
    pending: &mut Option<Request>,
) -> io::Result<()> {
    match grant(stream, mr, host, req)? {
        Granted::Done => {
            let last = psn::add(req.psn, segments(req.msg_len) - 1);
            respond(stream, Response::ack(last))
        }
        Granted::Failed => Ok(()),
        Granted::Superseded(next) => {
            *pending = Some(next);
            Ok(())
        }
        Granted::Dead => respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0)),
    }
}

fn dct_request(
    dev: &DeviceShared,
    dct: &DctInner,
    stream: &TcpStream,
    req: &Request,
    epsn_by_dct: &mut HashMap<u32, u32>,
) -> io::Result<()> {
    if req.dc_key != dct.key {
        // A wrong DC key is dropped and counted, never answered.
        dct.count_violation();
        return memory::drain(stream, req.seg_len as usize);
    }
    if req.flags & FLAG_CMA != 0 {
        // The same-host path is for RC; a DC initiator never asks for it.
        return respond(stream, Response::nak(req.psn, Syndrome::InvalidRequest, 0));
    }
    // A DC initiator's stream starts at whatever PSN it sends first.
    let epsn = epsn_by_dct.entry(dct.dctn).or_insert(req.psn);
    let d = psn::diff(req.psn, *epsn);
    if d > 0 {
        memory::drain(stream, req.seg_len as usize)?;
        return respond(stream, Response::nak(*epsn, Syndrome::Sequence, 0));
    }
    let access = dct.access;
    match req.op {
        ReqOp::ReadReq => {
            if check_read(dev, dct.pd_id, req, access).is_err() {
                return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
            }
            if d == 0 {
                *epsn = psn::add(req.psn, segments(req.msg_len));
            }
            read_out(dev, stream, req, dct.pd_id, access)
        }
        ReqOp::Write => {
            if d < 0 {
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::ack(psn::add(*epsn, psn::PSN_MASK)));
            }
            let Ok(target) = check_write(dev, dct.pd_id, req, u64::from(req.seg_len), access)
            else {
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
            };
            if let Some((mr, host)) = target {
                if let Err(e) = place(stream, &mr, host, req.seg_len as usize) {
                    if e.kind() != io::ErrorKind::NotFound {
                        return Err(e);
                    }
                    return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
                }
            }
            *epsn = psn::add(req.psn, 1);
            respond(stream, Response::ack(req.psn))
        }
        _ => {
            // A DCT without a shared receive queue takes no sends.
            memory::drain(stream, req.seg_len as usize)?;
            respond(stream, Response::nak(req.psn, Syndrome::InvalidRequest, 0))
        }
    }
}
