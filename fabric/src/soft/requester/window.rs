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
