//! [`VerbsDct`]: a DC target made by `mlx5dv_create_qp` over its own SRQ,
//! moved to INIT and RTR at creation.

use super::super::abi::{ibv_cq, ibv_qp};
use super::super::abi_ex::{
    ibv_qp_init_attr_ex, ibv_srq, ibv_srq_attr, ibv_srq_init_attr, IBV_QPT_DRIVER,
    IBV_QP_INIT_ATTR_PD,
};
use super::super::os::{errno, os_err};
use super::super::qp;
use super::abi::{mlx5dv_qp_init_attr, MLX5DV_DCTYPE_DCT};
use super::ah::HOP_LIMIT;
use super::{DcPd, Route};
use crate::error::Result;
use crate::seam::{CqOps, DctOps};
use crate::types::{AccessFlags, AhAttr, GlobalRoute, QpAttr, QpAttrMask, QpState};
use hipobj_wire::Gid;
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// The port a DCT listens on (hipObject uses port 1 throughout).
pub(super) const DCT_PORT: u8 = 1;
/// The RNR NAK timer code of a DCT (hipObject's 12: 0.64 ms).
pub(super) const DCT_MIN_RNR_TIMER: u8 = 12;
/// Receive requests of the SRQ every DCT needs (DC targets here take
/// RDMA WRITE and READ only, which consume none).
pub(super) const DCT_SRQ_WR: u32 = 16;

/// A DC target, destroyed (then its SRQ) on drop.
pub struct VerbsDct {
    qp: NonNull<ibv_qp>,
    srq: NonNull<ibv_srq>,
    dct_num: u32,
    dc: Arc<DcPd>,
    _cq: Arc<dyn CqOps>,
}

// SAFETY: a DCT is only modified at creation and destroyed once; the
// verbs involved are thread safe.
unsafe impl Send for VerbsDct {}
// SAFETY: shared access reads the copied DCT number only.
unsafe impl Sync for VerbsDct {}

impl fmt::Debug for VerbsDct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsDct")
            .field("device", &self.dc.pd.dev.name)
            .field("dct_num", &self.dct_num)
            .finish()
    }
}

impl Drop for VerbsDct {
    fn drop(&mut self) {
        let dev = &self.dc.pd.dev;
        // SAFETY: the DCT and its SRQ were created here and are destroyed
        // once, the DCT first (it uses the SRQ), before the CQ and PD.
        unsafe {
            let rc = (dev.lib.destroy_qp)(self.qp.as_ptr());
            if rc != 0 {
                tracing::warn!(device = %dev.name, dct_num = self.dct_num, rc, "ibv_destroy_qp (DCT) failed");
            }
            let rc = (self.dc.fns.destroy_srq)(self.srq.as_ptr());
            if rc != 0 {
                tracing::warn!(device = %dev.name, rc, "ibv_destroy_srq failed");
            }
        }
    }
}

/// Creates a DCT in `dc`'s PD completing on `cq` (`cq_ops`' CQ), taking
/// `access` (its remote bits) from initiators that present `key`.
pub(crate) fn create(
    dc: &Arc<DcPd>,
    cq_ops: &Arc<dyn CqOps>,
    cq: *mut ibv_cq,
    access: AccessFlags,
    key: u64,
) -> Result<Box<dyn DctOps>> {
    let dev = &dc.pd.dev;
    let route = Route::of(dev, DCT_PORT)?;
    let mut srq_attr = ibv_srq_init_attr {
        srq_context: ptr::null_mut(),
        attr: ibv_srq_attr {
            max_wr: DCT_SRQ_WR,
            max_sge: 1,
            srq_limit: 0,
        },
    };
    // SAFETY: the PD is live; `srq_attr` is valid (the call writes the
    // actual capacities back into it).
    let srq = unsafe { (dc.fns.create_srq)(dc.pd.pd.as_ptr(), &mut srq_attr) };
    let srq = NonNull::new(srq).ok_or_else(|| os_err("ibv_create_srq", errno()))?;
    let mut attr = ibv_qp_init_attr_ex {
        send_cq: cq,
        recv_cq: cq,
        srq: srq.as_ptr(),
        qp_type: IBV_QPT_DRIVER,
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd: dc.pd.pd.as_ptr(),
        ..ibv_qp_init_attr_ex::default()
    };
    let mut dv = mlx5dv_qp_init_attr::dc(MLX5DV_DCTYPE_DCT, key);
    // SAFETY: the context, PD, CQ and SRQ are live (the DCT holds them);
    // both attribute structs are valid and only read.
    let raw = unsafe { (dc.mlx5.create_qp)(dev.ctx.as_ptr(), &mut attr, &mut dv) };
    let Some(qp) = NonNull::new(raw) else {
        let e = os_err("mlx5dv_create_qp (DCT)", errno());
        // SAFETY: the SRQ was made above and nothing uses it.
        unsafe { (dc.fns.destroy_srq)(srq.as_ptr()) };
        return Err(e);
    };
    // SAFETY: `qp` was just created and is valid for reads.
    let dct_num = unsafe { (*qp.as_ptr()).qp_num };
    // From here on drop releases the DCT and the SRQ.
    let dct = VerbsDct {
        qp,
        srq,
        dct_num,
        dc: dc.clone(),
        _cq: cq_ops.clone(),
    };
    let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    qp::modify(
        &dc.pd,
        qp,
        &QpAttr {
            qp_state: QpState::Init,
            port_num: route.port,
            pkey_index: 0,
            qp_access_flags: AccessFlags(access.bits() & remote.bits()),
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )?;
    qp::modify(
        &dc.pd,
        qp,
        &QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: route.mtu,
            min_rnr_timer: DCT_MIN_RNR_TIMER,
            ah_attr: AhAttr {
                grh: Some(GlobalRoute {
                    dgid: Gid::ZERO,
                    flow_label: 0,
                    sgid_index: route.sgid_index,
                    hop_limit: HOP_LIMIT,
                    traffic_class: 0,
                }),
                dlid: 0,
                sl: 0,
                port_num: route.port,
            },
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::MIN_RNR_TIMER | QpAttrMask::AV | QpAttrMask::PATH_MTU,
    )?;
    tracing::debug!(device = %dev.name, dct_num, "DC target created");
    Ok(Box::new(dct))
}

impl DctOps for VerbsDct {
    fn dct_num(&self) -> u32 {
        self.dct_num
    }

    /// Not reported: mlx5 counts DC key violations in the NIC, not per
    /// DCT through verbs. Always 0 on this provider.
    fn key_violations(&self) -> u64 {
        0
    }
}
