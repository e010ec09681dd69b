//! The requester side of a software QP in RTS.
//!
//! One engine thread per QP sends segments in PSN order (up to a window of
//! `window::WINDOW` unacknowledged segments, and up to `max_rd_atomic` READs),
//! runs the local ACK timer and retransmits go-back-N from the oldest
//! unacknowledged PSN; after `retry_cnt` silent timeouts in a row the head
//! request completes with RETRY_EXC_ERR. A receiver thread per connection
//! reads ACKs, NAKs and READ responses, placing READ data straight into the
//! local memory, and completes requests in order.

// In dependency order: each module uses only those above it.
mod connect;
mod packets;
mod receiver;
mod transmit;
mod window;

use super::completion::vendor_err;
use super::shared::{QpCore, QpInner, ReqConn};
use crate::error::{FabricError, Result};
use crate::types::{QpType, WcStatus};
use connect::{connect, endpoint};
use packets::next_packet;
use receiver::{fail_at, on_timeout};
use std::net::Shutdown;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};
use transmit::{transmit, transmit_cma, TxError};
use window::{ack_timeout, drop_conn, idle_deadline, outstanding, unsent, wait, CMA_MIN};

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
        if g.tx_active {
            // A posting thread is sending inline: it wakes the engine when
            // it is done if anything is left to send.
            let idle = !unsent(&g);
            g = sleep(&qp, g, idle);
            continue;
        }
        // An RC QP with something to send connects before it makes the
        // packet, so that the packet can take the same-host path, which the
        // responder's answer to the hello offers: made first, the first
        // packet of every connection went by the stream (for hipobj-rc-v2,
        // which opens a connection per transfer, every transfer of up to a
        // segment, and the first segment of the rest). A DC initiator
        // learns its target from the packet, so it connects after.
        let mut tried = false;
        if qp.qp_type == QpType::Rc && g.conn.is_none() && unsent(&g) {
            let Some((again, _)) = open_conn(&qp, g, gen) else {
                return;
            };
            g = again;
            tried = true;
        }
        let cma = qp.qp_type == QpType::Rc && g.conn.as_ref().is_some_and(|c| c.cma().is_some());
        let Some(out) = next_packet(&mut g, cma) else {
            g = sleep(&qp, g, true);
            continue;
        };
        let conn = match g.conn.clone() {
            Some(c) => Some(c),
            // Tried just now, and failed: the packet goes nowhere and the
            // ACK timer resends it, as when the connection is opened here.
            None if tried => None,
            None => {
                let Some((again, c)) = open_conn(&qp, g, gen) else {
                    return;
                };
                g = again;
                c
            }
        };
        let sent = send_outside(&qp, g, gen, conn.as_ref(), out.req.psn, || match &conn {
            None => Err(TxError::Unreachable),
            Some(c) if out.cma => transmit_cma(&qp, c, &out, gen),
            Some(c) => transmit(&qp, c, &out),
        });
        match sent {
            Some(next) => g = next,
            None => return,
        }
    }
}

/// The least time the opening of a connection (TCP's connect, then the
/// hello and its answer) is given. Hardware has no such step: a responder
/// that answers late on a loaded host is no lost packet, and with a
/// scaled-down ACK timeout (6.7 ms for code 14 at a tenth) such an answer
/// cost a retry each time, down to RETRY_EXC_ERR with the responder never
/// reached. A peer that accepts and never answers costs this much per
/// retry.
const OPEN_MIN: Duration = Duration::from_millis(250);
/// The most it is given; between the two, the ACK timeout.
const OPEN_MAX: Duration = Duration::from_secs(2);

