//! What a soft device counts: requests its responder dropped and why,
//! accesses to registered memory in flight, same-host grants, waiting
//! deregistrations, requester connections lost, requests sent inline. A leaf: atomics only.
//!
//! The counters are how a test (or an operator) sees events a NIC would
//! show in its hardware counters, instead of guessing them from time: a
//! test waits until the responder has dropped a request, or until a grant
//! is outstanding, rather than sleeping and hoping it has. Read them with
//! [`SoftStats`], which [`SoftProvider::open_ip_observed`](super::SoftProvider::open_ip_observed)
//! hands out with the device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A soft device's counters at one instant (see [`SoftStats::now`]).
/// Totals count since the device was opened; gauges (marked so) say how
/// many there are now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftCounters {
    /// Requests dropped because their QP was not in RTR or RTS.
    pub dropped_not_ready: u64,
    /// Requests dropped because their QP is connected to another peer.
    pub dropped_other_peer: u64,
    /// Requests for a QP or DCT number that leads to nothing here (never
    /// allocated, destroyed, or on a closed device).
    pub dropped_no_target: u64,
    /// Gauge: responder threads moving bytes between a socket and a
    /// registered region, holding its guard (a WRITE or SEND segment being
    /// placed, READ data being sent, a same-host grant waiting for its done).
    pub accesses_in_flight: u64,
    /// Same-host grants given.
    pub grants: u64,
    /// Gauge: same-host grants given whose done has not come yet (their
    /// regions stay registered meanwhile).
    pub grants_outstanding: u64,
    /// Same-host grants whose requester said it could not copy.
    pub grants_failed: u64,
    /// Same-host grants whose done did not come within the done timeout:
    /// the connection was closed, and the region let go.
    pub grants_expired: u64,
    /// Gauge: deregistrations of this device's regions under way, each
    /// waiting for the accesses in flight to its region (if any) to end.
    pub deregistrations_waiting: u64,
    /// Connections of this device's requesters that ended under them
    /// (closed by the responder, or broken), not closed by the requester.
    pub requester_connections_lost: u64,
    /// Requests whose packet the posting thread sent itself, the QP being
    /// idle, instead of waking its engine.
    pub sent_inline: u64,
}

/// The live counters of one device.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    dropped_not_ready: AtomicU64,
    dropped_other_peer: AtomicU64,
    dropped_no_target: AtomicU64,
    accesses_in_flight: AtomicU64,
    grants: AtomicU64,
    grants_outstanding: AtomicU64,
    grants_failed: AtomicU64,
    grants_expired: AtomicU64,
    deregistrations_waiting: AtomicU64,
    requester_connections_lost: AtomicU64,
    sent_inline: AtomicU64,
}

/// Something counted (a total that only grows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    DroppedNotReady,
    DroppedOtherPeer,
    DroppedNoTarget,
    GrantFailed,
    GrantExpired,
    RequesterConnectionLost,
    SentInline,
}

/// A gauge: up while the returned [`Up`] lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gauge {
    AccessesInFlight,
    /// Also counts one more grant given.
    GrantsOutstanding,
    DeregistrationsWaiting,
}

impl Counters {
    /// Counts one `event`.
    pub fn count(&self, event: Event) {
        let c = match event {
            Event::DroppedNotReady => &self.dropped_not_ready,
            Event::DroppedOtherPeer => &self.dropped_other_peer,
            Event::DroppedNoTarget => &self.dropped_no_target,
            Event::GrantFailed => &self.grants_failed,
            Event::GrantExpired => &self.grants_expired,
            Event::RequesterConnectionLost => &self.requester_connections_lost,
            Event::SentInline => &self.sent_inline,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Raises `gauge` by one until the result is dropped.
    pub fn up(&self, gauge: Gauge) -> Up<'_> {
        let g = match gauge {
            Gauge::AccessesInFlight => &self.accesses_in_flight,
            Gauge::GrantsOutstanding => {
                self.grants.fetch_add(1, Ordering::Relaxed);
                &self.grants_outstanding
            }
            Gauge::DeregistrationsWaiting => &self.deregistrations_waiting,
        };
        g.fetch_add(1, Ordering::Relaxed);
        Up(g)
    }

    fn snapshot(&self) -> SoftCounters {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SoftCounters {
            dropped_not_ready: r(&self.dropped_not_ready),
            dropped_other_peer: r(&self.dropped_other_peer),
            dropped_no_target: r(&self.dropped_no_target),
            accesses_in_flight: r(&self.accesses_in_flight),
            grants: r(&self.grants),
            grants_outstanding: r(&self.grants_outstanding),
            grants_failed: r(&self.grants_failed),
            grants_expired: r(&self.grants_expired),
            deregistrations_waiting: r(&self.deregistrations_waiting),
            requester_connections_lost: r(&self.requester_connections_lost),
            sent_inline: r(&self.sent_inline),
        }
    }
}

/// A gauge raised by one; lowered on drop.
#[derive(Debug)]
pub(crate) struct Up<'a>(&'a AtomicU64);

impl Drop for Up<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A handle on one soft device's counters; it stays readable after the
/// device is closed.
#[derive(Clone, Debug)]
pub struct SoftStats(pub(crate) Arc<Counters>);

impl SoftStats {
    /// The counters now.
    pub fn now(&self) -> SoftCounters {
        self.0.snapshot()
    }

    /// Waits until `cond` holds for the counters, checking them every
    /// millisecond for at most `within`: `Ok` with the counters that
    /// satisfied it, `Err` with the last ones read when it did not hold in
    /// time. For tests, which give a generous `within`: it bounds a
    /// failure, never the time a success may take.
    pub fn wait_for(
        &self,
        within: Duration,
        cond: impl Fn(&SoftCounters) -> bool,
    ) -> Result<SoftCounters, SoftCounters> {
        let deadline = Instant::now() + within;
        loop {
            let now = self.now();
            if cond(&now) {
                return Ok(now);
            }
            if Instant::now() >= deadline {
                return Err(now);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
