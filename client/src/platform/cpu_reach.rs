//! The software provider as a NIC without peer memory: it moves bytes with
//! the CPU, which cannot dereference GPU memory, so on the production
//! platform a plain registration of memory a GPU runtime calls device
//! memory fails with `EFAULT`, as `ibv_reg_mr` does on a NIC without
//! nvidia-peermem or amdgpu peer memory. Registration then falls back to
//! a pinned staging buffer, which the software provider can reach.
//! (Without this, the plain MR would succeed and the provider's first
//! read or write of it would fault.)

use super::gpu::{HipRuntime, MemoryType};
use hipobj_fabric::error::{FabricError, Result};
use hipobj_fabric::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, QpInit, QpOps};
use hipobj_fabric::{AccessFlags, DeviceInfo, GidEntry, PortAttr};
use std::os::fd::RawFd;
use std::sync::Arc;

/// A device whose protection domains refuse plain MRs over GPU memory.
#[derive(Debug)]
pub(crate) struct CpuReachDevice {
    inner: Arc<dyn DeviceOps>,
    gpus: Arc<dyn HipRuntime>,
}

impl CpuReachDevice {
    pub(crate) fn wrap(inner: Arc<dyn DeviceOps>, gpus: Arc<dyn HipRuntime>) -> Arc<dyn DeviceOps> {
        Arc::new(CpuReachDevice { inner, gpus })
    }
}

#[derive(Debug)]
struct CpuReachPd {
    inner: Arc<dyn PdOps>,
    gpus: Arc<dyn HipRuntime>,
}

impl DeviceOps for CpuReachDevice {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.inner.query_port(port)
    }
    fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        self.inner.gid_table(port)
    }
    fn alloc_pd(&self) -> Result<Arc<dyn PdOps>> {
        Ok(Arc::new(CpuReachPd {
            inner: self.inner.alloc_pd()?,
            gpus: self.gpus.clone(),
        }))
    }
    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn CqOps>> {
        self.inner.create_cq(cqe)
    }
}

impl PdOps for CpuReachPd {
    unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        let device = self
            .gpus
            .pointer_attributes(addr as usize)
            .is_ok_and(|a| a.memory_type == MemoryType::Device);
        if device {
            return Err(FabricError::Os {
                verb: "reg_mr",
                source: std::io::Error::from_raw_os_error(libc::EFAULT),
            });
        }
        // SAFETY: forwarded with the caller's promise.
        unsafe { self.inner.reg_mr(addr, len, access) }
    }

    fn reg_dmabuf_mr(
        &self,
        fd: RawFd,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        self.inner.reg_dmabuf_mr(fd, offset, len, iova, access)
    }

    fn create_qp(&self, init: QpInit<'_>) -> Result<Box<dyn QpOps>> {
        self.inner.create_qp(init)
    }

    fn create_dct(
        &self,
        cq: &Arc<dyn CqOps>,
        access: AccessFlags,
        dc_key: u64,
    ) -> Result<Box<dyn DctOps>> {
        self.inner.create_dct(cq, access, dc_key)
    }
}
