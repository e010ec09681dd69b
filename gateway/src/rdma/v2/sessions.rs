//! hipobj-rc-v2 sessions: what a PREPARE set up (a server QP connected to
//! the client's, for a PUT a staging region), found again by its 128-bit
//! random id, bound to the access key that signed the PREPARE, limited in
//! all and per key, and on a timer in every state:
//!
//! - **Prepared**: waiting for READY until the prepare deadline; the reaper
//!   frees it after that (its QP goes to ERR, then QP, region and PD go).
//! - **Transferring**: a READY owns it; the READY's own deadline (the
//!   execute timer) ends the data phase, and the reaper frees a session
//!   still there well past it.
//!
//! A session leaves the table when its READY ends (whatever the outcome: a
//! READY is never replayed), when it is cancelled, or when reaped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hipobj_fabric::rc::{self, RcPeer};
use hipobj_fabric::{ProtectionDomain, RegisteredBuffer};
use hipobj_wire::rc_v2::{Cookie, Op, Psn, SessionId, Span, Target};

use super::budget::Reservation;
use crate::rdma::pairs::Pair;

/// How long past its execute deadline a transferring session may stay
/// before the reaper frees it anyway (the READY that owns it ends at the
/// deadline; this is the safety net).
pub const TRANSFER_GRACE: Duration = Duration::from_secs(30);

/// A PUT's staging region, in a protection domain of its own: only the
/// session's QP can reach it, whatever rkey another client learns.
#[derive(Debug)]
pub struct PutRegion {
    /// The region (registered local and remote write).
    pub buf: RegisteredBuffer,
    /// Its PD (dropped after the region and the QP).
    pub pd: ProtectionDomain,
    /// The bytes it holds of the budget.
    pub reservation: Reservation,
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting for READY until then.
    Prepared(Instant),
    /// A READY is moving the bytes; it ends by then.
    Transferring(Instant),
}

/// One session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// The access key that prepared it.
    pub owner: String,
    /// The cookie (the RDMA immediate).
    pub cookie: Cookie,
    /// GET or PUT.
    pub op: Op,
    /// The object.
    pub target: Target,
    /// The bytes.
    pub span: Span,
    /// The client's QP.
    pub client: RcPeer,
    /// The server's first PSN.
    pub server_psn: Psn,
    /// The device (rail index).
    pub rail: usize,
    /// The server QP and its CQ. Declared before `region`: dropped first.
    pub pair: Arc<Pair>,
    /// A PUT's region.
    pub region: Option<PutRegion>,
    state: Mutex<State>,
}

impl Session {
    /// A prepared session, waiting for READY until `until`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: SessionId,
        owner: &str,
        prepare: &hipobj_wire::rc_v2::Prepare,
        client: RcPeer,
        server_psn: Psn,
        rail: usize,
        pair: Arc<Pair>,
        region: Option<PutRegion>,
        until: Instant,
    ) -> Session {
        Session {
            id,
            owner: owner.to_string(),
            cookie: prepare.cookie,
            op: prepare.op,
            target: prepare.target.clone(),
            span: prepare.span,
            client,
            server_psn,
            rail,
            pair,
            region,
            state: Mutex::new(State::Prepared(until)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its state now.
    pub fn state(&self) -> State {
        *self.lock()
    }

    /// Prepared to transferring (a READY takes it), ending by `until`;
    /// false if it was not prepared (a READY already took it).
    pub fn begin(&self, until: Instant) -> bool {
        let mut s = self.lock();
        match *s {
            State::Prepared(_) => {
                *s = State::Transferring(until);
                true
            }
            State::Transferring(_) => false,
        }
    }

    /// Stops every RDMA on its QP (ERR: anything posted is flushed, and the
    /// client's writes are no longer accepted).
    pub fn stop(&self) {
        let _ = rc::to_error(&self.pair.qp);
    }

    fn expired(&self, now: Instant) -> bool {
        match self.state() {
            State::Prepared(until) => now >= until,
            State::Transferring(until) => now >= until + TRANSFER_GRACE,
        }
    }
}

/// Why a session was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionLimit {
    /// The access key holds its limit.
    #[error("the access key holds {0} hipobj-rc-v2 sessions (the limit)")]
    PerKey(usize),
    /// The server holds its limit.
    #[error("the server holds {0} hipobj-rc-v2 sessions (the limit)")]
    Total(usize),
}

/// The table.
#[derive(Debug)]
pub struct Sessions {
    map: Mutex<HashMap<SessionId, Arc<Session>>>,
    total: usize,
    per_key: usize,
}

impl Sessions {
    /// An empty table admitting `total` sessions, `per_key` per key.
    pub fn new(total: usize, per_key: usize) -> Sessions {
        Sessions {
            map: Mutex::new(HashMap::new()),
            total,
            per_key,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check(&self, m: &HashMap<SessionId, Arc<Session>>, key: &str) -> Result<(), SessionLimit> {
        let mine = m.values().filter(|s| s.owner == key).count();
        if mine >= self.per_key {
            return Err(SessionLimit::PerKey(mine));
        }
        if m.len() >= self.total {
            return Err(SessionLimit::Total(m.len()));
        }
        Ok(())
    }

    /// Whether `key` may prepare one more (checked again by `insert`).
    pub fn admits(&self, key: &str) -> Result<(), SessionLimit> {
        self.check(&self.lock(), key)
    }

    /// Adds a session, within the limits.
    pub fn insert(&self, s: Arc<Session>) -> Result<(), SessionLimit> {
        let mut m = self.lock();
        self.check(&m, &s.owner)?;
        m.insert(s.id, s);
        Ok(())
    }

    /// The session `id` if `key` owns it. Another key's session is not
    /// told apart from none.
    pub fn get(&self, id: &SessionId, key: &str) -> Option<Arc<Session>> {
        self.lock().get(id).filter(|s| s.owner == key).cloned()
    }

    /// Takes the session `id` out of the table, if it is still `s`.
    pub fn remove(&self, s: &Arc<Session>) {
        let mut m = self.lock();
        if m.get(&s.id).is_some_and(|t| Arc::ptr_eq(t, s)) {
            m.remove(&s.id);
        }
    }

    /// Cancels `key`'s session `id` if it is prepared (one a READY holds
    /// finishes under its own timer); whether one was cancelled.
    pub fn cancel(&self, id: &SessionId, key: &str) -> bool {
        let mut m = self.lock();
        let Some(s) = m.get(id).filter(|s| s.owner == key) else {
            return false;
        };
        if !matches!(s.state(), State::Prepared(_)) {
            return false;
        }
        let s = s.clone();
        m.remove(id);
        drop(m);
        s.stop();
        true
    }

    /// Frees the sessions past their timers; how many.
    pub fn reap(&self, now: Instant) -> usize {
        let gone: Vec<Arc<Session>> = {
            let mut m = self.lock();
            let ids: Vec<SessionId> = m
                .iter()
                .filter(|(_, s)| s.expired(now))
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| m.remove(id)).collect()
        };
        for s in &gone {
            tracing::info!(
                session = %short(&s.id),
                state = ?s.state(),
                "hipobj-rc-v2 session reaped: its timer ran out"
            );
            s.stop();
        }
        gone.len()
    }
}

/// The first 8 hex digits of a session id, for logs (the id is a bearer
/// of nothing without its key's signature, but whole ids stay out of logs
/// as tokens do).
pub fn short(id: &SessionId) -> String {
    id.to_string().chars().take(8).collect()
}
