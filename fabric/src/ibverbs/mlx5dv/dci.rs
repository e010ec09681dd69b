//! [`VerbsDci`]: a DC initiator made by `mlx5dv_create_qp`, posting through
//! the `ibv_qp_ex` work-request builder with `mlx5dv_wr_set_dc_addr`.

use super::super::abi::{ibv_cq, ibv_qp, ibv_qp_cap, ibv_sge, IBV_SEND_SIGNALED};
use super::super::abi_ex::{
    ibv_qp_ex, ibv_qp_init_attr_ex, WrCompleteFn, WrRdmaFn, WrSetSgeFn, WrSetSgeListFn, WrStartFn,
    IBV_QPT_DRIVER, IBV_QP_EX_WITH_RDMA_READ, IBV_QP_EX_WITH_RDMA_WRITE, IBV_QP_INIT_ATTR_PD,
    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
};
use super::super::os::{check, errno, os_err, PROVIDER};
use super::super::qp;
use super::abi::{mlx5dv_qp_ex, mlx5dv_qp_init_attr, WrSetDcAddrFn, MLX5DV_DCTYPE_DCI};
use super::{DcPd, Route};
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, QpInit, QpOps};
use crate::types::{QpAttr, QpAttrMask, QpType, RecvWr, SendOp, SendWr};
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// The builder's entries, read once from the QP (the driver sets them at
/// creation and never changes them), as the header's inline `ibv_wr_*`
/// and `mlx5dv_wr_set_dc_addr` would read them on each call.
#[derive(Clone, Copy)]
struct WrOps {
    start: WrStartFn,
    complete: WrCompleteFn,
    rdma_write: WrRdmaFn,
    rdma_read: WrRdmaFn,
    set_sge: WrSetSgeFn,
    set_sge_list: WrSetSgeListFn,
    set_dc_addr: WrSetDcAddrFn,
}

/// A DC initiator, destroyed on drop.
pub struct VerbsDci {
    qp: NonNull<ibv_qp>,
    qpx: NonNull<ibv_qp_ex>,
    mqpx: NonNull<mlx5dv_qp_ex>,
    qp_num: u32,
    ops: WrOps,
    /// Set when the QP is given its port (the modify to INIT).
    route: Mutex<Option<Route>>,
    /// One work request is built at a time (mlx5 also locks its send queue
    /// from `wr_start` to `wr_complete`; this keeps `wr_id` and `wr_flags`,
    /// fields of the shared struct, ours while they are set).
    post: Mutex<()>,
    dc: Arc<DcPd>,
    _send_cq: Arc<dyn CqOps>,
    _recv_cq: Arc<dyn CqOps>,
}

// SAFETY: the QP's verbs are thread safe and work requests are built under
// `post`; the raw pointers are the QP's own, valid until drop.
unsafe impl Send for VerbsDci {}
// SAFETY: as above.
unsafe impl Sync for VerbsDci {}

impl fmt::Debug for VerbsDci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsDci")
            .field("device", &self.dc.pd.dev.name)
            .field("qp_num", &self.qp_num)
            .finish()
    }
}

impl Drop for VerbsDci {
    fn drop(&mut self) {
        // SAFETY: the QP was created by mlx5dv_create_qp and is destroyed
        // once (ibv_destroy_qp takes any QP), before the CQs and PD it holds.
        let rc = unsafe { (self.dc.pd.dev.lib.destroy_qp)(self.qp.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.dc.pd.dev.name, qp_num = self.qp_num, rc, "ibv_destroy_qp (DCI) failed");
        }
    }
}

/// Creates a DCI in `dc`'s PD on the CQs `send_cq`/`recv_cq` (those of
/// `init`, resolved by the caller).
pub(crate) fn create(
    dc: &Arc<DcPd>,
    init: &QpInit<'_>,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
) -> Result<Box<dyn QpOps>> {
    let dev = &dc.pd.dev;
    let mut attr = ibv_qp_init_attr_ex {
        send_cq,
        recv_cq,
        cap: ibv_qp_cap {
            max_send_wr: init.cap.max_send_wr,
            max_recv_wr: 0,
            max_send_sge: init.cap.max_send_sge,
            max_recv_sge: 0,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_DRIVER,
        sq_sig_all: 0,
        comp_mask: IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        pd: dc.pd.pd.as_ptr(),
        send_ops_flags: IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ,
        ..ibv_qp_init_attr_ex::default()
    };
    // A DCI has no key of its own: the target's key goes with each request.
    let mut dv = mlx5dv_qp_init_attr::dc(MLX5DV_DCTYPE_DCI, 0);
    // SAFETY: the context, PD and CQs are live (the DCI will hold them);
    // both attribute structs are valid and only read.
    let raw = unsafe { (dc.mlx5.create_qp)(dev.ctx.as_ptr(), &mut attr, &mut dv) };
    let qp = NonNull::new(raw).ok_or_else(|| os_err("mlx5dv_create_qp (DCI)", errno()))?;
    let destroy = |e: FabricError| {
        // SAFETY: the QP was just created and nothing else refers to it.
        unsafe { (dev.lib.destroy_qp)(qp.as_ptr()) };
        e
    };
    // SAFETY: the QP is live; ibv_qp_to_qp_ex returns its extended view
    // (NULL if it has none).
    let qpx = NonNull::new(unsafe { (dc.fns.qp_to_qp_ex)(qp.as_ptr()) }).ok_or_else(|| {
        destroy(FabricError::Unsupported {
            verb: "ibv_qp_to_qp_ex (the DCI has no extended send interface)",
            provider: PROVIDER,
        })
    })?;
    // SAFETY: `qpx` is the live QP's extended view.
    let mqpx =
        NonNull::new(unsafe { (dc.mlx5.qp_ex_from_ibv_qp_ex)(qpx.as_ptr()) }).ok_or_else(|| {
            destroy(FabricError::Unsupported {
                verb: "mlx5dv_qp_ex_from_ibv_qp_ex (no mlx5 view of the DCI)",
                provider: PROVIDER,
            })
        })?;
    // SAFETY: both views are live and valid for reads; this copies their
    // function pointers and the QP number.
    let (ops, qp_num) = unsafe {
        let x = &*qpx.as_ptr();
        let m = &*mqpx.as_ptr();
        let ops = match (
            x.wr_start,
            x.wr_complete,
            x.wr_rdma_write,
            x.wr_rdma_read,
            x.wr_set_sge,
            x.wr_set_sge_list,
            m.wr_set_dc_addr,
        ) {
            (
                Some(start),
                Some(complete),
                Some(rdma_write),
                Some(rdma_read),
                Some(set_sge),
                Some(set_sge_list),
                Some(set_dc_addr),
            ) => Some(WrOps {
                start,
                complete,
                rdma_write,
                rdma_read,
                set_sge,
                set_sge_list,
                set_dc_addr,
            }),
            _ => None,
        };
        (ops, (*qp.as_ptr()).qp_num)
    };
    let ops = ops.ok_or_else(|| {
        destroy(FabricError::Unsupported {
            verb: "mlx5dv_create_qp (the DCI lacks a work-request entry)",
            provider: PROVIDER,
        })
    })?;
    tracing::debug!(device = %dev.name, qp_num, "DC initiator created");
    Ok(Box::new(VerbsDci {
        qp,
        qpx,
        mqpx,
        qp_num,
        ops,
        route: Mutex::new(None),
        post: Mutex::new(()),
        dc: dc.clone(),
        _send_cq: init.send_cq.clone(),
        _recv_cq: init.recv_cq.clone(),
    }))
}

impl VerbsDci {
    fn route(&self) -> Result<Route> {
        self.route
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| {
                FabricError::invalid(
                    "ibv_post_send",
                    "the DC initiator has no port yet (modify it to INIT first)",
                )
            })
    }
}

