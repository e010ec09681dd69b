//! The connection pool: a fixed set of RC connections leased one per
//! transfer.
//!
//! The slots are a vector whose size never changes, so a lease uses its
//! slot without the pool's lock; the lock guards only the free list, the
//! live count and the closed flag. A thread that already holds a lease (a
//! transfer's callback starting another transfer) gets `Busy` instead of
//! waiting for a connection that could be its own.

use crate::connection::RcConnection;
use crate::device::RdmaDevice;
use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

thread_local! {
    static LEASES_HELD: Cell<usize> = const { Cell::new(0) };
}

/// Why no connection was leased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireError {
    /// None free, and this thread already holds one.
    Busy,
    /// The pool was closed (shutdown).
    Closed,
    /// Every connection broke and could not be replaced.
    Empty,
}

#[derive(Debug)]
struct PoolState {
    free: Vec<usize>,
    live: usize,
    closed: bool,
    /// Threads waiting in `acquire` for a connection.
    waiting: usize,
}

/// The pool.
#[derive(Debug)]
pub struct ConnectionPool {
    device: Arc<RdmaDevice>,
    slots: Vec<Mutex<Option<RcConnection>>>,
    state: Mutex<PoolState>,
    available: Condvar,
}

impl ConnectionPool {
    /// Creates `n` connections; creating fewer is a failure.
    pub fn new(device: Arc<RdmaDevice>, n: usize) -> crate::Result<ConnectionPool> {
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            slots.push(Mutex::new(Some(RcConnection::create(&device)?)));
        }
        Ok(ConnectionPool {
            device,
            slots,
            state: Mutex::new(PoolState {
                free: (0..n).rev().collect(),
                live: n,
                closed: false,
                waiting: 0,
            }),
            available: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leases a connection, waiting for one if none is free.
    pub fn acquire(&self) -> Result<Lease<'_>, AcquireError> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return Err(AcquireError::Closed);
            }
            if let Some(i) = s.free.pop() {
                drop(s);
                LEASES_HELD.with(|c| c.set(c.get() + 1));
                let conn = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
                return Ok(Lease {
                    pool: self,
                    index: i,
                    conn,
                });
            }
            if s.live == 0 {
                return Err(AcquireError::Empty);
            }
            if LEASES_HELD.with(Cell::get) > 0 {
                return Err(AcquireError::Busy);
            }
            s.waiting += 1;
            s = self.available.wait(s).unwrap_or_else(|e| e.into_inner());
            s.waiting -= 1;
        }
    }

    /// Leases a free connection without waiting and without holding its
    /// slot's lock (`Ok(None)` when none is free), for a transfer driven
    /// across `await`s ([`crate::transfer::Stepwise`]).
    pub fn try_detach(&self) -> Result<Option<DetachedLease<'_>>, AcquireError> {
        let mut s = self.lock();
        if s.closed {
            return Err(AcquireError::Closed);
        }
        match s.free.pop() {
            Some(index) => Ok(Some(DetachedLease { pool: self, index })),
            None if s.live == 0 => Err(AcquireError::Empty),
            None => Ok(None),
        }
    }

    /// Returns slot `index` to the free list, or counts it lost.
    fn give_back(&self, index: usize, lost: bool) {
        let mut s = self.lock();
        if lost {
            s.live = s.live.saturating_sub(1);
        } else {
            s.free.push(index);
        }
        drop(s);
        self.available.notify_all();
    }

    /// Takes every free connection that is connected to a server, resets
    /// it (back to INIT, no peer) and says which QP was connected to which
    /// server QP: the pairs the application may say goodbye to. Connections
    /// leased by a transfer are left alone.
    pub fn disconnect_free(&self) -> Vec<(u32, hipobj_fabric::rc::RcPeer)> {
        let mut taken = Vec::new();
        while let Ok(Some(lease)) = self.try_detach() {
            taken.push(lease);
        }
        let mut out = Vec::new();
        for lease in &taken {
            let mut slot = lease.slot();
            if let Some(conn) = slot.as_mut() {
                if let (true, Some(peer)) = (conn.is_connected(), conn.peer) {
                    out.push((conn.qp.qp_num(), peer));
                    if conn.reset(&self.device).is_err() {
                        *slot = None;
                    }
                }
            }
        }
        drop(taken);
        out
    }

    /// Fails every waiting and later `acquire` with `Closed`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.available.notify_all();
    }

    /// Connections still alive.
    pub fn live(&self) -> usize {
        self.lock().live
    }

    /// Connections free now.
    pub fn free(&self) -> usize {
        self.lock().free.len()
    }

    /// Threads waiting for a connection now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting
    }
}

/// One leased connection; returned to the pool on drop.
#[derive(Debug)]
pub struct Lease<'p> {
    pool: &'p ConnectionPool,
    index: usize,
    conn: MutexGuard<'p, Option<RcConnection>>,
}

impl Lease<'_> {
    /// Makes the connection usable: a broken one is reset, and if that
    /// fails replaced; `None` if neither worked (the pool shrinks when the
    /// lease ends).
    pub fn healthy(&mut self) -> Option<&mut RcConnection> {
        make_healthy(&self.pool.device, self.index, &mut self.conn);
        self.conn.as_mut()
    }
}

/// Resets a broken connection, or replaces it if that fails; leaves `None`
/// if neither worked.
fn make_healthy(dev: &RdmaDevice, index: usize, conn: &mut Option<RcConnection>) {
    let broken = conn.as_ref().is_none_or(|c| c.is_broken());
    if broken {
        let reset_ok = match conn.as_mut() {
            Some(c) => c.reset(dev).is_ok(),
            None => false,
        };
        if !reset_ok {
            *conn = match RcConnection::create(dev) {
                Ok(c) => {
                    tracing::warn!(slot = index, "replaced a broken RDMA connection");
                    Some(c)
                }
                Err(e) => {
                    tracing::error!(slot = index, error = %e, "a broken RDMA connection could not be replaced; the pool shrinks");
                    None
                }
            };
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        LEASES_HELD.with(|c| c.set(c.get().saturating_sub(1)));
        self.pool.give_back(self.index, self.conn.is_none());
    }
}

/// A connection taken off the free list whose slot is locked only for
/// each step that uses it (nothing else can: it is not free), so that it
/// can be held across `await`s. Returned to the pool on drop.
#[derive(Debug)]
pub struct DetachedLease<'p> {
    pool: &'p ConnectionPool,
    index: usize,
}

impl DetachedLease<'_> {
    /// The connection's slot, locked.
    pub fn slot(&self) -> MutexGuard<'_, Option<RcConnection>> {
        self.pool.slots[self.index]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the connection usable, as [`Lease::healthy`]; false if it is
    /// gone.
    pub fn healthy(&self) -> bool {
        let mut slot = self.slot();
        make_healthy(&self.pool.device, self.index, &mut slot);
        slot.is_some()
    }
}

impl Drop for DetachedLease<'_> {
    fn drop(&mut self) {
        let lost = self.slot().is_none();
        self.pool.give_back(self.index, lost);
    }
}
