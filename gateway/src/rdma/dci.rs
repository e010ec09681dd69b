//! DC initiators: a bounded pool shared by every DC request, limited per
//! access key as RC pairs are. An initiator is made on first need, moved to
//! RTS once, and reused for any target; one whose QP failed is destroyed
//! when its lease ends, and its slot is made again on the next need.

use super::completions::AsyncCq;
use super::shares::KeyShares;
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::{Device, FabricError, ProtectionDomain, QpCap, QpState, QpType, QueuePair};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why no initiator was had.
#[derive(Debug, thiserror::Error)]
pub enum DciError {
    /// Every initiator (in all, or of this key) stayed busy for the wait.
    #[error("no DC initiator was free within {0:?} ({1})")]
    Busy(Duration, &'static str),
    /// Making one failed.
    #[error("creating a DC initiator failed: {0}")]
    Fabric(#[from] FabricError),
}

/// One initiator and its CQ.
#[derive(Debug)]
struct Dci {
    qp: QueuePair,
    cq: AsyncCq,
}

#[derive(Debug)]
struct Shared {
    idle: Mutex<Vec<Dci>>,
    total: Arc<Semaphore>,
    keys: KeyShares,
}

/// The pool.
#[derive(Debug, Clone)]
pub struct DciPool {
    shared: Arc<Shared>,
}

/// An initiator held for one transfer; back to the pool on drop if its QP
/// is still in RTS, destroyed otherwise.
#[derive(Debug)]
pub struct DciLease {
    dci: Option<Dci>,
    shared: Arc<Shared>,
    _total: OwnedSemaphorePermit,
    _key: OwnedSemaphorePermit,
}

impl DciPool {
    /// At most `total` initiators, `per_key` of them for one access key.
    pub fn new(total: usize, per_key: usize) -> DciPool {
        let total = total.max(1);
        DciPool {
            shared: Arc::new(Shared {
                idle: Mutex::new(Vec::new()),
                total: Arc::new(Semaphore::new(total)),
                keys: KeyShares::new(per_key.clamp(1, total)),
            }),
        }
    }

    /// Initiators idle in the pool now.
    pub fn idle(&self) -> usize {
        self.shared
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Initiators leased now.
    pub fn leased(&self, total: usize) -> usize {
        total.saturating_sub(self.shared.total.available_permits())
    }

    /// An initiator for `access_key`, waiting up to `wait` for one to be free.
    pub async fn lease(
        &self,
        access_key: &str,
        wait: Duration,
        device: &Device,
        pd: &ProtectionDomain,
        params: &RcParams,
    ) -> Result<DciLease, DciError> {
        let key = self.shared.keys.of(access_key);
        let deadline = tokio::time::Instant::now() + wait;
        let key = tokio::time::timeout_at(deadline, key.acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(DciError::Busy(wait, "this access key's share"))?;
        let total = tokio::time::timeout_at(deadline, self.shared.total.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(DciError::Busy(wait, "all of them"))?;
        let reused = self
            .shared
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let dci = match reused {
            Some(d) => d,
            None => make(device, pd, params)?,
        };
        Ok(DciLease {
            dci: Some(dci),
            shared: self.shared.clone(),
            _total: total,
            _key: key,
        })
    }
}

fn make(device: &Device, pd: &ProtectionDomain, params: &RcParams) -> Result<Dci, FabricError> {
    let cq = device.create_cq(64)?;
    let qp = pd.create_qp(
        QpType::DcInitiator,
        &cq,
        &cq,
        QpCap {
            max_send_wr: 64,
            max_recv_wr: 0,
            max_send_sge: 1,
            max_recv_sge: 0,
        },
    )?;
    hipobj_fabric::dc::initiator_to_rts(&qp, params)?;
    Ok(Dci {
        qp,
        cq: AsyncCq::new(cq),
    })
}

impl DciLease {
    fn dci(&self) -> &Dci {
        self.dci
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds its initiator until drop"))
    }

    /// The initiator.
    pub fn qp(&self) -> &QueuePair {
        &self.dci().qp
    }

    /// Its completion queue.
    pub fn cq(&self) -> &AsyncCq {
        &self.dci().cq
    }
}

impl Drop for DciLease {
    fn drop(&mut self) {
        let Some(d) = self.dci.take() else { return };
        // Only a clean initiator goes back: in RTS, and with no completion
        // left over from the transfer that used it.
        let mut left = Vec::new();
        let clean = matches!(d.qp.state(), Ok(QpState::Rts))
            && matches!(d.cq.cq().poll(&mut left, 1), Ok(0));
        if clean {
            self.shared
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(d);
        }
        // Otherwise it is destroyed here, before its permits are released.
    }
}
