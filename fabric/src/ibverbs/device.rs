//! [`VerbsDevice`]: an open libibverbs context, its port and GID table,
//! and the PDs, CQs and completion channels made from it.

use super::abi::ibv_comp_channel;
use super::convert;
use super::cq::VerbsCq;
use super::inner::{DeviceInner, PdInner};
use super::mlx5dv::{DcPd, DcSupport};
use super::os::{errno, os_err, PROVIDER};
use super::pd::VerbsPd;
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DeviceOps, PdOps};
use crate::types::{DeviceInfo, GidEntry, PortAttr};
use std::ffi::c_int;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// An open device.
#[derive(Debug)]
pub struct VerbsDevice {
    pub(super) inner: Arc<DeviceInner>,
    pub(super) info: DeviceInfo,
    /// libmlx5, or why this device has no DC.
    pub(super) dc: DcSupport,
}

impl DeviceOps for VerbsDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        Ok(convert::port_attr_from_raw(
            &self.inner.query_port_raw(port)?,
        ))
    }

    /// The configured entries of the port's GID table (all-zero entries and
    /// those libibverbs can't read are left out), each with its type from
    /// sysfs.
    fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        self.inner.gid_table(port)
    }

    fn alloc_pd(&self) -> Result<Arc<dyn PdOps>> {
        // SAFETY: the context is open.
        let pd = unsafe { (self.inner.lib.alloc_pd)(self.inner.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| os_err("ibv_alloc_pd", errno()))?;
        let inner = Arc::new(PdInner {
            pd,
            dev: self.inner.clone(),
        });
        let dc = DcPd::new(&self.dc, &inner).map(Arc::new);
        Ok(Arc::new(VerbsPd { inner, dc }))
    }

    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn CqOps>> {
        let n = c_int::try_from(cqe)
            .map_err(|_| FabricError::invalid("ibv_create_cq", format!("{cqe} entries")))?;
        let channel = self.comp_channel();
        let channel_ptr = channel.map_or(ptr::null_mut(), |c| c.as_ptr());
        // SAFETY: the context is open; the channel is null or one this
        // context just made; no context pointer; vector 0 (which every
        // device has).
        let cq = unsafe {
            (self.inner.lib.create_cq)(self.inner.ctx.as_ptr(), n, ptr::null_mut(), channel_ptr, 0)
        };
        let Some(cq) = NonNull::new(cq) else {
            let e = os_err("ibv_create_cq", errno());
            if let (Some(ch), Some(fns)) = (channel, self.inner.lib.comp_channel) {
                // SAFETY: the channel was made above and no CQ uses it.
                unsafe { (fns.destroy)(ch.as_ptr()) };
            }
            return Err(e);
        };
        // SAFETY: `cq` was just created and is valid for reads.
        let (poll, req_notify, capacity) = unsafe {
            let ctx = (*cq.as_ptr()).context;
            (
                (*ctx).ops.poll_cq,
                (*ctx).ops.req_notify_cq,
                (*cq.as_ptr()).cqe,
            )
        };
        let cq = VerbsCq {
            cq,
            poll,
            // A channel is only of use with a way to arm the CQ.
            channel: channel.filter(|_| req_notify.is_some()),
            req_notify,
            capacity: usize::try_from(capacity).unwrap_or(0),
            dev: self.inner.clone(),
        };
        if cq.poll.is_none() {
            return Err(FabricError::Unsupported {
                verb: "ibv_poll_cq (no poll_cq entry in the context's ops)",
                provider: PROVIDER,
            });
        }
        Ok(Arc::new(cq))
    }
}

impl VerbsDevice {
    /// A new completion channel with a nonblocking descriptor, when the
    /// library has the functions; `None` (the CQ is then polled) otherwise
    /// or if the channel can't be made.
    fn comp_channel(&self) -> Option<NonNull<ibv_comp_channel>> {
        let fns = self.inner.lib.comp_channel?;
        // SAFETY: the context is open.
        let ch = NonNull::new(unsafe { (fns.create)(self.inner.ctx.as_ptr()) });
        let Some(ch) = ch else {
            tracing::debug!(device = %self.inner.name, error = %io::Error::last_os_error(), "no completion channel; CQ waiters will poll");
            return None;
        };
        // SAFETY: `ch` was just made; its fd is the channel's own. Making it
        // nonblocking is what rdma-core's documentation asks of callers
        // that poll the channel from an event loop.
        let ok = unsafe {
            let fd = (*ch.as_ptr()).fd;
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !ok {
            // SAFETY: made above, used by no CQ.
            unsafe { (fns.destroy)(ch.as_ptr()) };
            return None;
        }
        Some(ch)
    }
}
