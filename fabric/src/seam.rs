//! The provider seam: what an RDMA provider implements.
//!
//! Modelled on hipObject's `Verbs` interface and on libibverbs itself. The
//! client and the gateway never see these traits directly: they use the
//! owning wrappers in [`crate::verbs`], which keep parents alive and tear
//! resources down in the right order. A provider implements the traits; the
//! software provider ([`crate::soft`]) is one, libibverbs is another.

use crate::error::Result;
use crate::types::{
    AccessFlags, DeviceInfo, GidEntry, PortAttr, QpAttr, QpAttrMask, QpCap, QpType, RecvWr, SendWr,
    WorkCompletion,
};
use std::any::Any;
use std::fmt::Debug;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

/// A source of RDMA devices.
pub trait Provider: Send + Sync + Debug {
    /// Short name for logs ("soft", "verbs").
    fn name(&self) -> &'static str;
    /// Names of the devices this provider can open.
    fn device_names(&self) -> Result<Vec<String>>;
    /// Opens a device by name.
    fn open_device(&self, name: &str) -> Result<Arc<dyn DeviceOps>>;
}

/// An open device context (`ibv_context`).
pub trait DeviceOps: Send + Sync + Debug {
    /// What the device is.
    fn info(&self) -> &DeviceInfo;
    /// Queries a port (ports are numbered from 1).
    fn query_port(&self, port: u8) -> Result<PortAttr>;
    /// The port's GID table, with each entry's type.
    fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>>;
    /// Allocates a protection domain.
    fn alloc_pd(&self) -> Result<Arc<dyn PdOps>>;
    /// Creates a completion queue with room for at least `cqe` completions.
    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn CqOps>>;
}

/// What a QP is created with.
#[derive(Debug)]
pub struct QpInit<'a> {
    /// RC or DC initiator.
    pub qp_type: QpType,
    /// Where send completions go.
    pub send_cq: &'a Arc<dyn CqOps>,
    /// Where receive completions go.
    pub recv_cq: &'a Arc<dyn CqOps>,
    /// Queue capacities.
    pub cap: QpCap,
}

/// A protection domain (`ibv_pd`).
pub trait PdOps: Send + Sync + Debug {
    /// Registers `len` bytes at `addr`.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be memory this process owns, valid for reads
    /// and writes, and it must stay allocated until the returned region is
    /// dropped. While it is registered the device may read it or write it at
    /// any time (as far as `access` and the peers' requests allow): the
    /// caller must not hold Rust references to it across a transfer that
    /// writes it.
    unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>>;

    /// Registers a dma-buf (`ibv_reg_dmabuf_mr`), at I/O virtual address `iova`.
    fn reg_dmabuf_mr(
        &self,
        fd: RawFd,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>>;

    /// Creates a queue pair, in RESET.
    fn create_qp(&self, init: QpInit<'_>) -> Result<Box<dyn QpOps>>;

    /// Creates a DC target, reachable by any DC initiator that presents
    /// `dc_key`, allowing `access` to this PD's memory regions.
    fn create_dct(
        &self,
        cq: &Arc<dyn CqOps>,
        access: AccessFlags,
        dc_key: u64,
    ) -> Result<Box<dyn DctOps>>;
}

/// A registered memory region (`ibv_mr`).
pub trait MrOps: Send + Sync + Debug {
    /// Local key, for this process's SGEs.
    fn lkey(&self) -> u32;
    /// Remote key, for peers' RDMA.
    fn rkey(&self) -> u32;
    /// Start address (the I/O virtual address for dma-buf regions).
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn length(&self) -> usize;
    /// What the region allows.
    fn access(&self) -> AccessFlags;
}

/// A completion queue (`ibv_cq`).
pub trait CqOps: Send + Sync + Debug + Any {
    /// Moves up to `max` completions into `out` without waiting; returns how many.
    fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize>;
    /// Waits until a completion may be ready or `timeout` passes; true when
    /// one may be. A provider without a way to wait returns true at once and
    /// the caller polls.
    fn wait(&self, timeout: Duration) -> bool {
        let _ = timeout;
        true
    }
    /// The CQ's completion channel: a nonblocking descriptor that turns
    /// readable when a completion arrives on an armed CQ (the
    /// `ibv_comp_channel`'s fd on libibverbs, an eventfd in the software
    /// provider), for an event loop to wait on. `None` where the provider
    /// has none; callers then wait with [`CqOps::wait`].
    fn event_fd(&self) -> Option<RawFd> {
        None
    }
    /// Asks for one event on the channel for the next completion
    /// (`ibv_req_notify_cq`, all completions). Poll the CQ once more after
    /// arming: a completion that came before it may raise no event.
    fn arm(&self) -> Result<()> {
        Ok(())
    }
    /// Asks for one event for the next completion *added* after this call,
    /// as libibverbs documents `ibv_req_notify_cq` (completions already
    /// queued raise none: poll after arming). [`CqOps::arm`] also signals
    /// at once for a CQ that is not empty, which is what an event loop that
    /// never misses a wakeup wants; a libibverbs program expects this one.
    fn arm_next(&self) -> Result<()> {
        self.arm()
    }
    /// Takes the events waiting on the channel (`ibv_get_cq_event` and
    /// `ibv_ack_cq_events`; reading the eventfd), without blocking;
    /// returns how many there were.
    fn take_events(&self) -> Result<u32> {
        Ok(0)
    }
    /// For providers to recover their own type from a CQ they are given.
    fn as_any(&self) -> &dyn Any;
}

/// A queue pair (`ibv_qp`).
pub trait QpOps: Send + Sync + Debug {
    /// The QP number peers address it by.
    fn qp_num(&self) -> u32;
    /// Its transport.
    fn qp_type(&self) -> QpType;
    /// Changes state and attributes (`ibv_modify_qp`).
    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()>;
    /// The current attributes (`ibv_query_qp`); `qp_state` is the current state.
    fn query(&self) -> Result<QpAttr>;
    /// Posts a send work request (`ibv_post_send`).
    fn post_send(&self, wr: &SendWr) -> Result<()>;
    /// Posts a receive work request (`ibv_post_recv`).
    fn post_recv(&self, wr: &RecvWr) -> Result<()>;
}

/// A DC target (`mlx5dv` DCT).
pub trait DctOps: Send + Sync + Debug {
    /// The DCT number initiators address.
    fn dct_num(&self) -> u32;
    /// Requests dropped because they presented the wrong DC key.
    fn key_violations(&self) -> u64;
}
