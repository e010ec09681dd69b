//! The C objects this library hands out, each a `#[repr(C)]` struct whose
//! first field is the rdma-core structure the program sees, followed by the
//! Rust state behind it. A pointer the program passes back is the address
//! of that first field, so it leads back to the whole object (as rdma-core
//! providers find their own structures with `container_of`).
//!
//! Objects are boxed when created and freed when destroyed. Every parent an
//! object needs stays alive through the fabric handles it holds (a QP holds
//! its PD and CQs), and, as on rdma-core, destroying a parent that still
//! has children is refused with `EBUSY`: the counters here say how many it
//! has.

use hipobj_fabric::ibverbs::abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_gid_entry, ibv_mr, ibv_pd, ibv_qp,
    ibv_qp_cap, verbs_context,
};
use hipobj_fabric::ibverbs::abi_ex::ibv_qp_ex;
use hipobj_fabric::{
    CompletionQueue, Device, MemoryRegion, ProtectionDomain, QueuePair, RegisteredBuffer, SendWr,
};
use std::ffi::c_int;
use std::mem::offset_of;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One soft device of the list (`struct verbs_device` as rdma-core lays it
/// out: the `ibv_device` programs see, then the provider's fields).
#[repr(C)]
#[derive(Debug)]
pub struct DeviceRec {
    /// What `ibv_get_device_list` hands out.
    pub dev: ibv_device,
    /// The rest of rdma-core's `struct verbs_device`, all zero. Provider
    /// libraries (libmlx5's `mlx5dv_is_supported`) read its `ops` pointer
    /// to tell their own devices: NULL is nobody's.
    pub verbs_tail: [usize; 8],
    /// The address the device is bound to.
    pub ip: Ipv4Addr,
    /// Its index in the list (`ibv_get_device_index`).
    pub index: c_int,
    /// Its node GUID, as stored (big-endian).
    pub guid_be: u64,
    /// Its one GID table entry.
    pub gid: ibv_gid_entry,
}

/// An open device (`ibv_open_device`): rdma-core's extended context, whose
/// last field is the `ibv_context` programs see.
#[repr(C)]
#[derive(Debug)]
pub struct Context {
    /// The extended context; programs hold `&vctx.context`.
    pub vctx: verbs_context,
    /// The device it is open on.
    pub rec: &'static DeviceRec,
    /// The soft device.
    pub device: Device,
    /// The asynchronous event descriptor (`async_fd`): an eventfd that no
    /// event is ever written to (a soft port never changes state).
    pub async_fd: OwnedFd,
}

impl Context {
    /// The context behind an `ibv_context` this library made.
    ///
    /// # Safety
    ///
    /// `ctx` is NULL or a pointer `ibv_open_device` returned and
    /// `ibv_close_device` has not yet freed.
    pub unsafe fn from_raw<'a>(ctx: *mut ibv_context) -> Result<&'a Context, c_int> {
        if ctx.is_null() {
            return Err(libc::EINVAL);
        }
        let off = offset_of!(verbs_context, context);
        // SAFETY: by the caller's contract `ctx` is the `context` field of
        // the `vctx` field (offset 0) of a live boxed Context, so stepping
        // back by the field's offset stays inside that allocation.
        Ok(unsafe { &*ctx.cast::<u8>().sub(off).cast::<Context>() })
    }
}

/// A protection domain.
#[repr(C)]
#[derive(Debug)]
pub struct Pd {
    /// What programs see.
    pub raw: ibv_pd,
    /// The soft PD.
    pub pd: ProtectionDomain,
    /// Memory regions and QPs made on it and not yet destroyed.
    pub children: Children,
}

/// A memory region.
#[repr(C)]
#[derive(Debug)]
pub struct Mr {
    /// What programs see.
    pub raw: ibv_mr,
    /// The soft region (deregistered when dropped).
    pub mr: MemoryRegion,
    /// Its PD, whose child count it holds.
    pub pd: *const Pd,
}

/// A completion channel: its descriptor is an epoll instance that holds
/// the eventfd of every CQ bound to it, so it turns readable when any of
/// them has an event, and `ibv_get_cq_event` learns which.
#[repr(C)]
#[derive(Debug)]
pub struct Channel {
    /// What programs see (`fd` is the epoll descriptor).
    pub raw: ibv_comp_channel,
    /// The epoll instance.
    pub epoll: OwnedFd,
    /// CQs bound to it and not yet destroyed.
    pub children: Children,
}

/// A completion queue.
#[repr(C)]
#[derive(Debug)]
pub struct Cq {
    /// What programs see.
    pub raw: ibv_cq,
    /// The soft CQ.
    pub cq: CompletionQueue,
    /// The channel it reports to, or NULL.
    pub channel: *mut Channel,
    /// QPs that use it and are not yet destroyed.
    pub children: Children,
}

/// The largest inline send (`max_inline_data`) a QP may ask for.
pub const MAX_INLINE: u32 = 1024;

/// Where inline sends' bytes are copied at post time: a registered ring of
/// `slots` slots of `slot_len` bytes, twice the send queue's depth. Inline
/// post number `n` uses slot `n % slots`: when it is posted, at most
/// `max_send_wr` requests are outstanding, so the request that used the
/// slot before (number `n - slots`) has completed, even if this post is
/// then refused.
#[derive(Debug)]
pub struct InlineRing {
    /// The ring's memory, registered on the QP's PD.
    pub buf: RegisteredBuffer,
    /// Bytes per slot (the QP's `max_inline_data`).
    pub slot_len: usize,
    /// Slots in the ring.
    pub slots: u64,
    /// Inline posts accepted so far.
    pub posted: u64,
}

/// A work request built through the `ibv_wr_*` interface, not yet posted.
#[derive(Debug)]
pub struct PendingWr {
    /// The request (its inline bytes, if any, are in `inline`).
    pub wr: SendWr,
    /// Inline data to copy into the ring when posted.
    pub inline: Option<Vec<u8>>,
}

/// The `ibv_wr_*` builder's state between `wr_start` and `wr_complete`.
#[derive(Debug, Default)]
pub struct Builder {
    /// Whether `wr_start` was called and not yet completed or aborted.
    pub open: bool,
    /// The requests built so far.
    pub wrs: Vec<PendingWr>,
    /// The first error met while building: `wr_complete` returns it and
    /// posts nothing.
    pub error: Option<c_int>,
}

/// `VERBS_QP_EX` in rdma-core's `verbs_qp::comp_mask`: the QP has an
/// `ibv_qp_ex` (`ibv_qp_to_qp_ex` returns it).
pub const VERBS_QP_EX: u32 = 2;

/// A queue pair: rdma-core's `struct verbs_qp` (the extended QP, whose first
/// field is the `ibv_qp`), then the soft QP.
#[repr(C)]
#[derive(Debug)]
pub struct Qp {
    /// What programs see (`&ex.qp_base` is the `ibv_qp`).
    pub ex: ibv_qp_ex,
    /// `verbs_qp::comp_mask`.
    pub comp_mask: u32,
    /// The soft QP.
    pub qp: QueuePair,
    /// Its PD and CQs, whose child counts it holds.
    pub pd: *const Pd,
    /// The send CQ.
    pub send_cq: *const Cq,
    /// The receive CQ.
    pub recv_cq: *const Cq,
    /// Every send is signalled (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// The capacities it was created with.
    pub cap: ibv_qp_cap,
    /// The operations `ibv_wr_*` may post (`send_ops_flags`).
    pub send_ops: u64,
    /// Inline sends' ring (when `max_inline_data` > 0).
    pub inline: Option<Mutex<InlineRing>>,
    /// The `ibv_wr_*` builder.
    pub builder: Mutex<Builder>,
}

impl Qp {
    /// The QP behind an `ibv_qp` (or `ibv_qp_ex`) this library made.
    ///
    /// # Safety
    ///
    /// `qp` is NULL or a pointer `ibv_create_qp`/`ibv_create_qp_ex` returned
    /// (or `ibv_qp_to_qp_ex` of one) that `ibv_destroy_qp` has not freed.
    pub unsafe fn from_raw<'a>(qp: *mut ibv_qp) -> Result<&'a Qp, c_int> {
        if qp.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `ex.qp_base` is at offset 0 of `ex`, itself at offset 0
        // of the repr(C) Qp, so the pointer is the Qp's; it is live by the
        // caller's contract.
        Ok(unsafe { &*qp.cast::<Qp>() })
    }
}

/// A count of live children, for the `EBUSY` of destroying a parent.
#[derive(Debug, Default)]
pub struct Children(AtomicUsize);

impl Children {
    /// One more child.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    /// One child fewer.
    pub fn remove(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
    /// Whether any child is alive.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

/// Gives up ownership of a boxed object, for a C pointer to its first field.
pub fn leak<T>(obj: T) -> *mut T {
    Box::into_raw(Box::new(obj))
}
