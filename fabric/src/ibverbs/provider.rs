//! [`VerbsProvider`]: the seam over libibverbs.
//!
//! Each object owns one libibverbs object and holds an `Arc` of its
//! parents (a QP its PD and CQs, an MR and a PD their PD or device, a
//! device the loaded library), and releases its own object in `Drop`
//! before those `Arc`s are released, so children are always destroyed
//! before their parents, whatever order the caller drops them in.
//!
//! libibverbs' verbs are thread safe, and so are the providers' data-path
//! entries (they lock their queues), which is what makes the `Send` and
//! `Sync` implementations below sound.

use super::abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_gid, ibv_mr, ibv_pd,
    ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr,
    ibv_wc, verbs_context, VerbsQueryPortFn, IBV_ACCESS_OPTIONAL_RANGE, IBV_QPT_RC,
    VERBS_ABI_IS_EXTENDED,
};
use super::convert::{self, RawRecvWr, RawSendWr};
use super::loader::{self, IbvLib};
use super::sysfs;
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, Provider, QpInit, QpOps};
use crate::types::{
    AccessFlags, DeviceInfo, GidEntry, PortAttr, QpAttr, QpAttrMask, QpType, RecvWr, SendWr,
    WorkCompletion,
};
use std::any::Any;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, OnceLock};

const PROVIDER: &str = "verbs";

/// The calling thread's errno, read right after the failing call.
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `FabricError::Os` for `errno` (EIO when the call left errno at 0).
fn os_err(verb: &'static str, errno: i32) -> FabricError {
    FabricError::Os {
        verb,
        source: io::Error::from_raw_os_error(if errno == 0 { libc::EIO } else { errno }),
    }
}

/// libibverbs calls that return an int return 0 or an errno value; a few
/// old providers return -1 and set errno instead. Call right after the
/// verb, before anything else can change errno.
fn check(verb: &'static str, rc: c_int) -> Result<()> {
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(os_err(verb, rc)),
        _ => Err(os_err(verb, errno())),
    }
}

/// Where the provider gets libibverbs from.
#[derive(Clone)]
enum LibSource {
    /// [`loader::libibverbs`]: the soname, loaded once per process.
    Default,
    /// A chosen soname or path, loaded once per provider (and its clones).
    Path {
        path: String,
        cell: Arc<OnceLock<std::result::Result<Arc<IbvLib>, String>>>,
    },
}

/// The libibverbs provider: real RDMA devices (mlx5, bnxt_re, ionic, rxe,
/// ...) through `libibverbs.so.1`, loaded on first use.
#[derive(Clone)]
pub struct VerbsProvider {
    source: LibSource,
    sysfs_root: PathBuf,
}

impl fmt::Debug for VerbsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lib = match &self.source {
            LibSource::Default => loader::SONAME,
            LibSource::Path { path, .. } => path.as_str(),
        };
        f.debug_struct("VerbsProvider")
            .field("lib", &lib)
            .field("sysfs_root", &self.sysfs_root)
            .finish()
    }
}

impl Default for VerbsProvider {
    fn default() -> VerbsProvider {
        VerbsProvider::new()
    }
}

impl VerbsProvider {
    /// The provider over the system's `libibverbs.so.1`, with GID types
    /// read from `/sys/class/infiniband`. Nothing is loaded until a device
    /// is listed or opened.
    pub fn new() -> VerbsProvider {
        VerbsProvider {
            source: LibSource::Default,
            sysfs_root: PathBuf::from(sysfs::DEFAULT_ROOT),
        }
    }

    /// The provider over the library at `path` (a soname or a file), for
    /// tests and unusual installations.
    pub fn with_library(path: impl Into<String>) -> VerbsProvider {
        VerbsProvider {
            source: LibSource::Path {
                path: path.into(),
                cell: Arc::new(OnceLock::new()),
            },
            sysfs_root: PathBuf::from(sysfs::DEFAULT_ROOT),
        }
    }

    /// Reads GID types under `root` instead of `/sys/class/infiniband`.
    pub fn sysfs_root(mut self, root: impl Into<PathBuf>) -> VerbsProvider {
        self.sysfs_root = root.into();
        self
    }