impl QpOps for VerbsDci {
    fn qp_num(&self) -> u32 {
        self.qp_num
    }

    fn qp_type(&self) -> QpType {
        QpType::DcInitiator
    }

    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        qp::modify(&self.dc.pd, self.qp, attr, mask)?;
        let mut route = self.route.lock().unwrap_or_else(|e| e.into_inner());
        if mask.contains(QpAttrMask::PORT) {
            *route = Some(Route::of(&self.dc.pd.dev, attr.port_num)?);
        }
        // The source GID the caller chose for the QP's path, if it gave one.
        if let (true, Some(r), Some(grh)) = (
            mask.contains(QpAttrMask::AV),
            route.as_mut(),
            attr.ah_attr.grh,
        ) {
            r.sgid_index = grh.sgid_index;
        }
        Ok(())
    }

    fn query(&self) -> Result<QpAttr> {
        qp::query(&self.dc.pd, self.qp)
    }

    fn post_send(&self, wr: &SendWr) -> Result<()> {
        let Some(to) = wr.dc else {
            return Err(FabricError::invalid(
                "ibv_post_send",
                "a DC initiator's work request needs a DC address",
            ));
        };
        let (op, remote) = match wr.op {
            SendOp::RdmaWrite(r) => (self.ops.rdma_write, r),
            SendOp::RdmaRead(r) => (self.ops.rdma_read, r),
            _ => {
                return Err(FabricError::Unsupported {
                    verb: "post_send on a DC initiator (RDMA WRITE and READ only)",
                    provider: PROVIDER,
                })
            }
        };
        if to.dct_num > 0x00ff_ffff {
            return Err(FabricError::invalid(
                "ibv_post_send",
                format!("DCT number {:#x} over 24 bits", to.dct_num),
            ));
        }
        let sges: Vec<ibv_sge> = wr
            .sg_list
            .iter()
            .map(|s| ibv_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect();
        let route = self.route()?;
        let ah = self
            .dc
            .ahs
            .get(&self.dc.pd, self.dc.fns, to.gid, to.lid, &route)?;
        let _one = self.post.lock().unwrap_or_else(|e| e.into_inner());
        let q = self.qpx.as_ptr();
        // SAFETY: the QP and its views are live; the calls are the header's
        // inline ibv_wr_start, ibv_wr_rdma_{write,read},
        // mlx5dv_wr_set_dc_addr, ibv_wr_set_sge(_list) and ibv_wr_complete,
        // in the order rdma-core documents, under `post`; `wr_id` and
        // `wr_flags` are written between start and the opcode as the
        // documentation says; the handle (held by `ah`) and the SGE array
        // (`sges`) live past wr_complete, which copies the request into the
        // send queue.
        let rc = unsafe {
            (self.ops.start)(q);
            (*q).wr_id = wr.wr_id;
            (*q).wr_flags = if wr.signaled { IBV_SEND_SIGNALED } else { 0 };
            op(q, remote.rkey, remote.addr);
            (self.ops.set_dc_addr)(self.mqpx.as_ptr(), ah.ah.as_ptr(), to.dct_num, to.dc_key);
            match sges.as_slice() {
                [s] => (self.ops.set_sge)(q, s.lkey, s.addr, s.length),
                list => (self.ops.set_sge_list)(q, list.len(), list.as_ptr()),
            }
            (self.ops.complete)(q)
        };
        check("ibv_wr_complete", rc)
    }

    fn post_recv(&self, _wr: &RecvWr) -> Result<()> {
        Err(FabricError::Unsupported {
            verb: "post_recv (a DC initiator has no receive queue)",
            provider: PROVIDER,
        })
    }
}
