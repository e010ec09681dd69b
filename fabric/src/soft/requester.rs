//! The requester side of a software QP in RTS.
//!
//! One engine thread per QP sends segments in PSN order (up to a window of
//! [`WINDOW`] unacknowledged segments, and up to `max_rd_atomic` READs),
//! runs the local ACK timer and retransmits go-back-N from the oldest
//! unacknowledged PSN; after `retry_cnt` silent timeouts in a row the head
//! request completes with RETRY_EXC_ERR. A receiver thread per connection
//! reads ACKs, NAKs and READ responses, placing READ data straight into the
//! local memory, and completes requests in order.

use super::cma;
use super::memory::{self, dead_region, walk, KeyError, Piece};
use super::packet::{
    Hello, HelloAck, ReqOp, Request, RespOp, Response, Syndrome, CMA_FAILED, CMA_GRANT_LEN,
    FLAG_CMA, FLAG_FIRST, FLAG_LAST, HELLO_ACK_LEN, MAX_CMA_WRITE, RESPONSE_LEN, SEGMENT,
};
use super::qp::{vendor_err, CmaGrant, QpCore, QpInner, ReqConn};
use super::{psn, timers};
use crate::error::{FabricError, Result};
use crate::types::{QpType, SendOp, Sge, WcStatus};
use std::net::{Shutdown, SocketAddrV4, TcpStream};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// Unacknowledged WRITE/SEND segments in flight per QP.
pub(crate) const WINDOW: i32 = 8;
/// The smallest request the same-host path carries: below it, the grant's
/// extra round trip costs more than the copy it saves, and the stream is
/// faster.
pub(crate) const CMA_MIN: u64 = 64 << 10;

/// Starts the engine for generation `gen`.
pub(crate) fn start(qp: Arc<QpInner>, gen: u64) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("soft-qp-{:x}", qp.qpn))
        .spawn(move || engine(qp, gen))
        .map(|_| ())
        .map_err(|e| FabricError::Os {
            verb: "modify_qp (spawn requester)",
            source: e,
        })
}

/// One packet the engine is about to send.
#[derive(Debug)]
struct Outgoing {
    req: Request,
    sges: Vec<Sge>,
    /// Offset of the payload in the message.
    off: u64,
    /// By the same-host path (see [`transmit_cma`]).
    cma: bool,
}

enum TxError {
    Unreachable,
    Io,
    LocalKey,
}

fn ack_timeout(qp: &QpInner, g: &QpCore) -> Option<Duration> {
    timers::local_ack_timeout(g.attr.timeout, qp.dev.config.timeout_scale)
}

fn outstanding(g: &QpCore) -> bool {
    psn::diff(g.sent_hi, g.una) > 0
}

fn engine(qp: Arc<QpInner>, gen: u64) {
    let mut g = qp.lock();
    loop {
        if g.gen != gen || g.state != crate::QpState::Rts {
            return;
        }
        let now = Instant::now();
        if let Some(t) = g.timer {
            if now >= t {
                on_timeout(&qp, &mut g);
                continue;
            }
        }
        if let Some(r) = g.rnr_until {
            if now < r {
                g = wait(&qp, g, Some(r));
                continue;
            }
            g.rnr_until = None;
        }
        let cma = qp.qp_type == QpType::Rc && g.conn.as_ref().is_some_and(|c| c.cma().is_some());
        let Some(out) = next_packet(&mut g, cma) else {
            let deadline = g.timer;
            g = wait(&qp, g, deadline);
            continue;
        };
        let conn = match g.conn.clone() {
            Some(c) => Some(c),
            None => {
                let to = endpoint(&qp, &g);
                let limit = ack_timeout(&qp, &g)
                    .unwrap_or(Duration::from_secs(2))
                    .min(Duration::from_secs(2));
                drop(g);
                let c = to.and_then(|(addr, dst)| connect(&qp, gen, addr, dst, limit));
                g = qp.lock();
                if g.gen != gen {
                    if let Some(c) = c {
                        let _ = c.stream.shutdown(Shutdown::Both);
                    }
                    return;
                }
                g.conn.clone_from(&c);
                c
            }
        };
        // The segment's memory is read outside the lock: a completion that
        // would let the application reuse it waits (QpInner::deliver).
        qp.busy(&mut g);
        drop(g);
        let res = match &conn {
            None => Err(TxError::Unreachable),
            Some(c) if out.cma => transmit_cma(&qp, c, &out, gen),
            Some(c) => transmit(&qp, c, &out),
        };
        g = qp.lock();
        qp.unbusy(&mut g);
        if g.gen != gen {
            return;
        }
        match res {
            Ok(()) | Err(TxError::Unreachable) => {}
            Err(TxError::Io) => drop_conn(&mut g, conn.as_ref().map(|c| c.id)),
            Err(TxError::LocalKey) => {
                drop_conn(&mut g, conn.as_ref().map(|c| c.id));
                fail_at(
                    &qp,
                    &mut g,
                    out.req.psn,
                    WcStatus::LocProtErr,
                    vendor_err::LOCAL_KEY,
                );
                continue;
            }
        }
        if g.timer.is_none() {
            g.timer = ack_timeout(&qp, &g).map(|t| Instant::now() + t);
        }
    }
}