/// Opens the QP's connection to its peer outside the lock and records it
/// (`None` in it when the peer cannot be reached); the lock again and the
/// connection, or `None` when the QP left generation `gen` meanwhile (the
/// new connection is shut down).
fn open_conn<'a>(
    qp: &'a Arc<QpInner>,
    g: MutexGuard<'a, QpCore>,
    gen: u64,
) -> Option<(MutexGuard<'a, QpCore>, Option<Arc<ReqConn>>)> {
    let to = endpoint(qp, &g);
    let limit = ack_timeout(qp, &g).map_or(OPEN_MAX, |t| t.clamp(OPEN_MIN, OPEN_MAX));
    drop(g);
    let c = to.and_then(|(addr, dst)| connect(qp, gen, addr, dst, limit));
    let mut g = qp.lock();
    if g.gen != gen {
        if let Some(c) = c {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        return None;
    }
    g.conn.clone_from(&c);
    Some((g, c))
}

/// The engine waits for news (a post, an ACK, a NAK, a grant, the timer);
/// `idle`: with nothing to send, so that news which gives it nothing to
/// send need not wake it.
fn sleep<'a>(qp: &'a QpInner, mut g: MutexGuard<'a, QpCore>, idle: bool) -> MutexGuard<'a, QpCore> {
    g.engine_idle = idle;
    let deadline = idle_deadline(qp, &g);
    let mut g = wait(qp, g, deadline);
    g.engine_idle = false;
    g
}

/// Writes one packet to the connection with `send`, outside the lock, for
/// the engine and an inline sender alike: the QP is busy meanwhile (the
/// segment's memory is read outside the lock, and a completion that would
/// let the application reuse it waits: `QpInner::deliver`), and no other
/// thread starts a packet (`tx_active`). Then [`settle`]. The lock again,
/// or `None` when the QP left this generation meanwhile.
fn send_outside<'a>(
    qp: &'a QpInner,
    mut g: MutexGuard<'a, QpCore>,
    gen: u64,
    conn: Option<&Arc<ReqConn>>,
    psn: u32,
    send: impl FnOnce() -> std::result::Result<(), TxError>,
) -> Option<MutexGuard<'a, QpCore>> {
    qp.busy(&mut g);
    g.tx_active = true;
    drop(g);
    let res = send();
    let mut g = qp.lock();
    qp.unbusy(&mut g);
    if g.gen != gen {
        return None;
    }
    g.tx_active = false;
    settle(qp, &mut g, res, conn, psn);
    Some(g)
}

/// What follows a transmission: an I/O error drops the connection (the ACK
/// timer resends), a local key error fails the request and moves the QP to
/// ERR, and the ACK timer starts if it was not running.
fn settle(
    qp: &QpInner,
    g: &mut QpCore,
    res: std::result::Result<(), TxError>,
    conn: Option<&Arc<ReqConn>>,
    psn: u32,
) {
    match res {
        Ok(()) | Err(TxError::Unreachable) => {}
        Err(TxError::Io) => drop_conn(g, conn.map(|c| c.id)),
        Err(TxError::LocalKey) => {
            drop_conn(g, conn.map(|c| c.id));
            fail_at(qp, g, psn, WcStatus::LocProtErr, vendor_err::LOCAL_KEY);
            return;
        }
    }
    if g.timer.is_none() {
        g.timer = ack_timeout(qp, g).map(|t| Instant::now() + t);
    }
}

/// The largest request a posting thread sends itself (below the same-host
/// path's threshold, so always one packet over the stream, and small enough
/// that an idle connection's socket buffer takes it without blocking).
const INLINE_MAX: u64 = CMA_MIN - 1;

/// Hands a just-posted request to the wire. When the RC QP is idle (its
/// connection is up, nothing is unacknowledged or being sent, no RNR wait)
/// and the request is small, the posting thread sends its packet itself:
/// one thread hand-off fewer on the way to the peer than waking the engine
/// (the engine still owns the timer, retransmission and everything else).
/// Otherwise the engine is woken, as before.
pub(crate) fn post(qp: &QpInner, mut g: MutexGuard<'_, QpCore>, len: u64) {
    let idle = qp.qp_type == QpType::Rc
        && g.state == crate::QpState::Rts
        && len <= INLINE_MAX
        && !g.tx_active
        && g.rnr_until.is_none()
        && !outstanding(&g)
        && g.sq.len() == 1;
    let conn = g.conn.clone().filter(|_| idle);
    let out = match &conn {
        Some(_) => next_packet(&mut g, false),
        None => None,
    };
    let (Some(conn), Some(out)) = (conn, out) else {
        drop(g);
        qp.wake.notify_all();
        return;
    };
    debug_assert!(!out.cma);
    let gen = g.gen;
    let sent = send_outside(qp, g, gen, Some(&conn), out.req.psn, || {
        qp.dev.stats.count(crate::soft::stats::Event::SentInline);
        transmit(qp, &conn, &out)
    });
    let Some(g) = sent else {
        return;
    };
    // The engine, asleep meanwhile, picks up whatever else was posted; a
    // timer started here fires by its bounded sleep (window::idle_deadline).
    if unsent(&g) || !g.engine_idle {
        drop(g);
        qp.wake.notify_all();
    }
}
