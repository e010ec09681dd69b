//! A provider wrapper that makes fake GPU memory behave as a NIC sees it.

use super::FakeHip;
use hipobj_fabric::error::{FabricError, Result as FabricResult};
use hipobj_fabric::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, Provider, QpInit, QpOps};
use hipobj_fabric::{AccessFlags, DeviceInfo, GidEntry, PortAttr};
use std::os::fd::RawFd;
use std::sync::Arc;

/// Whether `[addr, addr + len)` is fake device memory.
pub type IsDevice = Arc<dyn Fn(usize, usize) -> bool + Send + Sync>;

/// A provider that shows fake GPU memory as a NIC would: a plain
/// registration of device memory fails unless `plain_device_mr` is set,
/// and dma-buf registration works when `dmabuf` is set (the fake's device
/// memory is host memory at the I/O virtual address, so the inner provider
/// registers that).
pub struct GpuView {
    inner: Arc<dyn Provider>,
    hip: IsDevice,
    /// Whether dma-buf registration works.
    pub dmabuf: bool,
    /// Whether a plain MR over device memory works.
    pub plain_device_mr: bool,
}

impl GpuView {
    /// Wraps `inner`, with `hip`'s device memory.
    pub fn new(
        inner: Arc<dyn Provider>,
        hip: Arc<FakeHip>,
        dmabuf: bool,
        plain_device_mr: bool,
    ) -> GpuView {
        let is_device: IsDevice = Arc::new(move |a, l| hip.is_device_range(a, l));
        GpuView::over(inner, is_device, dmabuf, plain_device_mr)
    }

    /// Wraps `inner`, with the device memory `is_device` says (a stub
    /// runtime's, or several runtimes').
    pub fn over(
        inner: Arc<dyn Provider>,
        is_device: IsDevice,
        dmabuf: bool,
        plain_device_mr: bool,
    ) -> GpuView {
        GpuView {
            inner,
            hip: is_device,
            dmabuf,
            plain_device_mr,
        }
    }
}

impl std::fmt::Debug for GpuView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuView")
            .field("dmabuf", &self.dmabuf)
            .field("plain_device_mr", &self.plain_device_mr)
            .finish()
    }
}

struct ViewDevice {
    inner: Arc<dyn DeviceOps>,
    info: DeviceInfo,
    hip: IsDevice,
    plain_device_mr: bool,
}

struct ViewPd {
    inner: Arc<dyn PdOps>,
    hip: IsDevice,
    dmabuf: bool,
    plain_device_mr: bool,
}

impl std::fmt::Debug for ViewDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewDevice")
            .field("info", &self.info)
            .finish()
    }
}

impl std::fmt::Debug for ViewPd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewPd")
            .field("dmabuf", &self.dmabuf)
            .field("plain_device_mr", &self.plain_device_mr)
            .finish()
    }
}

impl Provider for GpuView {
    fn name(&self) -> &'static str {
        "gpu-view"
    }
    fn device_names(&self) -> FabricResult<Vec<String>> {
        self.inner.device_names()
    }
    fn open_device(&self, name: &str) -> FabricResult<Arc<dyn DeviceOps>> {
        let inner = self.inner.open_device(name)?;
        let mut info = inner.info().clone();
        info.supports_dmabuf = self.dmabuf;
        Ok(Arc::new(ViewDevice {
            inner,
            info,
            hip: self.hip.clone(),
            plain_device_mr: self.plain_device_mr,
        }))
    }
}

impl DeviceOps for ViewDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn query_port(&self, port: u8) -> FabricResult<PortAttr> {
        self.inner.query_port(port)
    }
    fn gid_table(&self, port: u8) -> FabricResult<Vec<GidEntry>> {
        self.inner.gid_table(port)
    }
    fn alloc_pd(&self) -> FabricResult<Arc<dyn PdOps>> {
        Ok(Arc::new(ViewPd {
            inner: self.inner.alloc_pd()?,
            hip: self.hip.clone(),
            dmabuf: self.info.supports_dmabuf,
            plain_device_mr: self.plain_device_mr,
        }))
    }
    fn create_cq(&self, cqe: u32) -> FabricResult<Arc<dyn CqOps>> {
        self.inner.create_cq(cqe)
    }
}

impl PdOps for ViewPd {
    unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> FabricResult<Box<dyn MrOps>> {
        if !self.plain_device_mr && (self.hip)(addr as usize, len) {
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
        _fd: RawFd,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> FabricResult<Box<dyn MrOps>> {
        if !self.dmabuf {
            return Err(FabricError::Unsupported {
                verb: "reg_dmabuf_mr",
                provider: "gpu-view",
            });
        }
        // The registration is addressed by `iova`, the buffer's address;
        // `offset` is where it starts in the dma-buf (which may begin below
        // it, at a page boundary).
        let _ = offset;
        let addr = iova as usize;
        if !(self.hip)(addr, len) {
            return Err(FabricError::Os {
                verb: "reg_dmabuf_mr",
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        // SAFETY: the range is fake device memory, which the fake runtime
        // keeps allocated for its whole lifetime, and it outlives this PD.
        unsafe { self.inner.reg_mr(addr as *mut u8, len, access) }
    }

    fn create_qp(&self, init: QpInit<'_>) -> FabricResult<Box<dyn QpOps>> {
        self.inner.create_qp(init)
    }

    fn create_dct(
        &self,
        cq: &Arc<dyn CqOps>,
        access: AccessFlags,
        dc_key: u64,
    ) -> FabricResult<Box<dyn DctOps>> {
        self.inner.create_dct(cq, access, dc_key)
    }
}