fn wait<'a>(
    qp: &'a QpInner,
    g: MutexGuard<'a, QpCore>,
    deadline: Option<Instant>,
) -> MutexGuard<'a, QpCore> {
    match deadline {
        None => qp.wake.wait(g).unwrap_or_else(|e| e.into_inner()),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            qp.wake
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0
        }
    }
}

fn drop_conn(g: &mut QpCore, id: Option<u64>) {
    if g.conn.as_ref().map(|c| c.id) == id {
        if let Some(c) = g.conn.take() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Where the responder's device listens: the GID's IPv4 address, and the
/// port in the upper 16 bits of the responder's QP (or DCT) number; and
/// that number.
fn endpoint(qp: &QpInner, g: &QpCore) -> Option<(SocketAddrV4, u32)> {
    let (gid, qpn) = match qp.qp_type {
        QpType::Rc => (g.attr.ah_attr.grh?.dgid, g.attr.dest_qp_num),
        QpType::DcInitiator => {
            let t = g.dc_target?;
            (t.gid, t.dct_num)
        }
    };
    let port = (qpn >> 8) as u16;
    (port != 0).then_some((SocketAddrV4::new(gid.ipv4()?, port), qpn))
}

/// Opens a connection from this device's address to `addr` and completes
/// the hello: `None` unless a soft device answered it within `limit`.
fn open_stream(
    qp: &QpInner,
    addr: SocketAddrV4,
    dst_qpn: u32,
    limit: Duration,
) -> Option<(TcpStream, HelloAck)> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        tracing::debug!(qpn = format_args!("{:#x}", qp.qpn), %addr, error = %e, "soft requester: {what}");
    };
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| fail("socket", &e))
        .ok()?;
    // From the device's own address, which the responder checks against
    // the GID the hello claims.
    sock.bind(&SocketAddrV4::new(qp.dev.ip, 0).into())
        .map_err(|e| fail("bind", &e))
        .ok()?;
    sock.connect_timeout(&addr.into(), limit)
        .map_err(|e| fail("cannot reach its peer", &e))
        .ok()?;
    let stream: TcpStream = sock.into();
    let _ = stream.set_nodelay(true);
    let hello = Hello {
        src_gid: qp.dev.gid,
        src_qpn: qp.qpn,
        dst_qpn,
    };
    memory::send_bytes(&stream, &hello.encode(), false)
        .map_err(|e| fail("hello not sent", &e))
        .ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    let ack = memory::read_header::<HELLO_ACK_LEN>(&stream);
    let ack = match ack {
        Ok(Some(b)) if HelloAck::decode(&b).is_some() => HelloAck::decode(&b)?,
        other => {
            fail(
                "the peer did not answer the hello",
                &format_args!("{other:?}"),
            );
            let _ = stream.shutdown(Shutdown::Both);
            return None;
        }
    };
    stream.set_read_timeout(None).ok()?;
    Some((stream, ack))
}