    /// The loaded library, loading it on the first call; a failure to load
    /// is [`FabricError::NoDevice`] saying why.
    pub fn library(&self) -> Result<Arc<IbvLib>> {
        match &self.source {
            LibSource::Default => loader::libibverbs(),
            LibSource::Path { path, cell } => cell
                .get_or_init(|| match IbvLib::open(path) {
                    Ok(lib) => Ok(Arc::new(lib)),
                    Err(FabricError::NoDevice(why)) => Err(why),
                    Err(e) => Err(e.to_string()),
                })
                .clone()
                .map_err(FabricError::NoDevice),
        }
    }
}

/// `ibv_get_device_list`'s array, freed on drop.
struct DeviceList<'a> {
    lib: &'a IbvLib,
    list: NonNull<*mut ibv_device>,
    len: usize,
}

impl DeviceList<'_> {
    /// The devices, or `NoDevice` saying why there are none.
    fn get(lib: &IbvLib) -> Result<DeviceList<'_>> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter; the function has no other
        // preconditions.
        let raw = unsafe { (lib.get_device_list)(&mut n) };
        let err = errno();
        let Some(list) = NonNull::new(raw) else {
            let why = if err == libc::ENOSYS {
                "libibverbs found no RDMA devices: the kernel has no InfiniBand support (ENOSYS)"
                    .to_string()
            } else {
                format!(
                    "libibverbs found no RDMA devices: ibv_get_device_list failed: {}",
                    io::Error::from_raw_os_error(err)
                )
            };
            tracing::debug!(errno = err, "{why}");
            return Err(FabricError::NoDevice(why));
        };
        let list = DeviceList {
            lib,
            list,
            len: usize::try_from(n).unwrap_or(0),
        };
        if list.len == 0 {
            return Err(FabricError::NoDevice(
                "libibverbs found no RDMA devices: none is present, or none has a user-space \
                 driver (package ibverbs-providers)"
                    .to_string(),
            ));
        }
        Ok(list)
    }

    /// Each device with its name.
    fn devices(&self) -> Vec<(*mut ibv_device, String)> {
        (0..self.len)
            .filter_map(|i| {
                // SAFETY: the array holds `len` valid device pointers (and a
                // NULL after them) until it is freed in drop.
                let dev = unsafe { *self.list.as_ptr().add(i) };
                if dev.is_null() {
                    return None;
                }
                // SAFETY: `dev` is a device of the live list.
                let name = unsafe { (self.lib.get_device_name)(dev) };
                if name.is_null() {
                    return None;
                }
                // SAFETY: libibverbs returns the device's NUL-terminated
                // name, which lives as long as the device.
                let name = unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned();
                Some((dev, name))
            })
            .collect()
    }
}

impl Drop for DeviceList<'_> {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once;
        // devices opened from it stay valid (libibverbs keeps them).
        unsafe { (self.lib.free_device_list)(self.list.as_ptr()) };
    }
}

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        PROVIDER
    }

    fn device_names(&self) -> Result<Vec<String>> {
        let lib = self.library()?;
        let list = DeviceList::get(&lib)?;
        Ok(list.devices().into_iter().map(|(_, n)| n).collect())
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        let lib = self.library()?;
        let list = DeviceList::get(&lib)?;
        let devices = list.devices();
        let Some(&(dev, _)) = devices.iter().find(|(_, n)| n == name) else {
            let names: Vec<&str> = devices.iter().map(|(_, n)| n.as_str()).collect();
            return Err(FabricError::NoDevice(format!(
                "no RDMA device named {name:?} (libibverbs lists: {})",
                names.join(", ")
            )));
        };
        // SAFETY: `dev` belongs to the live list; opening it before the list
        // is freed is what libibverbs requires.
        let ctx = unsafe { (lib.open_device)(dev) };
        let err = errno();
        drop(list);
        let ctx = NonNull::new(ctx).ok_or_else(|| os_err("ibv_open_device", err))?;
        // From here on the context is owned: dropping `inner` closes it.
        let inner = Arc::new(DeviceInner {
            ctx,
            name: name.to_string(),
            lib: lib.clone(),
            sysfs_root: self.sysfs_root.clone(),
        });
        let mut attr = ibv_device_attr::default();
        // SAFETY: the context is open; `attr` is a valid, writable
        // ibv_device_attr.
        check("ibv_query_device", unsafe {
            (lib.query_device)(inner.ctx.as_ptr(), &mut attr)
        })?;
        let info = DeviceInfo {
            name: name.to_string(),
            vendor_id: attr.vendor_id,
            vendor_part_id: attr.vendor_part_id,
            phys_port_cnt: attr.phys_port_cnt,
            max_mr_size: attr.max_mr_size,
            supports_dmabuf: lib.has_reg_dmabuf_mr(),
            supports_dc: false,
            max_qp_rd_atom: u32::try_from(attr.max_qp_rd_atom).unwrap_or(0),
            max_qp_init_rd_atom: u32::try_from(attr.max_qp_init_rd_atom).unwrap_or(0),
        };
        tracing::debug!(
            device = name,
            vendor_id = format_args!("{:#06x}", attr.vendor_id),
            part = attr.vendor_part_id,
            fw = convert::fw_ver(&attr),
            ports = attr.phys_port_cnt,
            max_qp_rd_atom = attr.max_qp_rd_atom,
            "verbs device opened"
        );
        Ok(Arc::new(VerbsDevice { inner, info }))
    }
}

