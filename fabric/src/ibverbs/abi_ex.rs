//! The extended libibverbs ABI that DC needs: `ibv_qp_init_attr_ex` (what
//! `mlx5dv_create_qp` takes), `ibv_qp_ex` (the work-request builder a DC
//! initiator posts through), address handles and shared receive queues.
//!
//! Declared as [`super::abi`] is, checked field by field against the real
//! `<infiniband/verbs.h>` by `tests/mlx5dv_abi.rs`. In the header most of
//! the `ibv_wr_*` "functions" are `static inline` wrappers that call the
//! function pointers of `struct ibv_qp_ex`: the provider reads the
//! pointers from the struct and calls them, as the wrappers do.

#![allow(non_camel_case_types, missing_docs)]

use super::abi::{ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_cap, ibv_sge, AnyFn};
use std::ffi::{c_int, c_uint, c_void};
use std::fmt;

/// `IBV_QPT_DRIVER`: the QP type of driver-specific QPs (mlx5 DC).
pub const IBV_QPT_DRIVER: u32 = 0xff;
/// `IBV_QP_INIT_ATTR_PD`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
/// `IBV_QP_EX_WITH_RDMA_WRITE`.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
/// `IBV_QP_EX_WITH_RDMA_READ`.
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;

/// `struct ibv_rx_hash_conf` (unused, zero).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *` (never used here).
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    /// `struct ibv_rwq_ind_table *` (never used here).
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

impl Default for ibv_qp_init_attr_ex {
    fn default() -> ibv_qp_init_attr_ex {
        // SAFETY: integers and raw pointers (null): all-zero bytes are a
        // valid value of each field.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ibv_ah`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

impl fmt::Debug for ibv_srq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ibv_srq")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// `ibv_qp_ex::wr_rdma_read` / `wr_rdma_write`.
pub type WrRdmaFn = unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64);
/// `ibv_qp_ex::wr_set_sge`.
pub type WrSetSgeFn = unsafe extern "C" fn(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32);
/// `ibv_qp_ex::wr_set_sge_list`.
pub type WrSetSgeListFn =
    unsafe extern "C" fn(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge);
/// `ibv_qp_ex::wr_start` / `wr_abort`.
pub type WrStartFn = unsafe extern "C" fn(qp: *mut ibv_qp_ex);
/// `ibv_qp_ex::wr_complete`: 0 or an errno value.
pub type WrCompleteFn = unsafe extern "C" fn(qp: *mut ibv_qp_ex) -> c_int;

/// `struct ibv_qp_ex`: the QP with the work-request builder. `wr_id` and
/// `wr_flags` are written between `wr_start` and the opcode call.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    /// `enum ibv_send_flags` bits.
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: AnyFn,
    pub wr_atomic_fetch_add: AnyFn,
    pub wr_bind_mw: AnyFn,
    pub wr_local_inv: AnyFn,
    pub wr_rdma_read: Option<WrRdmaFn>,
    pub wr_rdma_write: Option<WrRdmaFn>,
    pub wr_rdma_write_imm: AnyFn,
    pub wr_send: AnyFn,
    pub wr_send_imm: AnyFn,
    pub wr_send_inv: AnyFn,
    pub wr_send_tso: AnyFn,
    pub wr_set_ud_addr: AnyFn,
    pub wr_set_xrc_srqn: AnyFn,
    pub wr_set_inline_data: AnyFn,
    pub wr_set_inline_data_list: AnyFn,
    pub wr_set_sge: Option<WrSetSgeFn>,
    pub wr_set_sge_list: Option<WrSetSgeListFn>,
    pub wr_start: Option<WrStartFn>,
    pub wr_complete: Option<WrCompleteFn>,
    pub wr_abort: Option<WrStartFn>,
    pub wr_atomic_write: AnyFn,
}

impl fmt::Debug for ibv_qp_ex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ibv_qp_ex")
            .field("qp_base", &self.qp_base)
            .field("comp_mask", &self.comp_mask)
            .finish_non_exhaustive()
    }
}
