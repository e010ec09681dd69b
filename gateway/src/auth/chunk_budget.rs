//! The process-wide budget of aws-chunked bytes held before their chunk
//! signature (or trailing checksum) has been checked.
//!
//! A signed aws-chunked body is decoded one chunk at a time: a chunk's
//! bytes are held until its signature checks out (two chunks with a
//! trailing checksum), and a chunk may declare up to 16 MiB. Before the
//! decoder makes room for a chunk, it reserves the chunk's declared size
//! here, against a limit for the whole process and a share per access key;
//! it gives the bytes back as chunks are released (and all of them when
//! the body ends or is dropped). A chunk that does not fit ends the body
//! with 503 `SlowDown`, before anything of it is buffered. So many
//! connections declaring large chunks cannot take the gateway's memory,
//! and one tenant cannot take all of the budget.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::AuthError;

/// The default limit, for the whole process: 256 MiB.
pub const DEFAULT_LIMIT: u64 = crate::config::defaults::CHUNK_BUFFER_BYTES;
/// The default share of one access key: 64 MiB.
pub const DEFAULT_PER_KEY: u64 = crate::config::defaults::CHUNK_BUFFER_PER_KEY;

/// The budget.
#[derive(Debug)]
pub struct ChunkBudget {
    limit: AtomicU64,
    per_key: AtomicU64,
    /// Bytes reserved, in all and per key (under one lock: reservations
    /// are per chunk header, not per byte).
    used: Mutex<(u64, BTreeMap<Arc<str>, u64>)>,
}

/// The process's budget.
pub fn global() -> &'static ChunkBudget {
    static BUDGET: ChunkBudget = ChunkBudget::new(DEFAULT_LIMIT, DEFAULT_PER_KEY);
    &BUDGET
}

impl ChunkBudget {
    /// A budget of `limit` bytes in all and `per_key` bytes per key.
    pub const fn new(limit: u64, per_key: u64) -> ChunkBudget {
        ChunkBudget {
            limit: AtomicU64::new(limit),
            per_key: AtomicU64::new(per_key),
            used: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// Sets the limits (at the engine's start).
    pub fn configure(&self, limit: u64, per_key: u64) {
        self.limit.store(limit, Ordering::Release);
        self.per_key.store(per_key, Ordering::Release);
    }

    /// Bytes reserved now, in all.
    pub fn used(&self) -> u64 {
        self.used.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    fn take(&self, key: &Arc<str>, n: u64) -> bool {
        let mut g = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, keys) = &mut *g;
        let mine = keys.get(key).copied().unwrap_or(0);
        let fits = total
            .checked_add(n)
            .is_some_and(|t| t <= self.limit.load(Ordering::Acquire))
            && mine
                .checked_add(n)
                .is_some_and(|m| m <= self.per_key.load(Ordering::Acquire));
        if fits {
            *total += n;
            *keys.entry(Arc::clone(key)).or_insert(0) += n;
            crate::metrics::chunk_buffer_bytes(*total);
        }
        fits
    }

    fn give(&self, key: &Arc<str>, n: u64) {
        if n == 0 {
            return;
        }
        let mut g = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, keys) = &mut *g;
        *total = total.saturating_sub(n);
        if let Some(m) = keys.get_mut(key) {
            *m = m.saturating_sub(n);
            if *m == 0 {
                keys.remove(key);
            }
        }
        crate::metrics::chunk_buffer_bytes(*total);
    }
}

/// What one body holds of a budget.
#[derive(Debug)]
pub(crate) struct Held {
    budget: &'static ChunkBudget,
    key: Arc<str>,
    bytes: u64,
}

impl Held {
    /// Nothing yet, of `budget`, for `access_key`.
    pub(crate) fn new(budget: &'static ChunkBudget, access_key: &str) -> Held {
        Held {
            budget,
            key: Arc::from(access_key),
            bytes: 0,
        }
    }

    /// Holds `target` bytes in all: reserves what is missing (503
    /// `SlowDown` when it does not fit), gives back what is over.
    pub(crate) fn hold(&mut self, target: u64) -> Result<(), AuthError> {
        if target > self.bytes {
            if !self.budget.take(&self.key, target - self.bytes) {
                crate::metrics::chunk_buffer_refused();
                return Err(AuthError::SlowDown(
                    "the gateway holds as many aws-chunked bytes awaiting their signatures as it may; retry, or send smaller chunks".into(),
                ));
            }
        } else {
            self.budget.give(&self.key, self.bytes - target);
        }
        self.bytes = target;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.give(&self.key, self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_in_all_and_per_key() {
        let b: &'static ChunkBudget = Box::leak(Box::new(ChunkBudget::new(100, 60)));
        let mut a1 = Held::new(b, "a");
        let mut a2 = Held::new(b, "a");
        let mut c = Held::new(b, "c");
        a1.hold(40).unwrap();
        // a's share is 60.
        assert_eq!(a2.hold(30).unwrap_err().code(), "SlowDown");
        a2.hold(20).unwrap();
        c.hold(40).unwrap();
        // 100 in all.
        let mut d = Held::new(b, "d");
        assert_eq!(d.hold(1).unwrap_err().status().as_u16(), 503);
        // Giving back makes room.
        a1.hold(10).unwrap();
        d.hold(30).unwrap();
        assert_eq!(b.used(), 10 + 20 + 40 + 30);
        drop((a1, a2, c, d));
        assert_eq!(b.used(), 0);
    }
}