/// An open context, closed on drop.
struct DeviceInner {
    ctx: NonNull<ibv_context>,
    name: String,
    sysfs_root: PathBuf,
    // After `ctx`'s users: the library outlives the close in drop.
    lib: Arc<IbvLib>,
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
    fn query_port_raw(&self, port: u8) -> Result<ibv_port_attr> {
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
}

/// An open device.
#[derive(Debug)]
pub struct VerbsDevice {
    inner: Arc<DeviceInner>,
    info: DeviceInfo,
}

impl VerbsDevice {
    fn gid(&self, port: u8, index: c_int) -> Result<ibv_gid> {
        let mut gid = ibv_gid::default();
        // SAFETY: the context is open; `gid` is a valid, writable ibv_gid.
        let rc =
            unsafe { (self.inner.lib.query_gid)(self.inner.ctx.as_ptr(), port, index, &mut gid) };
        check("ibv_query_gid", rc)?;
        Ok(gid)
    }
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
        let attr = self.inner.query_port_raw(port)?;
        let link_layer = convert::port_attr_from_raw(&attr).link_layer;
        let len = u16::try_from(attr.gid_tbl_len.max(0)).unwrap_or(u16::MAX);
        let mut out = Vec::new();
        for index in 0..len {
            let gid = match self.gid(port, c_int::from(index)) {
                Ok(g) => convert::gid_from_raw(&g),
                Err(e) => {
                    tracing::trace!(device = %self.info.name, port, index, error = %e, "GID skipped");
                    continue;
                }
            };
            if gid.is_zero() {
                continue;
            }
            let gid_type = sysfs::gid_type(
                Path::new(&self.inner.sysfs_root),
                &self.inner.name,
                port,
                index,
                link_layer,
            );
            out.push(GidEntry {
                index,
                gid,
                gid_type,
            });
        }
        Ok(out)
    }

