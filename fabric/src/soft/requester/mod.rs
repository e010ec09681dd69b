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
use super::shared::QpInner;
use crate::error::{FabricError, Result};
use crate::types::{QpType, WcStatus};
use connect::{connect, endpoint};
use packets::next_packet;
use receiver::{fail_at, on_timeout};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};
use transmit::{transmit, transmit_cma, TxError};
use window::{ack_timeout, drop_conn, wait};

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
