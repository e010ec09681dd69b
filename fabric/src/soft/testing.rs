//! Test hooks (cargo feature `testing`, for the dev-dependencies of tests;
//! a build without the feature has none of this): [`Gate`]s that stop the
//! soft provider's own threads at a named point, so that a test can force
//! the path it names (a deregistration while a placement is really in
//! flight, a requester that takes a same-host grant and never says done)
//! instead of sleeping and hoping.
//!
//! A gate is set on the registered region that contains an address and
//! counts the times a thread reaches its point for that region; the `nth`
//! time, the thread stops there (holding what it holds at that point) until
//! the test [`open`](Gate::open)s the gate or drops it. Earlier and later
//! passes go through. Gates are process-wide (the threads of every soft
//! device in the process see them) and match by address, which is unique
//! among the live regions of one process, so tests running in parallel do
//! not see each other's gates.

use super::memory::MrInner;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Where a gate stops a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// The responder, about to move bytes of the region: place a WRITE or
    /// SEND segment from the stream, send a READ segment, or give a
    /// same-host grant. It holds the region's guard, so a deregistration
    /// waits.
    Responder,
    /// The requester, holding a same-host grant for a request whose local
    /// memory starts in the region, before it copies anything or says done.
    RequesterGrant,
}

/// The part of the region a stopped thread was about to access: `len`
/// bytes from `offset` (from the region's first byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// Offset in the region.
    pub offset: u64,
    /// Bytes the access covers (a segment, or a grant's whole range).
    pub len: u64,
}

#[derive(Debug, Default)]
struct State {
    hits: u32,
    /// Set when the `nth` pass reached the gate.
    reached: Option<Held>,
    /// The region the stopped thread holds, while it is stopped.
    holding: Option<usize>,
    /// A deregistration of the held region has started (and waits).
    deregistering: bool,
    open: bool,
}

#[derive(Debug)]
struct Inner {
    point: Point,
    addr: u64,
    nth: u32,
    state: Mutex<State>,
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn covers(&self, mr: &MrInner) -> bool {
        self.addr >= mr.iova && self.addr - mr.iova < mr.len as u64
    }

    fn wait_until(&self, within: Duration, done: impl Fn(&State) -> bool) -> MutexGuard<'_, State> {
        let deadline = Instant::now() + within;
        let mut s = self.lock();
        while !done(&s) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        s
    }
}

static GATES: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn gates() -> MutexGuard<'static, Vec<Weak<Inner>>> {
    GATES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A gate on the region that contains an address; see the module's text.
/// Dropping it opens it and removes it.
#[derive(Debug)]
pub struct Gate(Arc<Inner>);

impl Gate {
    fn set(point: Point, addr: u64, nth: u32) -> Gate {
        let inner = Arc::new(Inner {
            point,
            addr,
            nth: nth.max(1),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let mut all = gates();
        all.retain(|g| g.strong_count() > 0);
        all.push(Arc::downgrade(&inner));
        Gate(inner)
    }

    /// Stops the responder the `nth` time (from 1) it is about to move
    /// bytes of the region containing `addr`: a segment placed from the
    /// stream or sent as READ data, or a same-host grant given (each counts
    /// one). It stops holding the region's guard, so a deregistration of
    /// the region waits for the gate, and before it has read or written
    /// any byte of that access.
    pub fn responder(addr: u64, nth: u32) -> Gate {
        Gate::set(Point::Responder, addr, nth)
    }

    /// Stops the requester the `nth` time (from 1) it takes a same-host
    /// grant for a request whose local memory starts in the region
    /// containing `addr`: it has the grant, has copied nothing and has not
    /// said done, so the responder keeps its region registered waiting.
    pub fn requester_grant(addr: u64, nth: u32) -> Gate {
        Gate::set(Point::RequesterGrant, addr, nth)
    }

    /// Waits at most `within` for a thread to reach the gate; what it was
    /// about to access, once it has.
    pub fn reached(&self, within: Duration) -> Option<Held> {
        self.0.wait_until(within, |s| s.reached.is_some()).reached
    }

    /// Waits at most `within` until a deregistration of the region the
    /// stopped thread holds has started (it then waits for the gate);
    /// whether it has.
    pub fn deregistering(&self, within: Duration) -> bool {
        self.0.wait_until(within, |s| s.deregistering).deregistering
    }

    /// Lets the stopped thread (and every later one) go on.
    pub fn open(&self) {
        self.0.lock().open = true;
        self.0.changed.notify_all();
    }

    /// How many times a thread passed or reached the gate.
    pub fn hits(&self) -> u32 {
        self.0.lock().hits
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
        let me = Arc::as_ptr(&self.0);
        gates().retain(|g| g.strong_count() > 0 && g.as_ptr() != me);
    }
}

fn matching(point: Point, mr: &MrInner) -> Vec<Arc<Inner>> {
    gates()
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|g| g.point == point && g.covers(mr))
        .collect()
}

fn pass(point: Point, mr: &MrInner, host: usize, len: usize) {
    for g in matching(point, mr) {
        let mut s = g.lock();
        s.hits += 1;
        if s.hits != g.nth || s.open {
            continue;
        }
        s.reached = Some(Held {
            offset: mr.offset_of(host),
            len: len as u64,
        });
        s.holding = Some(mr as *const MrInner as usize);
        g.changed.notify_all();
        while !s.open {
            s = g.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.holding = None;
    }
}

/// The responder is about to move `len` bytes at `host` of `mr`, holding
/// its guard.
pub(crate) fn responder_access(mr: &MrInner, host: usize, len: usize) {
    pass(Point::Responder, mr, host, len);
}

/// The requester has taken a same-host grant for `len` bytes of local
/// memory at `host` of `mr`.
pub(crate) fn requester_grant(mr: &MrInner, host: usize, len: usize) {
    pass(Point::RequesterGrant, mr, host, len);
}

/// `mr` is about to be deregistered (its guard taken for writing).
pub(crate) fn retiring(mr: &MrInner) {
    let me = mr as *const MrInner as usize;
    for g in gates().iter().filter_map(Weak::upgrade) {
        let mut s = g.lock();
        if s.holding == Some(me) {
            s.deregistering = true;
            g.changed.notify_all();
        }
    }
}
