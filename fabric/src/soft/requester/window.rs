//! The send window's bookkeeping that the engine, the transmitters and the
//! receiver share: its size, whether anything is outstanding, the local
//! ACK timer, waiting on the QP, dropping a connection, going back to a PSN.

use crate::soft::psn;
use crate::soft::shared::{QpCore, QpInner};
use crate::soft::timers;
use std::net::Shutdown;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// Unacknowledged WRITE/SEND segments in flight per QP.
pub(super) const WINDOW: i32 = 8;
/// The smallest request the same-host path carries: below it, the grant's
/// extra round trip costs more than the copy it saves, and the stream is
/// faster.
pub(super) const CMA_MIN: u64 = 64 << 10;

pub(super) fn ack_timeout(qp: &QpInner, g: &QpCore) -> Option<Duration> {
    timers::local_ack_timeout(g.attr.timeout, qp.dev.config.timeout_scale)
}

pub(super) fn outstanding(g: &QpCore) -> bool {
    psn::diff(g.sent_hi, g.una) > 0
}

/// Posted segments not transmitted yet (or to be transmitted again).
pub(super) fn unsent(g: &QpCore) -> bool {
    psn::diff(g.next_psn, g.send_psn) > 0
}

/// Until when the engine sleeps with nothing to send: the ACK timer's
/// expiry, or with no timer running, one timeout from now. A posting thread
/// may send a packet and start the timer while the engine sleeps (see
/// [`super::post`]) without waking it; a timer started after the engine fell
/// asleep expires after the sleep ends, so the engine, awake by then, fires
/// it on time. The sleep is never under 1 ms, so that an idle QP with a
/// scaled-down timer does not spin (its timer may then fire up to 1 ms
/// late, well inside the IB specification's bound: up to four times the
/// nominal timeout).
pub(super) fn idle_deadline(qp: &QpInner, g: &QpCore) -> Option<Instant> {
    if g.timer.is_some() {
        return g.timer;
    }
    ack_timeout(qp, g).map(|t| Instant::now() + t.max(Duration::from_millis(1)))
}

pub(super) fn wait<'a>(
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

pub(super) fn drop_conn(g: &mut QpCore, id: Option<u64>) {
    if g.conn.as_ref().map(|c| c.id) == id {
        if let Some(c) = g.conn.take() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Makes the engine send again from `p` (over the stream: the same-host
/// path is off for the connection), unless it has gone back further.
pub(super) fn resend_from(qp: &QpInner, gen: u64, p: u32) {
    let mut g = qp.lock();
    if g.gen == gen && psn::diff(g.send_psn, p) > 0 {
        g.send_psn = p;
    }
}
