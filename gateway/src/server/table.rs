//! The connections being served, by source address: what makes room for a
//! new connection when the front is full.
//!
//! At the connection cap (or at a source address's own cap), a new
//! connection does not simply get a 503: the connection that has waited
//! longest for the client (for its request head, or idle between
//! requests) is closed to make room, so that clients trickling header
//! lines, or keep-alive connections nobody uses, cannot lock well-behaved
//! clients out. Only when every connection is serving a request is the new
//! one refused. A source address may hold at most its own share of the
//! cap (`--max-connections-per-source`); at it, that source's own
//! longest-waiting connection makes room, never another source's.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::activity::{Activity, Phase};

/// One connection in the table.
#[derive(Debug)]
struct Conn {
    ip: IpAddr,
    activity: Arc<Activity>,
    /// Notified to close it.
    evict: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    conns: HashMap<u64, Conn>,
    by_ip: HashMap<IpAddr, usize>,
}

/// The table of connections.
#[derive(Debug)]
pub(super) struct ConnTable {
    inner: Mutex<Inner>,
    /// The most connections one source address may hold.
    pub(super) per_source: usize,
}

/// A connection's place in the table, given up on drop.
#[derive(Debug)]
pub(super) struct Registration {
    table: Arc<ConnTable>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut g = self.table.lock();
        if let Some(c) = g.conns.remove(&self.id) {
            forget_ip(&mut g.by_ip, c.ip);
        }
    }
}

fn forget_ip(by_ip: &mut HashMap<IpAddr, usize>, ip: IpAddr) {
    if let Some(n) = by_ip.get_mut(&ip) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            by_ip.remove(&ip);
        }
    }
}

impl ConnTable {
    /// An empty table; a source may hold `per_source` connections.
    pub(super) fn new(per_source: usize) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            inner: Mutex::new(Inner::default()),
            per_source: per_source.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters a connection from `ip`.
    pub(super) fn register(
        self: &Arc<Self>,
        ip: IpAddr,
        activity: Arc<Activity>,
        evict: Arc<Notify>,
    ) -> Registration {
        let mut g = self.lock();
        let id = g.next;
        g.next += 1;
        g.conns.insert(
            id,
            Conn {
                ip,
                activity,
                evict,
            },
        );
        *g.by_ip.entry(ip).or_insert(0) += 1;
        Registration {
            table: Arc::clone(self),
            id,
        }
    }

    /// Connections from `ip` now.
    pub(super) fn from(&self, ip: IpAddr) -> usize {
        self.lock().by_ip.get(&ip).copied().unwrap_or(0)
    }

    /// Closes the connection (of `ip` only, if given) that has waited
    /// longest for its client, for its request head or idle; whether there
    /// was one. It leaves the table at once (its task ends soon after).
    pub(super) fn evict_longest_waiting(&self, ip: Option<IpAddr>) -> bool {
        let mut g = self.lock();
        let victim = g
            .conns
            .iter()
            .filter(|(_, c)| ip.is_none_or(|ip| c.ip == ip))
            .filter_map(|(id, c)| match c.activity.state().phase {
                Phase::Head(since) | Phase::Idle(since) => Some((since, *id)),
                Phase::Busy(_) => None,
            })
            .min();
        let Some((_, id)) = victim else {
            return false;
        };
        if let Some(c) = g.conns.remove(&id) {
            forget_ip(&mut g.by_ip, c.ip);
            c.evict.notify_one();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_longest_waiting_connection_makes_room() {
        let t = ConnTable::new(8);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let conn = |ip| {
            let act = Arc::new(Activity::new());
            let ev = Arc::new(Notify::new());
            let r = t.register(ip, act.clone(), ev.clone());
            (r, act, ev)
        };
        let (_r1, a1, e1) = conn(a);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let (_r2, _a2, e2) = conn(b);
        let (_r3, a3, e3) = conn(a);
        a1.request_started(); // busy: never taken
        assert_eq!((t.from(a), t.from(b)), (2, 1));
        // Of a's: only a3 waits.
        assert!(t.evict_longest_waiting(Some(a)));
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(1), e3.notified())
                .await
                .is_ok()
        );
        assert_eq!(t.from(a), 1);
        // Of all: b's is the only one waiting now.
        assert!(t.evict_longest_waiting(None));
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(1), e2.notified())
                .await
                .is_ok()
        );
        // Nothing waits any more: a1 is busy.
        assert!(!t.evict_longest_waiting(None));
        drop(a3);
        let _ = e1;
    }
}