    fn alloc_pd(&self) -> Result<Arc<dyn PdOps>> {
        // SAFETY: the context is open.
        let pd = unsafe { (self.inner.lib.alloc_pd)(self.inner.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| os_err("ibv_alloc_pd", errno()))?;
        Ok(Arc::new(VerbsPd {
            inner: Arc::new(PdInner {
                pd,
                dev: self.inner.clone(),
            }),
        }))
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

/// A protection domain, deallocated on drop.
struct PdInner {
    pd: NonNull<ibv_pd>,
    dev: Arc<DeviceInner>,
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

/// A protection domain.
#[derive(Debug)]
pub struct VerbsPd {
    inner: Arc<PdInner>,
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
        if init.qp_type != QpType::Rc {
            return Err(FabricError::Unsupported {
                verb: "create_qp (DC initiator, needs mlx5dv)",
                provider: PROVIDER,
            });
        }
        let cq_of = |cq: &Arc<dyn CqOps>| -> Result<*mut ibv_cq> {
            cq.as_any()
                .downcast_ref::<VerbsCq>()
                .map(|c| c.cq.as_ptr())
                .ok_or_else(|| FabricError::invalid("ibv_create_qp", "a CQ of another provider"))
        };
        let mut attr = ibv_qp_init_attr {
            send_cq: cq_of(init.send_cq)?,
            recv_cq: cq_of(init.recv_cq)?,
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
        _cq: &Arc<dyn CqOps>,
        _access: AccessFlags,
        _dc_key: u64,
    ) -> Result<Box<dyn DctOps>> {
        Err(FabricError::Unsupported {
            verb: "create_dct (needs mlx5dv)",
            provider: PROVIDER,
        })
    }
}

/// A registered memory region, deregistered on drop.
pub struct VerbsMr {
    mr: NonNull<ibv_mr>,
    lkey: u32,
    rkey: u32,
    addr: u64,
    length: usize,
    access: AccessFlags,
    pd: Arc<PdInner>,
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

/// Completions moved per `poll_cq` call.
const POLL_BATCH: usize = 16;

/// A completion queue, destroyed on drop.
pub struct VerbsCq {
    cq: NonNull<ibv_cq>,
    poll: Option<super::abi::PollCqFn>,
    /// Its own completion channel, destroyed after it.
    channel: Option<NonNull<ibv_comp_channel>>,
    req_notify: Option<super::abi::ReqNotifyCqFn>,
    capacity: usize,
    dev: Arc<DeviceInner>,
}

// SAFETY: the provider's poll_cq locks the CQ (libibverbs CQs are thread
// safe unless created single-threaded, which these are not).
unsafe impl Send for VerbsCq {}
// SAFETY: as above.
unsafe impl Sync for VerbsCq {}

impl fmt::Debug for VerbsCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsCq")
            .field("device", &self.dev.name)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Drop for VerbsCq {
    fn drop(&mut self) {
        // SAFETY: the CQ was created by this provider and is destroyed once;
        // the QPs using it hold an Arc of it, so none is left.
        let rc = unsafe { (self.dev.lib.destroy_cq)(self.cq.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.dev.name, rc, "ibv_destroy_cq failed");
        }
        if let (Some(ch), Some(fns)) = (self.channel, self.dev.lib.comp_channel) {
            // SAFETY: the channel was made for this CQ alone, which is gone
            // (every event it got was acknowledged in `take_events`, so
            // ibv_destroy_cq did not wait).
            let rc = unsafe { (fns.destroy)(ch.as_ptr()) };
            if rc != 0 {
                tracing::warn!(device = %self.dev.name, rc, "ibv_destroy_comp_channel failed");
            }
        }
    }
}

impl CqOps for VerbsCq {
    fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize> {
        let Some(poll) = self.poll else {
            return Ok(0);
        };
        let mut buf = [ibv_wc::default(); POLL_BATCH];
        let mut total = 0;
        while total < max {
            let want = (max - total).min(POLL_BATCH);
            // SAFETY: the CQ is live; `buf` has room for `want` (at most
            // POLL_BATCH) completions. This is the header's inline
            // ibv_poll_cq: cq->context->ops.poll_cq(cq, n, wc).
            let n = unsafe { poll(self.cq.as_ptr(), want as c_int, buf.as_mut_ptr()) };
            if n < 0 {
                if total > 0 {
                    // Hand over what was polled; the error repeats next time.
                    break;
                }
                return Err(FabricError::Os {
                    verb: "ibv_poll_cq",
                    source: io::Error::other(format!("the provider's poll_cq returned {n}")),
                });
            }
            let n = usize::try_from(n).unwrap_or(0).min(want);
            out.extend(buf[..n].iter().map(convert::wc_from_raw));
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        // SAFETY: the channel lives as long as this CQ.
        self.channel.map(|ch| unsafe { (*ch.as_ptr()).fd })
    }

    fn arm(&self) -> Result<()> {
        let (Some(_), Some(notify)) = (self.channel, self.req_notify) else {
            return Ok(());
        };
        // SAFETY: the CQ is live; this is the header's inline
        // ibv_req_notify_cq: cq->context->ops.req_notify_cq(cq, 0).
        let rc = unsafe { notify(self.cq.as_ptr(), 0) };
        check("ibv_req_notify_cq", rc)
    }

    fn take_events(&self) -> Result<u32> {
        let (Some(ch), Some(fns)) = (self.channel, self.dev.lib.comp_channel) else {
            return Ok(0);
        };
        let mut n: u32 = 0;
        loop {
            let mut cq: *mut ibv_cq = ptr::null_mut();
            let mut ctx: *mut c_void = ptr::null_mut();
            // SAFETY: the channel is live and nonblocking; the out pointers
            // are live locals.
            let rc = unsafe { (fns.get_event)(ch.as_ptr(), &mut cq, &mut ctx) };
            if rc != 0 {
                break;
            }
            n = n.saturating_add(1);
        }
        if n > 0 {
            // SAFETY: acknowledges exactly the events just taken for this CQ
            // (its channel serves no other).
            unsafe { (fns.ack)(self.cq.as_ptr(), n) };
        }
        Ok(n)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An RC queue pair, destroyed on drop.
pub struct VerbsQp {
    qp: NonNull<ibv_qp>,
    qp_num: u32,
    post_send: Option<super::abi::PostSendFn>,
    post_recv: Option<super::abi::PostRecvFn>,
    pd: Arc<PdInner>,
    _send_cq: Arc<dyn CqOps>,
    _recv_cq: Arc<dyn CqOps>,
}

// SAFETY: libibverbs' QP verbs and the providers' post entries are thread
// safe (providers lock their work queues).
unsafe impl Send for VerbsQp {}
// SAFETY: as above.
unsafe impl Sync for VerbsQp {}

impl fmt::Debug for VerbsQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsQp")
            .field("device", &self.pd.dev.name)
            .field("qp_num", &self.qp_num)
            .finish()
    }
}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        // SAFETY: the QP was created by this provider and is destroyed once,
        // before the PD and CQs it holds are released.
        let rc = unsafe { (self.pd.dev.lib.destroy_qp)(self.qp.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.pd.dev.name, qp_num = self.qp_num, rc, "ibv_destroy_qp failed");
        }
    }
}

impl QpOps for VerbsQp {
    fn qp_num(&self) -> u32 {
        self.qp_num
    }

    fn qp_type(&self) -> QpType {
        QpType::Rc
    }

    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let mask = convert::modify_mask(mask)?;
        let mut raw: ibv_qp_attr = convert::qp_attr_to_raw(attr);
        // SAFETY: the QP is live; `raw` is a valid ibv_qp_attr whose masked
        // fields are set.
        let rc = unsafe { (self.pd.dev.lib.modify_qp)(self.qp.as_ptr(), &mut raw, mask) };
        check("ibv_modify_qp", rc)
    }

    fn query(&self) -> Result<QpAttr> {
        let mut raw = ibv_qp_attr::default();
        let mut init = ibv_qp_init_attr::default();
        // STATE alone is enough for every provider to fill in the rest;
        // asking for the supported set documents what is read.
        let mask = convert::SUPPORTED_MASK.bits() as c_int;
        // SAFETY: the QP is live; `raw` and `init` are valid out-parameters.
        let rc = unsafe { (self.pd.dev.lib.query_qp)(self.qp.as_ptr(), &mut raw, mask, &mut init) };
        check("ibv_query_qp", rc)?;
        convert::qp_attr_from_raw(&raw)
    }

    fn post_send(&self, wr: &SendWr) -> Result<()> {
        let Some(post) = self.post_send else {
            return Err(FabricError::Unsupported {
                verb: "ibv_post_send (no post_send entry in the context's ops)",
                provider: PROVIDER,
            });
        };
        let mut raw = RawSendWr::new(wr)?;
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is live; the WR and the SGE array it points to are
        // owned by `raw`, which lives until after the call (the provider
        // copies the WR into its queue before returning). This is the
        // header's inline ibv_post_send: qp->context->ops.post_send(...).
        let rc = unsafe { post(self.qp.as_ptr(), raw.wr(), &mut bad) };
        check("ibv_post_send", rc)
    }

    fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        let Some(post) = self.post_recv else {
            return Err(FabricError::Unsupported {
                verb: "ibv_post_recv (no post_recv entry in the context's ops)",
                provider: PROVIDER,
            });
        };
        let mut raw = RawRecvWr::new(wr)?;
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        // SAFETY: as post_send, for the receive queue.
        let rc = unsafe { post(self.qp.as_ptr(), raw.wr(), &mut bad) };
        check("ibv_post_recv", rc)
    }
}
