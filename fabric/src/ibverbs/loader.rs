//! Loading `libibverbs.so.1` at run time.
//!
//! The crate never links to libibverbs: [`libibverbs`] opens the library by
//! its soname on first use (the runtime package, `libibverbs1` on Debian,
//! installs it) and resolves every function once into an [`IbvLib`] table.
//! A process that never uses the verbs provider never loads it, and once
//! loaded it stays loaded (the table lives in a process-wide cell and every
//! verbs object holds an `Arc` of it).
//!
//! `dlsym` returns each symbol's default version (`ibv_query_port` is
//! exported as `ibv_query_port@@IBVERBS_1.1`, `ibv_reg_mr` likewise), which
//! is the one a program built against the current header calls. Two
//! symbols are optional: `ibv_reg_dmabuf_mr` (rdma-core 34 and later) and
//! `ibv_reg_mr_iova2` (rdma-core 29 and later). `ibv_poll_cq`,
//! `ibv_post_send` and `ibv_post_recv` are inline functions in the header,
//! not exported symbols: the provider calls the entries in the context's
//! ops table, as the inline functions do.

use super::abi::{
    ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_gid,
    ibv_gid_entry, ibv_mr, ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_init_attr,
};
use super::abi_ex::{ibv_ah, ibv_qp_ex, ibv_srq, ibv_srq_init_attr};
use crate::error::{FabricError, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The soname the provider opens.
pub const SONAME: &str = "libibverbs.so.1";

/// `ibv_get_device_list`.
pub type GetDeviceListFn = unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut ibv_device;
/// `ibv_free_device_list`.
pub type FreeDeviceListFn = unsafe extern "C" fn(list: *mut *mut ibv_device);
/// `ibv_get_device_name`.
pub type GetDeviceNameFn = unsafe extern "C" fn(device: *mut ibv_device) -> *const c_char;
/// `ibv_open_device`.
pub type OpenDeviceFn = unsafe extern "C" fn(device: *mut ibv_device) -> *mut ibv_context;
/// `ibv_close_device`.
pub type CloseDeviceFn = unsafe extern "C" fn(context: *mut ibv_context) -> c_int;
/// `ibv_query_device`.
pub type QueryDeviceFn =
    unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
/// `ibv_query_port` as exported (its last argument is really a
/// `struct _compat_ibv_port_attr *`, a prefix of `ibv_port_attr`).
pub type QueryPortFn =
    unsafe extern "C" fn(context: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
/// `ibv_query_gid`.
pub type QueryGidFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int;
/// `_ibv_query_gid_ex` (what the header's `ibv_query_gid_ex` calls).
pub type QueryGidExFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int;
/// `ibv_alloc_pd`.
pub type AllocPdFn = unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_pd;
/// `ibv_dealloc_pd`.
pub type DeallocPdFn = unsafe extern "C" fn(pd: *mut ibv_pd) -> c_int;
/// `ibv_reg_mr` as exported.
pub type RegMrFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr;
/// `ibv_reg_mr_iova2`.
pub type RegMrIova2Fn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr;
/// `ibv_reg_dmabuf_mr`.
pub type RegDmabufMrFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr;
/// `ibv_dereg_mr`.
pub type DeregMrFn = unsafe extern "C" fn(mr: *mut ibv_mr) -> c_int;
/// `ibv_create_cq`.
pub type CreateCqFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq;
/// `ibv_create_comp_channel`.
pub type CreateCompChannelFn =
    unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_comp_channel;
/// `ibv_destroy_comp_channel`.
pub type DestroyCompChannelFn = unsafe extern "C" fn(channel: *mut ibv_comp_channel) -> c_int;
/// `ibv_get_cq_event`.
pub type GetCqEventFn = unsafe extern "C" fn(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int;
/// `ibv_ack_cq_events`.
pub type AckCqEventsFn = unsafe extern "C" fn(cq: *mut ibv_cq, nevents: c_uint);
/// `ibv_destroy_cq`.
pub type DestroyCqFn = unsafe extern "C" fn(cq: *mut ibv_cq) -> c_int;
/// `ibv_create_qp`.
pub type CreateQpFn =
    unsafe extern "C" fn(pd: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> *mut ibv_qp;
/// `ibv_modify_qp`.
pub type ModifyQpFn =
    unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
/// `ibv_query_qp`.
pub type QueryQpFn = unsafe extern "C" fn(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int;
/// `ibv_destroy_qp`.
pub type DestroyQpFn = unsafe extern "C" fn(qp: *mut ibv_qp) -> c_int;
/// `ibv_create_ah`.
pub type CreateAhFn = unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
/// `ibv_destroy_ah`.
pub type DestroyAhFn = unsafe extern "C" fn(ah: *mut ibv_ah) -> c_int;
/// `ibv_create_srq`.
pub type CreateSrqFn =
    unsafe extern "C" fn(pd: *mut ibv_pd, init: *mut ibv_srq_init_attr) -> *mut ibv_srq;
/// `ibv_destroy_srq`.
pub type DestroySrqFn = unsafe extern "C" fn(srq: *mut ibv_srq) -> c_int;
/// `ibv_qp_to_qp_ex`.
pub type QpToQpExFn = unsafe extern "C" fn(qp: *mut ibv_qp) -> *mut ibv_qp_ex;

/// The required symbols, in the order [`IbvLib`] holds them.
pub const REQUIRED_SYMBOLS: [&str; 19] = [
    "ibv_get_device_list",
    "ibv_free_device_list",
    "ibv_get_device_name",
    "ibv_open_device",
    "ibv_close_device",
    "ibv_query_device",
    "ibv_query_port",
    "ibv_query_gid",
    "ibv_alloc_pd",
    "ibv_dealloc_pd",
    "ibv_reg_mr",
    "ibv_dereg_mr",
    "ibv_create_cq",
    "ibv_destroy_cq",
    "ibv_create_qp",
    "ibv_modify_qp",
    "ibv_query_qp",
    "ibv_destroy_qp",
    // Not called, but every libibverbs that has the others has it; checked
    // so that a library that is not libibverbs is refused early.
    "ibv_get_device_guid",
];

/// The optional symbols: absent from older libraries, and the provider
/// works without them.
pub const OPTIONAL_SYMBOLS: [&str; 12] = [
    "ibv_reg_dmabuf_mr",
    "ibv_reg_mr_iova2",
    // The completion channel, used as a set: without all four, CQs have
    // no channel and waiters poll.
    "ibv_create_comp_channel",
    "ibv_destroy_comp_channel",
    "ibv_get_cq_event",
    "ibv_ack_cq_events",
    // What DC (through libmlx5) needs besides libmlx5, used as a set:
    // without all five there is no DC.
    "ibv_create_ah",
    "ibv_destroy_ah",
    "ibv_create_srq",
    "ibv_destroy_srq",
    "ibv_qp_to_qp_ex",
    // The GID's type from libibverbs (rdma-core 32 and later), where sysfs
    // can't be read (a container without /sys/class/infiniband, soft-verbs).
    "_ibv_query_gid_ex",
];

/// The libibverbs functions DC needs, all five or none.
#[derive(Clone, Copy, Debug)]
pub struct DcVerbsFns {
    pub(crate) create_ah: CreateAhFn,
    pub(crate) destroy_ah: DestroyAhFn,
    pub(crate) create_srq: CreateSrqFn,
    pub(crate) destroy_srq: DestroySrqFn,
    pub(crate) qp_to_qp_ex: QpToQpExFn,
}

/// The completion-channel functions, all four or none.
#[derive(Clone, Copy, Debug)]
pub struct CompChannelFns {
    pub(crate) create: CreateCompChannelFn,
    pub(crate) destroy: DestroyCompChannelFn,
    pub(crate) get_event: GetCqEventFn,
    pub(crate) ack: AckCqEventsFn,
}

/// libibverbs, loaded, with every function it needs resolved.
///
/// The function pointers stay valid for as long as the table lives, since
/// the table owns the library handle and is never unloaded while shared.
pub struct IbvLib {
    path: String,
    pub(crate) get_device_list: GetDeviceListFn,
    pub(crate) free_device_list: FreeDeviceListFn,
    pub(crate) get_device_name: GetDeviceNameFn,
    pub(crate) open_device: OpenDeviceFn,
    pub(crate) close_device: CloseDeviceFn,
    pub(crate) query_device: QueryDeviceFn,
    pub(crate) query_port: QueryPortFn,
    pub(crate) query_gid: QueryGidFn,
    pub(crate) query_gid_ex: Option<QueryGidExFn>,
    pub(crate) alloc_pd: AllocPdFn,
    pub(crate) dealloc_pd: DeallocPdFn,
    pub(crate) reg_mr: RegMrFn,
    pub(crate) reg_mr_iova2: Option<RegMrIova2Fn>,
    pub(crate) reg_dmabuf_mr: Option<RegDmabufMrFn>,
    pub(crate) dereg_mr: DeregMrFn,
    pub(crate) create_cq: CreateCqFn,
    pub(crate) destroy_cq: DestroyCqFn,
    pub(crate) comp_channel: Option<CompChannelFns>,
    pub(crate) create_qp: CreateQpFn,
    pub(crate) modify_qp: ModifyQpFn,
    pub(crate) query_qp: QueryQpFn,
    pub(crate) destroy_qp: DestroyQpFn,
    pub(crate) dc: Option<DcVerbsFns>,
    // Last, so the function pointers above are never used after it closes.
    _lib: Library,
}

impl fmt::Debug for IbvLib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IbvLib")
            .field("path", &self.path)
            .field("has_reg_dmabuf_mr", &self.has_reg_dmabuf_mr())
            .field("has_reg_mr_iova2", &self.has_reg_mr_iova2())
            .finish_non_exhaustive()
    }
}

/// Resolves `name` in `lib` as a `T` (a function pointer type).
///
/// # Safety
///
/// `T` must be the function pointer type of the C function `name`.
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &str) -> Result<T> {
    let mut cname = Vec::with_capacity(name.len() + 1);
    cname.extend_from_slice(name.as_bytes());
    cname.push(0);
    // SAFETY: the caller guarantees that T is the symbol's function type;
    // the name is NUL-terminated.
    match unsafe { lib.get::<T>(&cname) } {
        Ok(s) => Ok(*s),
        Err(e) => Err(FabricError::NoDevice(format!(
            "{path} has no symbol {name} (is it libibverbs?): {e}"
        ))),
    }
}

/// Resolves an optional symbol; `None` when the library lacks it.
///
/// # Safety
///
/// As [`sym`].
unsafe fn optional_sym<T: Copy>(lib: &Library, name: &str) -> Option<T> {
    let mut cname = Vec::with_capacity(name.len() + 1);
    cname.extend_from_slice(name.as_bytes());
    cname.push(0);
    // SAFETY: as in `sym`; the caller vouches for the type.
    unsafe { lib.get::<T>(&cname) }.ok().map(|s| *s)
}

impl IbvLib {
    /// Opens `path` (a soname such as [`SONAME`], or a file path) and
    /// resolves every function. Fails with [`FabricError::NoDevice`] when
    /// the library can't be loaded or lacks a required function.
    pub fn open(path: &str) -> Result<IbvLib> {
        // SAFETY: loading libibverbs runs its ELF constructors, which only
        // initialise the library's own state (they register nothing that
        // could run Rust code or conflict with this process's symbols); a
        // library of another name is the caller's deliberate choice (tests).
        let lib = unsafe { Library::new(path) }.map_err(|e| {
            FabricError::NoDevice(format!(
                "{path} could not be loaded (is libibverbs installed? on Debian/Ubuntu: \
                 apt-get install libibverbs1 ibverbs-providers): {e}"
            ))
        })?;
        // SAFETY: every `sym` and `optional_sym` call below names a function
        // whose prototype in <infiniband/verbs.h> (rdma-core 44) is the type
        // alias it is resolved as; these prototypes have been stable since
        // libibverbs 1.1 (1.8 and 1.12 for the optional two, IBVERBS_1.6
        // for ibv_qp_to_qp_ex).
        let table = unsafe {
            IbvLib {
                path: path.to_string(),
                get_device_list: sym(&lib, path, "ibv_get_device_list")?,
                free_device_list: sym(&lib, path, "ibv_free_device_list")?,
                get_device_name: sym(&lib, path, "ibv_get_device_name")?,
                open_device: sym(&lib, path, "ibv_open_device")?,
                close_device: sym(&lib, path, "ibv_close_device")?,
                query_device: sym(&lib, path, "ibv_query_device")?,
                query_port: sym(&lib, path, "ibv_query_port")?,
                query_gid: sym(&lib, path, "ibv_query_gid")?,
                query_gid_ex: optional_sym(&lib, "_ibv_query_gid_ex"),
                alloc_pd: sym(&lib, path, "ibv_alloc_pd")?,
                dealloc_pd: sym(&lib, path, "ibv_dealloc_pd")?,
                reg_mr: sym(&lib, path, "ibv_reg_mr")?,
                reg_mr_iova2: optional_sym(&lib, "ibv_reg_mr_iova2"),
                reg_dmabuf_mr: optional_sym(&lib, "ibv_reg_dmabuf_mr"),
                dereg_mr: sym(&lib, path, "ibv_dereg_mr")?,
                create_cq: sym(&lib, path, "ibv_create_cq")?,
                destroy_cq: sym(&lib, path, "ibv_destroy_cq")?,
                comp_channel: match (
                    optional_sym(&lib, "ibv_create_comp_channel"),
                    optional_sym(&lib, "ibv_destroy_comp_channel"),
                    optional_sym(&lib, "ibv_get_cq_event"),
                    optional_sym(&lib, "ibv_ack_cq_events"),
                ) {
                    (Some(create), Some(destroy), Some(get_event), Some(ack)) => {
                        Some(CompChannelFns {
                            create,
                            destroy,
                            get_event,
                            ack,
                        })
                    }
                    _ => None,
                },
                create_qp: sym(&lib, path, "ibv_create_qp")?,
                modify_qp: sym(&lib, path, "ibv_modify_qp")?,
                query_qp: sym(&lib, path, "ibv_query_qp")?,
                destroy_qp: sym(&lib, path, "ibv_destroy_qp")?,
                dc: match (
                    optional_sym(&lib, "ibv_create_ah"),
                    optional_sym(&lib, "ibv_destroy_ah"),
                    optional_sym(&lib, "ibv_create_srq"),
                    optional_sym(&lib, "ibv_destroy_srq"),
                    optional_sym(&lib, "ibv_qp_to_qp_ex"),
                ) {
                    (
                        Some(create_ah),
                        Some(destroy_ah),
                        Some(create_srq),
                        Some(destroy_srq),
                        Some(qp_to_qp_ex),
                    ) => Some(DcVerbsFns {
                        create_ah,
                        destroy_ah,
                        create_srq,
                        destroy_srq,
                        qp_to_qp_ex,
                    }),
                    _ => None,
                },
                _lib: lib,
            }
        };
        // The guard symbol: resolved only to be sure this is libibverbs.
        // SAFETY: the type is irrelevant, the pointer is never called.
        unsafe { sym::<unsafe extern "C" fn()>(&table._lib, path, "ibv_get_device_guid")? };
        tracing::debug!(
            path,
            reg_dmabuf_mr = table.has_reg_dmabuf_mr(),
            reg_mr_iova2 = table.has_reg_mr_iova2(),
            "libibverbs loaded"
        );
        Ok(table)
    }

    /// What was opened (the soname or path given to [`IbvLib::open`]).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether `ibv_reg_dmabuf_mr` is there (rdma-core 34 and later).
    pub fn has_reg_dmabuf_mr(&self) -> bool {
        self.reg_dmabuf_mr.is_some()
    }

    /// Whether `ibv_reg_mr_iova2` is there (rdma-core 29 and later).
    pub fn has_reg_mr_iova2(&self) -> bool {
        self.reg_mr_iova2.is_some()
    }

    /// Whether the completion-channel functions are all there.
    pub fn has_comp_channel(&self) -> bool {
        self.comp_channel.is_some()
    }

    /// Whether the functions DC needs (address handles, SRQs,
    /// `ibv_qp_to_qp_ex`) are all there.
    pub fn has_dc_verbs(&self) -> bool {
        self.dc.is_some()
    }

    /// Every symbol the table knows, with whether it was found (required
    /// ones always were, or the table would not exist).
    pub fn symbols(&self) -> Vec<(&'static str, bool)> {
        let mut v: Vec<(&'static str, bool)> =
            REQUIRED_SYMBOLS.iter().map(|&n| (n, true)).collect();
        v.push(("ibv_reg_dmabuf_mr", self.has_reg_dmabuf_mr()));
        v.push(("ibv_reg_mr_iova2", self.has_reg_mr_iova2()));
        for name in &OPTIONAL_SYMBOLS[2..6] {
            v.push((name, self.has_comp_channel()));
        }
        for name in &OPTIONAL_SYMBOLS[6..11] {
            v.push((name, self.has_dc_verbs()));
        }
        v.push(("_ibv_query_gid_ex", self.query_gid_ex.is_some()));
        v
    }
}

/// The process's libibverbs: [`SONAME`], loaded on the first call and kept
/// for the life of the process. A failure is remembered too, so later calls
/// report it without trying again.
pub fn libibverbs() -> Result<Arc<IbvLib>> {
    static LIB: OnceLock<std::result::Result<Arc<IbvLib>, String>> = OnceLock::new();
    LIB.get_or_init(|| match IbvLib::open(SONAME) {
        Ok(lib) => Ok(Arc::new(lib)),
        Err(FabricError::NoDevice(why)) => Err(why),
        Err(e) => Err(e.to_string()),
    })
    .clone()
    .map_err(FabricError::NoDevice)
}
