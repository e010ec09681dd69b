//! A software DC target: reachable by any DC initiator that presents its
//! DC access key, with no connection set-up.

use super::cq::CqInner;
use super::shared::{DctInner, DeviceShared, Target};
use crate::error::{FabricError, Result};
use crate::seam::DctOps;
use crate::types::AccessFlags;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl DctInner {
    pub fn create(
        dev: &Arc<DeviceShared>,
        pd_id: u64,
        cq: Arc<CqInner>,
        access: AccessFlags,
        key: u64,
    ) -> Result<Arc<DctInner>> {
        let remote =
            AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if access.bits() & !(remote | AccessFlags::LOCAL_WRITE).bits() != 0 {
            return Err(FabricError::invalid(
                "create_dct",
                format!("access {access:?}"),
            ));
        }
        let mut made = None;
        dev.alloc_qpn(|dctn| {
            let d = Arc::new(DctInner {
                dctn,
                pd_id,
                access,
                key,
                _cq: cq,
                violations: AtomicU64::new(0),
            });
            let t = Target::Dct(Arc::downgrade(&d));
            made = Some(d);
            t
        })?;
        made.ok_or_else(|| FabricError::invalid("create_dct", "no DCT number"))
    }
}

/// The provider object behind a [`DcTarget`](crate::DcTarget).
#[derive(Debug)]
pub(crate) struct SoftDct {
    pub inner: Arc<DctInner>,
    pub dev: Arc<DeviceShared>,
}

impl DctOps for SoftDct {
    fn dct_num(&self) -> u32 {
        self.inner.dctn
    }
    fn key_violations(&self) -> u64 {
        self.inner.violations.load(Ordering::Relaxed)
    }
}

impl Drop for SoftDct {
    fn drop(&mut self) {
        self.dev.free_qpn(self.inner.dctn);
    }
}
