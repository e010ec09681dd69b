//! The bytes of hipobj-rc-v2 PUT staging regions: a PUT's client writes
//! its whole object (or part) into one registered region at once, so each
//! region is as large as its transfer. Regions are counted in all and per
//! access key; a PUT larger than a key may hold at all is refused for
//! good (413, with the largest size served), one that does not fit now is
//! refused for a while (503, retry). Nothing waits here: the PREPARE that
//! asks answers at once, and the prepare timer frees what it held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why a region's bytes were not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// Larger than one key may ever hold: split it (the largest size
    /// served).
    #[error("a hipobj-rc-v2 PUT stages at most {0} bytes at once")]
    TooLarge(u64),
    /// Not now: other sessions hold the bytes.
    #[error("the hipobj-rc-v2 PUT staging is in use (in all or by this access key)")]
    Busy,
}

#[derive(Debug, Default)]
struct Used {
    total: u64,
    by_key: HashMap<String, u64>,
}

/// The budget.
#[derive(Debug)]
pub struct PutBudget {
    total: u64,
    per_key: u64,
    used: Mutex<Used>,
}

/// Bytes granted to one session, given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<PutBudget>,
    key: String,
    bytes: u64,
}

impl PutBudget {
    /// `total` bytes in all, `per_key` (at most `total`) per access key.
    pub fn new(total: u64, per_key: u64) -> Arc<PutBudget> {
        Arc::new(PutBudget {
            total,
            per_key: per_key.min(total),
            used: Mutex::new(Used::default()),
        })
    }

    /// The largest PUT served at once.
    pub fn largest(&self) -> u64 {
        self.per_key
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes held now, in all.
    pub fn in_use(&self) -> u64 {
        self.lock().total
    }

    /// Grants `bytes` to `key`, or says why not.
    pub fn reserve(self: &Arc<Self>, key: &str, bytes: u64) -> Result<Reservation, BudgetError> {
        if bytes > self.per_key {
            return Err(BudgetError::TooLarge(self.per_key));
        }
        let mut u = self.lock();
        let mine = u.by_key.get(key).copied().unwrap_or(0);
        let fits = u.total.checked_add(bytes).is_some_and(|t| t <= self.total)
            && mine.checked_add(bytes).is_some_and(|m| m <= self.per_key);
        if !fits {
            return Err(BudgetError::Busy);
        }
        u.total += bytes;
        *u.by_key.entry(key.to_string()).or_insert(0) += bytes;
        Ok(Reservation {
            budget: Arc::clone(self),
            key: key.to_string(),
            bytes,
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut u = self.budget.lock();
        u.total = u.total.saturating_sub(self.bytes);
        let gone = match u.by_key.get_mut(&self.key) {
            Some(m) => {
                *m = m.saturating_sub(self.bytes);
                *m == 0
            }
            None => false,
        };
        if gone {
            u.by_key.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_within_both_limits_and_gives_back_on_drop() {
        let b = PutBudget::new(100, 60);
        assert_eq!(b.reserve("a", 61).unwrap_err(), BudgetError::TooLarge(60));
        let a1 = b.reserve("a", 40).unwrap();
        // The key's share: 40 + 30 > 60.
        assert_eq!(b.reserve("a", 30).unwrap_err(), BudgetError::Busy);
        let b1 = b.reserve("b", 60).unwrap();
        // In all: 100 held.
        assert_eq!(b.reserve("c", 1).unwrap_err(), BudgetError::Busy);
        assert_eq!(b.in_use(), 100);
        drop(a1);
        assert_eq!(b.in_use(), 60);
        let a2 = b.reserve("a", 40).unwrap();
        drop((a2, b1));
        assert_eq!(b.in_use(), 0);
        assert!(b.lock().by_key.is_empty());
    }

    #[test]
    fn the_per_key_limit_is_at_most_the_total() {
        let b = PutBudget::new(10, 1000);
        assert_eq!(b.largest(), 10);
        assert_eq!(b.reserve("a", 11).unwrap_err(), BudgetError::TooLarge(10));
        assert_eq!(
            b.reserve("a", u64::MAX).unwrap_err(),
            BudgetError::TooLarge(10)
        );
    }
}