/// The responder's process for the same-host path, if it offered the path,
/// this device uses it, and that process holds the far end of `stream`.
fn cma_peer(qp: &QpInner, stream: &TcpStream, ack: HelloAck) -> Option<u32> {
    if !ack.cma || !qp.dev.config.cma || qp.qp_type != QpType::Rc {
        return None;
    }
    let local = stream
        .peer_addr()
        .is_ok_and(|p| cma::is_local(p.ip(), std::net::IpAddr::V4(qp.dev.ip)));
    if local && cma::peer_process_holds(stream, ack.pid) {
        return Some(ack.pid);
    }
    tracing::debug!(
        qpn = format_args!("{:#x}", qp.qpn),
        pid = ack.pid,
        "soft requester: same-host path offered by a process that does not hold the connection; not used"
    );
    None
}

fn connect(
    qp: &Arc<QpInner>,
    gen: u64,
    addr: SocketAddrV4,
    dst_qpn: u32,
    limit: Duration,
) -> Option<Arc<ReqConn>> {
    let (stream, ack) = open_stream(qp, addr, dst_qpn, limit)?;
    let reader = stream.try_clone().ok()?;
    let cma_pid = cma_peer(qp, &stream, ack);
    let conn = Arc::new(ReqConn {
        id: qp.dev.next_id(),
        stream,
        cma_pid,
        cma_live: std::sync::atomic::AtomicBool::new(cma_pid.is_some()),
    });
    let (q, c) = (qp.clone(), conn.clone());
    std::thread::Builder::new()
        .name(format!("soft-qp-{:x}-rx", qp.qpn))
        .spawn(move || receive(q, gen, c, reader))
        .ok()?;
    Some(conn)
}

fn next_packet(g: &mut QpCore, cma: bool) -> Option<Outgoing> {
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
            next = if cma && matches!(op, SendOp::RdmaWrite(_)) && covered >= CMA_MIN {
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

/// Makes the engine send again from `p` (over the stream: the same-host
/// path is off for the connection), unless it has gone back further.
fn resend_from(qp: &QpInner, gen: u64, p: u32) {
    let mut g = qp.lock();
    if g.gen == gen && psn::diff(g.send_psn, p) > 0 {
        g.send_psn = p;
    }
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
fn transmit_cma(qp: &QpInner, conn: &ReqConn, out: &Outgoing, gen: u64) -> Result<(), TxError> {
    let Some(pid) = conn.cma() else {
        // Turned off since the packet was made: send it again the usual way.
        resend_from(qp, gen, out.req.psn);
        return Ok(());
    };
    let read = out.req.op == ReqOp::ReadReq;
    let mut req = out.req;
    req.src_qpn = qp.qpn;
    req.src_gid = qp.dev.gid;
    let limit = {
        let mut g = qp.lock();
        req.dst_qpn = g.attr.dest_qp_num;
        g.cma_nonce = g.cma_nonce.wrapping_add(1);
        req.imm = g.cma_nonce;
        ack_timeout(qp, &g).unwrap_or(Duration::from_secs(2))
    };
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
        let awaited =
            |gr: &CmaGrant| gr.conn == conn.id && gr.psn == req.psn && gr.nonce == req.imm;
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
        rkey: req.imm,
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
            super::count_cma_bytes(len);
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

fn transmit(qp: &QpInner, conn: &ReqConn, out: &Outgoing) -> Result<(), TxError> {
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
    qp.wake.notify_all();
}

fn on_timeout(qp: &QpInner, g: &mut QpCore) {
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
fn fail_at(qp: &QpInner, g: &mut QpCore, p: u32, status: WcStatus, verr: u32) {
    advance_to(qp, g, p);
    qp.fail_head(g, status, verr);
}

fn receive(qp: Arc<QpInner>, gen: u64, conn: Arc<ReqConn>, stream: TcpStream) {
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
