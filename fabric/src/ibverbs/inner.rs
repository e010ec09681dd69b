//! The owned libibverbs context and protection domain: the objects made
//! from them (PDs, CQs, MRs, QPs) hold an `Arc` of these, so a parent is
//! released only after its children.

use super::abi::{
    ibv_context, ibv_gid, ibv_gid_entry, ibv_pd, ibv_port_attr, verbs_context, VerbsQueryPortFn,
    IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2, VERBS_ABI_IS_EXTENDED,
};
use super::convert;
use super::loader::IbvLib;
use super::os::check;
use super::sysfs;
use crate::error::{FabricError, Result};
use crate::types::{GidEntry, GidType, LinkLayer};
use hipobj_wire::Gid;
use std::ffi::c_int;
use std::fmt;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// An open context, closed on drop.
pub(super) struct DeviceInner {
    pub(super) ctx: NonNull<ibv_context>,
    pub(super) name: String,
    pub(super) sysfs_root: PathBuf,
    // After `ctx`'s users: the library outlives the close in drop.
    pub(super) lib: Arc<IbvLib>,
}

// SAFETY: an ibv_context may be used and closed from any thread; libibverbs
// serialises what needs it internally.
unsafe impl Send for DeviceInner {}
// SAFETY: every verb taking a context is thread safe.
unsafe impl Sync for DeviceInner {}

impl fmt::Debug for DeviceInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceInner")
            .field("name", &self.name)
            .field("ctx", &self.ctx)
            .finish()
    }
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // SAFETY: the context was opened by ibv_open_device and is closed
        // once; every child object holds an Arc of this, so none is left.
        let rc = unsafe { (self.lib.close_device)(self.ctx.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.name, rc, "ibv_close_device failed");
        }
    }
}

impl DeviceInner {
    /// The extended `query_port` entry, found as the header's
    /// `verbs_get_ctx_op(ctx, query_port)` finds it: only when the context
    /// is the tail of a `verbs_context` (`abi_compat` is
    /// `__VERBS_ABI_IS_EXTENDED`), the provider's `sz` covers the entry,
    /// and the entry is set.
    fn extended_query_port(&self) -> Option<VerbsQueryPortFn> {
        let ctx = self.ctx.as_ptr();
        // SAFETY: the context is open and valid for reads; this copies one
        // pointer-sized field.
        let abi_compat = unsafe { (*ctx).abi_compat } as usize;
        if abi_compat != VERBS_ABI_IS_EXTENDED {
            return None;
        }
        let vctx = ctx
            .cast::<u8>()
            .wrapping_sub(offset_of!(verbs_context, context))
            .cast::<verbs_context>();
        // SAFETY: abi_compat says the context is the last field of a
        // verbs_context allocated by libibverbs, so `vctx` points at its
        // start and `sz`, immediately before `context`, is always there.
        let sz = unsafe { (*vctx).sz };
        if sz < size_of::<verbs_context>() - offset_of!(verbs_context, query_port) {
            return None;
        }
        // SAFETY: `sz` says the provider's structure reaches back as far as
        // `query_port`, so the field is part of the allocation.
        unsafe { (*vctx).query_port }
    }

    /// `ibv_query_port`, as the header's inline `___ibv_query_port` does it.
    pub(super) fn query_port_raw(&self, port: u8) -> Result<ibv_port_attr> {
        let mut attr = ibv_port_attr::default();
        let rc = match self.extended_query_port() {
            // SAFETY: the entry belongs to this open context; `attr` is a
            // full ibv_port_attr and its size is passed with it.
            Some(f) => unsafe {
                f(
                    self.ctx.as_ptr(),
                    port,
                    &mut attr,
                    size_of::<ibv_port_attr>(),
                )
            },
            // SAFETY: the exported function writes at most the compat
            // prefix of ibv_port_attr, which `attr` (zeroed, as the header
            // does) is large enough for.
            None => unsafe { (self.lib.query_port)(self.ctx.as_ptr(), port, &mut attr) },
        };
        check("ibv_query_port", rc)?;
        Ok(attr)
    }

