//! Connected QP pairs: one server QP per client QP that did the handshake,
//! bound to the access key that signed it, found again by the client QP's
//! (GID, QP number), limited per key and in all, and released when idle,
//! broken, or when the client is gone (a zero-length RDMA WRITE probes
//! pairs that sat idle). The sweep runs on a timer ([`Pairs::sweep`] and
//! [`Pairs::probe`], driven by the engine's sweeper thread), not only at the
//! next handshake. A handshake naming a client QP that is paired under
//! another access key is refused and leaves that pair alone.
//!
//! A handshake that finds its access key at its limit first probes that
//! key's pairs that have no transfer under way ([`Pairs::probe_key`]) and
//! releases those whose client is gone (a client that exited leaves its
//! pair behind until the sweeper's probe finds it; a shell loop of
//! `hipobj cp` would otherwise run into the limit). Pairs whose clients
//! answer are kept: a live client's pair is never taken. A transfer that
//! still holds a released pair answers 421, so that its client (if it is
//! still there) connects again.
//!
//! A client that lets go of a QP says so ([`Pairs::goodbye`], the
//! `x-amz-rdma-goodbye` request): its pair is released at once.

use super::completions::AsyncCq;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::{
    AccessFlags, Device, Gid, ProtectionDomain, QpCap, QpType, QueuePair, RemoteAddr, SendOp,
    SendWr, WcStatus,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server QP connected to one client QP.
#[derive(Debug)]
pub struct Pair {
    /// The access key whose handshake made it.
    pub access_key: String,
    /// The server QP.
    pub qp: QueuePair,
    /// Its completion queue, awaited on the event loop.
    pub cq: AsyncCq,
    /// One transfer at a time on a QP.
    pub busy: tokio::sync::Mutex<()>,
    last_used: Mutex<Instant>,
    last_probed: Mutex<Option<Instant>>,
    /// Released (a failed probe, or the client's goodbye): a transfer that
    /// still holds the pair answers 421.
    reclaimed: std::sync::atomic::AtomicBool,
}

impl Pair {
    /// A QP and its CQ that are in no table (a hipobj-rc-v2 session's), for
    /// a transfer's [`super::mover::Initiator::Rc`].
    pub fn standalone(access_key: &str, qp: QueuePair, cq: AsyncCq) -> Arc<Pair> {
        Arc::new(Pair {
            access_key: access_key.to_string(),
            qp,
            cq,
            busy: tokio::sync::Mutex::new(()),
            last_used: Mutex::new(Instant::now()),
            last_probed: Mutex::new(None),
            reclaimed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether it was released (see the module's doc).
    pub fn is_reclaimed(&self) -> bool {
        self.reclaimed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Marks it used now.
    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

/// Why a handshake was refused.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// Too many pairs for this key.
    #[error("access key has {0} RDMA connections already (the limit)")]
    PerKey(usize),
    /// Too many pairs in all.
    #[error("the server has {0} RDMA connections already (the limit)")]
    Total(usize),
    /// The client QP is paired under another access key.
    #[error("the client QP is connected under another access key")]
    OtherKey,
    /// The QP could not be made or connected.
    #[error("connecting the server QP failed: {0}")]
    Fabric(#[from] hipobj_fabric::FabricError),
}

/// The limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Per access key.
    pub per_key: usize,
    /// In all.
    pub total: usize,
    /// Idle expiry.
    pub idle: Duration,
}

/// Pairs of the other devices' tables, which count against the same
/// limits (a gateway on several devices has a table per device).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Elsewhere {
    /// Of the access key that is handshaking.
    pub mine: usize,
    /// In all.
    pub total: usize,
}

/// The table.
#[derive(Debug)]
pub struct Pairs {
    map: Mutex<HashMap<(Gid, u32), Arc<Pair>>>,
    limits: Limits,
}

impl Pairs {
    /// An empty table.
    pub fn new(limits: Limits) -> Pairs {
        Pairs {
            map: Mutex::new(HashMap::new()),
            limits,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Gid, u32), Arc<Pair>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pairs now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops pairs idle longer than the limit (and any whose QP broke).
    pub fn sweep(&self) -> usize {
        let idle = self.limits.idle;
        let mut m = self.lock();
        let before = m.len();
        m.retain(|_, p| {
            p.idle_for() < idle && matches!(p.qp.state(), Ok(hipobj_fabric::QpState::Rts))
        });
        before - m.len()
    }

    /// Pairs of `access_key` here, and pairs here in all.
    pub fn held(&self, access_key: &str) -> Elsewhere {
        let m = self.lock();
        Elsewhere {
            mine: m.values().filter(|p| p.access_key == access_key).count(),
            total: m.len(),
        }
    }

    /// The handshake: a new server QP connected to the client QP, bound to
    /// `access_key`. A pair for the same client QP is replaced (the client
    /// reset its QP and connects again). The limits count the pairs here
    /// and those `elsewhere`.
    pub fn connect(
        &self,
        device: &Device,
        pd: &ProtectionDomain,
        access_key: &str,
        client: RcPeer,
        params: &RcParams,
        elsewhere: Elsewhere,
    ) -> Result<Arc<Pair>, PairError> {
        self.sweep();
        {
            let mut m = self.lock();
            if let Some(p) = m.get(&(client.gid, client.qp_num)) {
                if p.access_key != access_key {
                    return Err(PairError::OtherKey);
                }
            }
            // The same key again: the client reset its QP and connects anew.
            m.remove(&(client.gid, client.qp_num));
            let mine = m.values().filter(|p| p.access_key == access_key).count() + elsewhere.mine;
            if mine >= self.limits.per_key {
                return Err(PairError::PerKey(mine));
            }
            let total = m.len() + elsewhere.total;
            if total >= self.limits.total {
                return Err(PairError::Total(total));
            }
        }
        let cq = device.create_cq(64)?;
        let cap = QpCap {
            max_send_wr: 64,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
        };
        let qp = pd.create_qp(QpType::Rc, &cq, &cq, cap)?;
        // The server QP only ever requests: peers may do nothing through it.
        rc::to_init(&qp, params.port, AccessFlags::EMPTY)?;
        rc::connect(&qp, &client, params)?;
        let pair = Arc::new(Pair {
            access_key: access_key.to_string(),
            qp,
            cq: AsyncCq::new(cq),
            busy: tokio::sync::Mutex::new(()),
            last_used: Mutex::new(Instant::now()),
            last_probed: Mutex::new(None),
            reclaimed: std::sync::atomic::AtomicBool::new(false),
        });
        let mut m = self.lock();
        // Another handshake for the same QP may have won the race meanwhile.
        if let Some(p) = m.get(&(client.gid, client.qp_num)) {
            if p.access_key != access_key {
                return Err(PairError::OtherKey);
            }
        }
        m.insert((client.gid, client.qp_num), pair.clone());
        Ok(pair)
    }

    /// The client's goodbye for its QP `(gid, qp_num)`: its pair, if
    /// `access_key` made it, leaves the table (a transfer still waiting for
    /// it answers 421) and its QP goes to ERR unless a transfer is under
    /// way on it (that one finishes; the QP goes with the last reference).
    /// Whether there was a pair; `OtherKey` when it is another key's.
    pub fn goodbye(&self, gid: Gid, qp_num: u32, access_key: &str) -> Result<bool, PairError> {
        let mut m = self.lock();
        let Some(p) = m.get(&(gid, qp_num)) else {
            return Ok(false);
        };
        if p.access_key != access_key {
            return Err(PairError::OtherKey);
        }
        let p = p.clone();
        m.remove(&(gid, qp_num));
        drop(m);
        p.reclaimed
            .store(true, std::sync::atomic::Ordering::Release);
        if let Ok(_idle) = p.busy.try_lock() {
            let _ = rc::to_error(&p.qp);
        }
        Ok(true)
    }

    /// The pair of a client QP.
    pub fn get(&self, gid: Gid, qp_num: u32) -> Option<Arc<Pair>> {
        let p = self.lock().get(&(gid, qp_num)).cloned()?;
        if p.idle_for() >= self.limits.idle {
            self.lock().remove(&(gid, qp_num));
            return None;
        }
        Some(p)
    }

    /// Checks that the clients of pairs idle for `after` (and not probed
    /// within it) are still there: each gets a zero-length RDMA WRITE,
    /// which needs no memory and no key, and is acknowledged by any client
    /// QP still connected to it. A pair whose probe fails or gets no
    /// completion within `wait` is released. Blocking: run it on a thread
    /// of its own. Returns how many pairs were released.
    pub fn probe(&self, after: Duration, wait: Duration) -> usize {
        self.probe_where(wait, |p| {
            p.idle_for() >= after
                && p.last_probed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none_or(|t| t.elapsed() >= after)
        })
    }

    /// Probes every pair of `access_key` that has no transfer under way,
    /// however recently used, and releases those whose client is gone (a
    /// handshake of that key at its limit, see the module's doc). Blocking,
    /// up to `wait`. Returns how many pairs were released.
    pub fn probe_key(&self, access_key: &str, wait: Duration) -> usize {
        self.probe_where(wait, |p| p.access_key == access_key)
    }

    fn probe_where(&self, wait: Duration, which: impl Fn(&Pair) -> bool) -> usize {
        let candidates: Vec<((Gid, u32), Arc<Pair>)> = self
            .lock()
            .iter()
            .filter(|(_, p)| which(p))
            .map(|(k, p)| (*k, p.clone()))
            .collect();
        let mut posted = Vec::new();
        for (k, p) in &candidates {
            // A pair with a transfer under way is in use, not idle.
            let Ok(guard) = p.busy.try_lock() else {
                continue;
            };
            *p.last_probed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            let wr = SendWr {
                wr_id: PROBE_WR_ID,
                op: SendOp::RdmaWrite(RemoteAddr { addr: 0, rkey: 0 }),
                sg_list: Vec::new(),
                signaled: true,
                dc: None,
            };
            let ok = p.qp.post_send(&wr).is_ok();
            posted.push((*k, p, guard, ok));
        }
        let deadline = Instant::now() + wait;
        let mut gone = Vec::new();
        for (k, p, guard, ok) in posted {
            let alive = ok
                && matches!(
                    p.cq.cq().wait_one(deadline.saturating_duration_since(Instant::now())),
                    Ok(Some(wc)) if wc.status == WcStatus::Success
                );
            if !alive {
                tracing::info!(
                    client_qp = format_args!("{:#x}", k.1),
                    "RDMA pair released: its client did not answer a probe"
                );
                // No completion may be left for a later transfer to read.
                p.reclaimed
                    .store(true, std::sync::atomic::Ordering::Release);
                let _ = rc::to_error(&p.qp);
                gone.push((k, (*p).clone()));
            }
            drop(guard);
        }
        let n = gone.len();
        for (k, p) in gone {
            self.remove_pair(k.0, k.1, &p);
        }
        n
    }

    /// Forgets the pair `p` of a client QP, if it is still the one in the
    /// table (a new handshake may have replaced it).
    pub fn remove_pair(&self, gid: Gid, qp_num: u32, p: &Arc<Pair>) {
        let mut m = self.lock();
        if m.get(&(gid, qp_num)).is_some_and(|q| Arc::ptr_eq(q, p)) {
            m.remove(&(gid, qp_num));
        }
    }

    /// Pairs per access key now (for metrics and tests).
    pub fn per_key(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for p in self.lock().values() {
            *out.entry(p.access_key.clone()).or_insert(0) += 1;
        }
        out
    }
}

/// The work request id of a liveness probe.
const PROBE_WR_ID: u64 = u64::MAX;
