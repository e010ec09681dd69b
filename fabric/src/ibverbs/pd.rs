//! [`VerbsPd`]: a protection domain, and the MRs and QPs made in it.

use super::abi::{
    ibv_cq, ibv_mr, ibv_qp_cap, ibv_qp_init_attr, IBV_ACCESS_OPTIONAL_RANGE, IBV_QPT_RC,
};
use super::cq::VerbsCq;
use super::inner::PdInner;
use super::mlx5dv::{self, DcPd};
use super::mr::VerbsMr;
use super::os::{errno, os_err, PROVIDER};
use super::qp::VerbsQp;
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DctOps, MrOps, PdOps, QpInit, QpOps};
use crate::types::{AccessFlags, QpType};
use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

/// A protection domain.
#[derive(Debug)]
pub struct VerbsPd {
    pub(super) inner: Arc<PdInner>,
    /// The DC side, or why the device has none.
    pub(super) dc: std::result::Result<Arc<DcPd>, String>,
}

/// The libibverbs CQ behind a seam CQ of this provider.
fn cq_of(verb: &'static str, cq: &Arc<dyn CqOps>) -> Result<*mut ibv_cq> {
    cq.as_any()
        .downcast_ref::<VerbsCq>()
        .map(|c| c.cq.as_ptr())
        .ok_or_else(|| FabricError::invalid(verb, "a CQ of another provider"))
}

impl VerbsPd {
    fn wrap_mr(
        &self,
        verb: &'static str,
        mr: *mut ibv_mr,
        addr: Option<u64>,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        let mr = NonNull::new(mr).ok_or_else(|| os_err(verb, errno()))?;
        // SAFETY: `mr` was just returned by libibverbs and is valid for reads.
        let (lkey, rkey, raw_addr, length) = unsafe {
            let m = &*mr.as_ptr();
            (m.lkey, m.rkey, m.addr as u64, m.length)
        };
        Ok(Box::new(VerbsMr {
            mr,
            lkey,
            rkey,
            addr: addr.unwrap_or(raw_addr),
            length,
            access,
            pd: self.inner.clone(),
        }))
    }
}

impl PdOps for VerbsPd {
    unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        let lib = &self.inner.dev.lib;
        let pd = self.inner.pd.as_ptr();
        // As the header's ibv_reg_mr macro: the plain entry unless an access
        // flag in the optional range needs ibv_reg_mr_iova2.
        let mr = match lib.reg_mr_iova2 {
            Some(iova2) if access.bits() & IBV_ACCESS_OPTIONAL_RANGE != 0 => {
                // SAFETY: the caller guarantees that the memory is owned and
                // stays allocated while registered; the PD is live.
                unsafe { iova2(pd, addr.cast::<c_void>(), len, addr as u64, access.bits()) }
            }
            _ => {
                let bits = c_int::try_from(access.bits()).map_err(|_| {
                    FabricError::invalid("ibv_reg_mr", format!("access {access:?}"))
                })?;
                // SAFETY: as above.
                unsafe { (lib.reg_mr)(pd, addr.cast::<c_void>(), len, bits) }
            }
        };
        self.wrap_mr("ibv_reg_mr", mr, None, access)
    }

    fn reg_dmabuf_mr(
        &self,
        fd: RawFd,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        let Some(reg) = self.inner.dev.lib.reg_dmabuf_mr else {
            return Err(FabricError::Unsupported {
                verb: "ibv_reg_dmabuf_mr (libibverbs older than rdma-core 34)",
                provider: PROVIDER,
            });
        };
        let bits = c_int::try_from(access.bits())
            .map_err(|_| FabricError::invalid("ibv_reg_dmabuf_mr", format!("access {access:?}")))?;
        // SAFETY: the PD is live; the kernel checks the fd (a bad one is an
        // error, not undefined behaviour) and takes its own reference to the
        // dma-buf, so the caller may close the fd afterwards.
        let mr = unsafe { reg(self.inner.pd.as_ptr(), offset, len, iova, fd, bits) };
        self.wrap_mr("ibv_reg_dmabuf_mr", mr, Some(iova), access)
    }

    fn create_qp(&self, init: QpInit<'_>) -> Result<Box<dyn QpOps>> {
        if init.qp_type == QpType::DcInitiator {
            let send_cq = cq_of("mlx5dv_create_qp", init.send_cq)?;
            let recv_cq = cq_of("mlx5dv_create_qp", init.recv_cq)?;
            return match &self.dc {
                Ok(dc) => mlx5dv::dci::create(dc, &init, send_cq, recv_cq),
                Err(why) => Err(mlx5dv::not_available("create_qp (DC initiator)", why)),
            };
        }
        let mut attr = ibv_qp_init_attr {
            send_cq: cq_of("ibv_create_qp", init.send_cq)?,
            recv_cq: cq_of("ibv_create_qp", init.recv_cq)?,
            cap: ibv_qp_cap {
                max_send_wr: init.cap.max_send_wr,
                max_recv_wr: init.cap.max_recv_wr,
                max_send_sge: init.cap.max_send_sge,
                max_recv_sge: init.cap.max_recv_sge,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
            ..ibv_qp_init_attr::default()
        };
        // SAFETY: the PD and both CQs are live (the QP will hold them);
        // `attr` is a valid ibv_qp_init_attr.
        let qp = unsafe { (self.inner.dev.lib.create_qp)(self.inner.pd.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or_else(|| os_err("ibv_create_qp", errno()))?;
        // SAFETY: `qp` was just created; its context is the open device's.
        let (qp_num, post_send, post_recv) = unsafe {
            let q = qp.as_ptr();
            let ops = &(*(*q).context).ops;
            ((*q).qp_num, ops.post_send, ops.post_recv)
        };
        tracing::debug!(device = %self.inner.dev.name, qp_num, "RC QP created");
        Ok(Box::new(VerbsQp {
            qp,
            qp_num,
            post_send,
            post_recv,
            pd: self.inner.clone(),
            _send_cq: init.send_cq.clone(),
            _recv_cq: init.recv_cq.clone(),
        }))
    }

    fn create_dct(
        &self,
        cq: &Arc<dyn CqOps>,
        access: AccessFlags,
        dc_key: u64,
    ) -> Result<Box<dyn DctOps>> {
        let raw_cq = cq_of("mlx5dv_create_qp", cq)?;
        match &self.dc {
            Ok(dc) => mlx5dv::dct::create(dc, cq, raw_cq, access, dc_key),
            Err(why) => Err(mlx5dv::not_available("create_dct", why)),
        }
    }
}