    fn gid(&self, port: u8, index: c_int) -> Result<ibv_gid> {
        let mut gid = ibv_gid::default();
        // SAFETY: the context is open; `gid` is a valid, writable ibv_gid.
        let rc = unsafe { (self.lib.query_gid)(self.ctx.as_ptr(), port, index, &mut gid) };
        check("ibv_query_gid", rc)?;
        Ok(gid)
    }

    /// GID `index` with its type from libibverbs (`_ibv_query_gid_ex`,
    /// rdma-core 32 and later): `None` where the library lacks it or
    /// declines (`EOPNOTSUPP`/`ENOSYS`), so the caller uses `ibv_query_gid`
    /// and sysfs; `Some(Err)` for an entry that is not there (`ENODATA` for
    /// an empty one).
    fn gid_ex(
        &self,
        port: u8,
        index: u16,
        link_layer: LinkLayer,
    ) -> Option<Result<(Gid, GidType)>> {
        let f = self.lib.query_gid_ex?;
        let mut e = ibv_gid_entry::default();
        // SAFETY: the context is open; `e` is a writable entry of the size
        // passed, and flags are 0 as rdma-core requires.
        let rc = unsafe {
            f(
                self.ctx.as_ptr(),
                u32::from(port),
                u32::from(index),
                &mut e,
                0,
                size_of::<ibv_gid_entry>(),
            )
        };
        if rc == libc::EOPNOTSUPP || rc == libc::ENOSYS {
            return None;
        }
        if rc != 0 {
            return Some(Err(FabricError::Os {
                verb: "ibv_query_gid_ex",
                source: std::io::Error::from_raw_os_error(rc),
            }));
        }
        let gid_type = match (e.gid_type, link_layer) {
            (IBV_GID_TYPE_ROCE_V2, _) => GidType::RoceV2,
            (IBV_GID_TYPE_ROCE_V1, _) => GidType::RoceV1,
            (IBV_GID_TYPE_IB, LinkLayer::InfiniBand) => GidType::Ib,
            (IBV_GID_TYPE_IB, LinkLayer::Ethernet) => GidType::RoceV1,
            _ => GidType::Unknown,
        };
        Some(Ok((convert::gid_from_raw(&e.gid), gid_type)))
    }

    /// The configured entries of the port's GID table (all-zero entries and
    /// those libibverbs can't read are left out), each with its type: from
    /// libibverbs where it says (`ibv_query_gid_ex`), else from sysfs.
    pub(super) fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let attr = self.query_port_raw(port)?;
        let link_layer = convert::port_attr_from_raw(&attr).link_layer;
        let len = u16::try_from(attr.gid_tbl_len.max(0)).unwrap_or(u16::MAX);
        let mut out = Vec::new();
        for index in 0..len {
            let found = match self.gid_ex(port, index, link_layer) {
                Some(r) => r.map(|(g, t)| (g, Some(t))),
                None => self
                    .gid(port, c_int::from(index))
                    .map(|g| (convert::gid_from_raw(&g), None)),
            };
            let (gid, gid_type) = match found {
                Ok(f) => f,
                Err(e) => {
                    tracing::trace!(device = %self.name, port, index, error = %e, "GID skipped");
                    continue;
                }
            };
            if gid.is_zero() {
                continue;
            }
            let gid_type = gid_type.unwrap_or_else(|| {
                sysfs::gid_type(
                    Path::new(&self.sysfs_root),
                    &self.name,
                    port,
                    index,
                    link_layer,
                )
            });
            out.push(GidEntry {
                index,
                gid,
                gid_type,
            });
        }
        Ok(out)
    }
}

/// A protection domain, deallocated on drop.
pub(super) struct PdInner {
    pub(super) pd: NonNull<ibv_pd>,
    pub(super) dev: Arc<DeviceInner>,
}

// SAFETY: PDs are used by thread-safe verbs only (see DeviceInner).
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl fmt::Debug for PdInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PdInner")
            .field("device", &self.dev.name)
            .field("pd", &self.pd)
            .finish()
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: the PD was allocated by ibv_alloc_pd and is deallocated
        // once; MRs and QPs hold an Arc of this, so none is left.
        let rc = unsafe { (self.dev.lib.dealloc_pd)(self.pd.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.dev.name, rc, "ibv_dealloc_pd failed");
        }
    }
}
