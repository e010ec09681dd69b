//! [`VerbsMr`]: a registered memory region (host memory or a dma-buf).

use super::abi::ibv_mr;
use super::inner::PdInner;
use crate::seam::MrOps;
use crate::types::AccessFlags;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// A registered memory region, deregistered on drop.
pub struct VerbsMr {
    pub(super) mr: NonNull<ibv_mr>,
    pub(super) lkey: u32,
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) length: usize,
    pub(super) access: AccessFlags,
    pub(super) pd: Arc<PdInner>,
}

// SAFETY: the MR is only read at creation and deregistered once, from
// whichever thread drops it; ibv_dereg_mr is thread safe.
unsafe impl Send for VerbsMr {}
// SAFETY: shared access reads copied fields only.
unsafe impl Sync for VerbsMr {}

impl fmt::Debug for VerbsMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsMr")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("length", &self.length)
            .field("lkey", &format_args!("{:#x}", self.lkey))
            .field("rkey", &format_args!("{:#x}", self.rkey))
            .field("access", &self.access)
            .finish()
    }
}

impl Drop for VerbsMr {
    fn drop(&mut self) {
        // SAFETY: the MR was registered by this provider and is deregistered
        // once; the PD (held by `pd`) is still allocated.
        let rc = unsafe { (self.pd.dev.lib.dereg_mr)(self.mr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.pd.dev.name, rc, "ibv_dereg_mr failed");
        }
    }
}

impl MrOps for VerbsMr {
    fn lkey(&self) -> u32 {
        self.lkey
    }
    fn rkey(&self) -> u32 {
        self.rkey
    }
    fn addr(&self) -> u64 {
        self.addr
    }
    fn length(&self) -> usize {
        self.length
    }
    fn access(&self) -> AccessFlags {
        self.access
    }
}
