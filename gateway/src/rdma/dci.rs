//! DC initiators: a bounded pool shared by every DC request, limited per
//! access key as RC pairs are. An initiator is made on first need, moved to
//! RTS once, and reused for any target; one whose QP failed is destroyed
//! when its lease ends, and its slot is made again on the next need.
//! An initiator is a QP of one device: each device has a pool of its own
//! ([`DciPool::sharing`]), and the pools of one gateway share the limits
//! (in all, per key), so they bound leases over all devices together.

use super::completions::AsyncCq;
use super::shares::KeyShares;
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::{
    Device, DeviceInfo, FabricError, ProtectionDomain, QpCap, QpState, QpType, QueuePair,
};
use std::sync::atomic::{AtomicUsize, Ordering};
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
    keys: Arc<KeyShares>,
    /// Leases of this pool now (the limits count those of every pool).
    leased: AtomicUsize,
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
                keys: Arc::new(KeyShares::new(per_key.clamp(1, total))),
                leased: AtomicUsize::new(0),
            }),
        }
    }

    /// A pool of its own initiators (another device's) under the same
    /// limits as this one.
    pub fn sharing(&self) -> DciPool {
        DciPool {
            shared: Arc::new(Shared {
                idle: Mutex::new(Vec::new()),
                total: self.shared.total.clone(),
                keys: self.shared.keys.clone(),
                leased: AtomicUsize::new(0),
            }),
        }
    }

    /// Initiators of this pool leased now.
    pub fn in_use(&self) -> usize {
        self.shared.leased.load(Ordering::Relaxed)
    }

    /// Initiators idle in the pool now.
    pub fn idle(&self) -> usize {
        self.shared
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Initiators leased now, from this pool and those sharing its limits.
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
        self.shared.leased.fetch_add(1, Ordering::Relaxed);
        Ok(DciLease {
            dci: Some(dci),
            shared: self.shared.clone(),
            _total: total,
            _key: key,
        })
    }
}

/// Why a DC token is declined here (the metric's reason and the message),
/// if it is: the device has no DC (saying why), or no DC key is configured.
pub fn refusal(info: &DeviceInfo, dc_key: Option<u64>) -> Option<(&'static str, String)> {
    if !info.supports_dc {
        let why = info.dc_unavailable.as_deref().unwrap_or("no DC support");
        return Some((
            "dc_unavailable",
            format!("DC is not available on this device: {why}"),
        ));
    }
    if dc_key.is_none() {
        return Some((
            "dc_no_key",
            "DC is not configured on this gateway (no DC key: --dc-key)".to_string(),
        ));
    }
    None
}

/// Says at start what DC tokens will get: the device's DC support and the
/// configured key (a warning for cuObject's public one).
pub(super) fn log_setup(device: &Device, dc_key: Option<u64>) {
    let info = device.info();
    match (info.supports_dc, dc_key) {
        (false, _) => tracing::info!(
            device = %info.name,
            why = info.dc_unavailable.as_deref().unwrap_or("no DC support"),
            "DC tokens will be declined (501): the device has no DC"
        ),
        (true, None) => {
            tracing::info!("DC tokens will be declined (501): no DC key is configured (--dc-key)")
        }
        (true, Some(hipobj_fabric::CUOBJECT_DC_KEY)) => tracing::warn!(
            "DC key: cuObject's public default 0xffeeddcc, as configured; any host that \
             knows it can reach the DC targets this gateway serves, as it can"
        ),
        (true, Some(_)) => tracing::info!("DC key configured"),
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
        self.shared.leased.fetch_sub(1, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(supports_dc: bool, why: Option<&str>) -> DeviceInfo {
        DeviceInfo {
            name: "mlx5_0".into(),
            vendor_id: 0x15b3,
            vendor_part_id: 4129,
            phys_port_cnt: 1,
            max_mr_size: u64::MAX,
            supports_dmabuf: true,
            supports_dc,
            dc_unavailable: why.map(str::to_string),
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
        }
    }

    #[test]
    fn dc_is_declined_without_dc_or_without_a_key_and_served_otherwise() {
        let why = "DC needs libmlx5: libmlx5.so.1 could not be loaded";
        assert_eq!(
            refusal(&info(false, Some(why)), Some(1)),
            Some((
                "dc_unavailable",
                format!("DC is not available on this device: {why}")
            ))
        );
        assert_eq!(
            refusal(&info(true, None), None),
            Some((
                "dc_no_key",
                "DC is not configured on this gateway (no DC key: --dc-key)".to_string()
            ))
        );
        assert_eq!(
            refusal(&info(true, None), Some(hipobj_fabric::CUOBJECT_DC_KEY)),
            None
        );
        assert_eq!(refusal(&info(true, None), Some(7)), None);
    }
}
