//! Connected QP pairs: one server QP per client QP that did the handshake,
//! bound to the access key that signed it, found again by the client QP's
//! (GID, QP number), limited per key and in all, and dropped when idle.

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::{
    AccessFlags, CompletionQueue, Device, Gid, ProtectionDomain, QpCap, QpType, QueuePair,
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
    /// Its completion queue.
    pub cq: CompletionQueue,
    /// One transfer at a time on a QP.
    pub busy: tokio::sync::Mutex<()>,
    last_used: Mutex<Instant>,
}

impl Pair {
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

    /// The handshake: a new server QP connected to the client QP, bound to
    /// `access_key`. A pair for the same client QP is replaced (the client
    /// reset its QP and connects again).
    pub fn connect(
        &self,
        device: &Device,
        pd: &ProtectionDomain,
        access_key: &str,
        client: RcPeer,
        params: &RcParams,
    ) -> Result<Arc<Pair>, PairError> {
        self.sweep();
        {
            let mut m = self.lock();
            m.remove(&(client.gid, client.qp_num));
            let mine = m.values().filter(|p| p.access_key == access_key).count();
            if mine >= self.limits.per_key {
                return Err(PairError::PerKey(mine));
            }
            if m.len() >= self.limits.total {
                return Err(PairError::Total(m.len()));
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
            cq,
            busy: tokio::sync::Mutex::new(()),
            last_used: Mutex::new(Instant::now()),
        });
        self.lock()
            .insert((client.gid, client.qp_num), pair.clone());
        Ok(pair)
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

    /// Forgets a pair whose QP failed.
    pub fn remove(&self, gid: Gid, qp_num: u32) {
        self.lock().remove(&(gid, qp_num));
    }
}
