//! The libibverbs ABI, declared by the project itself.
//!
//! hipObject doesn't include `<infiniband/verbs.h>` (its `ibv-core.h` holds
//! its own copy of the structures), and neither does this crate: these are
//! `#[repr(C)]` mirrors of the structures the provider touches, as laid out
//! by `libibverbs.so.1` (rdma-core's stable ABI; the header of rdma-core 44
//! is the reference). `tests/ibverbs_abi.rs` compiles a C program against
//! the real header and checks the size, alignment and every field offset of
//! every declaration here, so a mistake fails the tests rather than
//! corrupting memory.
//!
//! Names are the C names. Anonymous C unions get a field name here: `imm`
//! for `imm_data`/`invalidate_rkey` in `ibv_send_wr` and `ibv_wc`, `ext` for
//! the trailing `bind_mw`/`tso` union of `ibv_send_wr`. Function pointers
//! that the provider never calls are declared as [`AnyFn`]: only their size
//! and position matter.
//!
//! Why one file of about 700 lines: it is declarations only (no logic),
//! in the order of `verbs.h`, and `tests/ibverbs_abi.rs` checks it as one
//! unit against that header; split, a struct and the structs it embeds
//! would be read in different files.

#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;

/// A function pointer this crate never calls (same size and alignment as
/// any C function pointer; `None` is NULL).
pub type AnyFn = Option<unsafe extern "C" fn()>;

/// `__VERBS_ABI_IS_EXTENDED`: the value of `ibv_context::abi_compat` when
/// the context is the last field of a `struct verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// `IBV_QPT_RC`.
pub const IBV_QPT_RC: u32 = 2;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
/// `IBV_WC_WITH_IMM`.
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
/// `IBV_ACCESS_OPTIONAL_RANGE`: access bits that only `ibv_reg_mr_iova2`
/// understands (the header's `ibv_reg_mr` macro switches to it for them).
pub const IBV_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;
/// `IBV_LINK_LAYER_INFINIBAND`.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// `union ibv_gid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// The `global` member of `union ibv_gid` (both fields big-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

impl Default for ibv_gid {
    fn default() -> ibv_gid {
        ibv_gid { raw: [0; 16] }
    }
}

impl fmt::Debug for ibv_gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: every bit pattern of the union's 16 bytes is a valid [u8; 16].
        let raw = unsafe { self.raw };
        write!(f, "ibv_gid({})", hipobj_wire::Gid(raw))
    }
}

/// `struct ibv_gid_entry` (rdma-core 32 and later, `ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// `enum ibv_gid_type`: [`IBV_GID_TYPE_IB`], [`IBV_GID_TYPE_ROCE_V1`],
    /// [`IBV_GID_TYPE_ROCE_V2`].
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `IBV_GID_TYPE_IB`.
pub const IBV_GID_TYPE_IB: u32 = 0;
/// `IBV_GID_TYPE_ROCE_V1`.
pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
/// `IBV_GID_TYPE_ROCE_V2`.
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

impl Default for ibv_device_attr {
    fn default() -> ibv_device_attr {
        // SAFETY: the struct is integers and arrays of integers, for which
        // all-zero bytes are valid values.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ibv_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The anonymous `imm_data`/`invalidated_rkey` union of `struct ibv_wc`
/// (and `imm_data`/`invalidate_rkey` of `struct ibv_send_wr`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_imm {
    /// Immediate data, in network byte order.
    pub imm_data: u32,
    pub invalidated_rkey: u32,
}

impl Default for ibv_imm {
    fn default() -> ibv_imm {
        ibv_imm { imm_data: 0 }
    }
}

impl fmt::Debug for ibv_imm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: both members are u32 at offset 0; any bits are valid.
        let v = unsafe { self.imm_data };
        write!(f, "ibv_imm({v:#x})")
    }
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm: ibv_imm,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    /// `struct ibv_srq *` (never used here).
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

impl Default for ibv_qp_init_attr {
    fn default() -> ibv_qp_init_attr {
        ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: std::ptr::null_mut(),
            recv_cq: std::ptr::null_mut(),
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap::default(),
            qp_type: 0,
            sq_sig_all: 0,
        }
    }
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_ud {
    /// `struct ibv_ah *`.
    pub ah: *mut c_void,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

impl fmt::Debug for ibv_send_wr_wr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: `rdma` is plain integers at the union's start; whatever
        // member was written, its bytes are valid integers.
        let rdma = unsafe { self.rdma };
        write!(f, "ibv_send_wr_wr {{ rdma: {rdma:?}, .. }}")
    }
}

/// `qp_type.xrc` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

/// The `qp_type` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

impl fmt::Debug for ibv_send_wr_qp_type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: the only member is a u32.
        let xrc = unsafe { self.xrc };
        write!(f, "ibv_send_wr_qp_type {{ xrc: {xrc:?} }}")
    }
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `bind_mw` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_bind_mw {
    /// `struct ibv_mw *`.
    pub mw: *mut c_void,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `tso` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// The trailing anonymous `bind_mw`/`tso` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

impl fmt::Debug for ibv_send_wr_ext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ibv_send_wr_ext { .. }")
    }
}

/// `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    /// `imm_data` (network byte order) / `invalidate_rkey`.
    pub imm: ibv_imm,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// `bind_mw` / `tso`.
    pub ext: ibv_send_wr_ext,
}

impl Default for ibv_send_wr {
    fn default() -> ibv_send_wr {
        // SAFETY: integers, raw pointers (null) and unions of those: all
        // zero bytes is a valid value of each.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    /// `struct ibv_srq *`.
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

impl fmt::Debug for ibv_qp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ibv_qp")
            .field("context", &self.context)
            .field("qp_num", &self.qp_num)
            .field("state", &self.state)
            .field("qp_type", &self.qp_type)
            .finish_non_exhaustive()
    }
}

/// `struct ibv_comp_channel`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    /// `struct ibv_comp_channel *`.
    pub channel: *mut c_void,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

impl fmt::Debug for ibv_cq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ibv_cq")
            .field("context", &self.context)
            .field("cqe", &self.cqe)
            .finish_non_exhaustive()
    }
}

/// `struct _ibv_device_ops` (obsolete, never used).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct _ibv_device_ops {
    pub _dummy1: AnyFn,
    pub _dummy2: AnyFn,
}

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// The provider's `poll_cq` entry (what the inline `ibv_poll_cq` calls).
pub type PollCqFn =
    unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int;
/// The provider's `post_send` entry (what the inline `ibv_post_send` calls).
pub type PostSendFn = unsafe extern "C" fn(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int;
/// The provider's `post_recv` entry (what the inline `ibv_post_recv` calls).
pub type PostRecvFn = unsafe extern "C" fn(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int;
/// `req_notify_cq`.
pub type ReqNotifyCqFn = unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int;
/// `verbs_context::query_port`, the extended port query.
pub type VerbsQueryPortFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int;

/// `struct ibv_context_ops`: the provider's entries. Only `poll_cq`,
/// `req_notify_cq`, `post_send` and `post_recv` are called here, as the
/// header's inline functions do.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_context_ops {
    pub _compat_query_device: AnyFn,
    pub _compat_query_port: AnyFn,
    pub _compat_alloc_pd: AnyFn,
    pub _compat_dealloc_pd: AnyFn,
    pub _compat_reg_mr: AnyFn,
    pub _compat_rereg_mr: AnyFn,
    pub _compat_dereg_mr: AnyFn,
    pub alloc_mw: AnyFn,
    pub bind_mw: AnyFn,
    pub dealloc_mw: AnyFn,
    pub _compat_create_cq: AnyFn,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    pub _compat_cq_event: AnyFn,
    pub _compat_resize_cq: AnyFn,
    pub _compat_destroy_cq: AnyFn,
    pub _compat_create_srq: AnyFn,
    pub _compat_modify_srq: AnyFn,
    pub _compat_query_srq: AnyFn,
    pub _compat_destroy_srq: AnyFn,
    pub post_srq_recv: AnyFn,
    pub _compat_create_qp: AnyFn,
    pub _compat_query_qp: AnyFn,
    pub _compat_modify_qp: AnyFn,
    pub _compat_destroy_qp: AnyFn,
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _compat_create_ah: AnyFn,
    pub _compat_destroy_ah: AnyFn,
    pub _compat_attach_mcast: AnyFn,
    pub _compat_detach_mcast: AnyFn,
    pub _compat_async_event: AnyFn,
}

/// `struct ibv_context`.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    /// [`VERBS_ABI_IS_EXTENDED`] when this context ends a `verbs_context`.
    pub abi_compat: *mut c_void,
}

impl fmt::Debug for ibv_context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ibv_context")
            .field("device", &self.device)
            .field("cmd_fd", &self.cmd_fd)
            .field("abi_compat", &self.abi_compat)
            .finish_non_exhaustive()
    }
}

/// `struct verbs_context`: the extended context, whose last field is the
/// `ibv_context` that libibverbs hands out. It "grows up": new entries are
/// added at the start, so the offsets of the entries here, counted back
/// from `context`, never change.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<VerbsQueryPortFn>,
    pub advise_mr: AnyFn,
    pub alloc_null_mr: AnyFn,
    pub read_counters: AnyFn,
    pub attach_counters_point_flow: AnyFn,
    pub create_counters: AnyFn,
    pub destroy_counters: AnyFn,
    pub reg_dm_mr: AnyFn,
    pub alloc_dm: AnyFn,
    pub free_dm: AnyFn,
    pub modify_flow_action_esp: AnyFn,
    pub destroy_flow_action: AnyFn,
    pub create_flow_action_esp: AnyFn,
    pub modify_qp_rate_limit: AnyFn,
    pub alloc_parent_domain: AnyFn,
    pub dealloc_td: AnyFn,
    pub alloc_td: AnyFn,
    pub modify_cq: AnyFn,
    pub post_srq_ops: AnyFn,
    pub destroy_rwq_ind_table: AnyFn,
    pub create_rwq_ind_table: AnyFn,
    pub destroy_wq: AnyFn,
    pub modify_wq: AnyFn,
    pub create_wq: AnyFn,
    pub query_rt_values: AnyFn,
    pub create_cq_ex: AnyFn,
    /// `struct verbs_ex_private *`.
    pub priv_: *mut c_void,
    pub query_device_ex: AnyFn,
    pub ibv_destroy_flow: AnyFn,
    pub ABI_placeholder2: AnyFn,
    pub ibv_create_flow: AnyFn,
    pub ABI_placeholder1: AnyFn,
    pub open_qp: AnyFn,
    pub create_qp_ex: AnyFn,
    pub get_srq_num: AnyFn,
    pub create_srq_ex: AnyFn,
    pub open_xrcd: AnyFn,
    pub close_xrcd: AnyFn,
    pub _ABI_placeholder3: u64,
    /// Bytes of this structure the provider filled in, counted back from
    /// `context` (must be immediately before it).
    pub sz: usize,
    pub context: ibv_context,
}

impl fmt::Debug for verbs_context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("verbs_context")
            .field("sz", &self.sz)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}
