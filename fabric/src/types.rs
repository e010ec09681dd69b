//! The verbs vocabulary shared by every provider: access flags, QP states and
//! attributes, work requests and work completions.
//!
//! Numeric values are libibverbs' (`<infiniband/verbs.h>`), so a provider
//! over libibverbs passes them through unchanged and logs read the same on
//! every provider.
//!
//! Why one file of about 600 lines: it is the vocabulary of `verbs.h` in
//! one place (flags, states, attributes, work requests, completions and
//! their names), mostly declarations and their `Display`; each piece is
//! small and they are read together.

use hipobj_wire::Gid;
use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

macro_rules! flags {
    ($(#[$m:meta])* $name:ident : $t:ty { $($(#[$fm:meta])* $f:ident = $v:expr;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $t);
        impl $name {
            $($(#[$fm])* pub const $f: $name = $name($v);)*
            /// No flag set.
            pub const EMPTY: $name = $name(0);
            /// Whether every flag in `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool { self.0 & other.0 == other.0 }
            /// The raw bits.
            pub const fn bits(self) -> $t { self.0 }
        }
        impl BitOr for $name { type Output = $name; fn bitor(self, o: $name) -> $name { $name(self.0 | o.0) } }
        impl BitOrAssign for $name { fn bitor_assign(&mut self, o: $name) { self.0 |= o.0 } }
        impl BitAnd for $name { type Output = $name; fn bitand(self, o: $name) -> $name { $name(self.0 & o.0) } }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut first = true;
                write!(f, "{}(", stringify!($name))?;
                $(if self.contains($name::$f) && $v != 0 {
                    if !first { f.write_str(" | ")?; }
                    first = false;
                    f.write_str(stringify!($f))?;
                })*
                let known: $t = 0 $(| $v)*;
                if self.0 & !known != 0 {
                    if !first { f.write_str(" | ")?; }
                    write!(f, "{:#x}", self.0 & !known)?;
                }
                f.write_str(")")
            }
        }
    };
}

flags! {
    /// `enum ibv_access_flags`: what a memory region or a QP allows.
    AccessFlags: u32 {
        /// The local HCA may write the memory (needed for RDMA READ targets and receives).
        LOCAL_WRITE = 1;
        /// A remote peer may RDMA WRITE into it.
        REMOTE_WRITE = 2;
        /// A remote peer may RDMA READ from it.
        REMOTE_READ = 4;
        /// A remote peer may perform atomics on it.
        REMOTE_ATOMIC = 8;
        /// Memory windows may be bound to it.
        MW_BIND = 16;
        /// Zero-based addressing.
        ZERO_BASED = 32;
        /// On-demand paging.
        ON_DEMAND = 64;
        /// Relaxed PCIe ordering.
        RELAXED_ORDERING = 1 << 20;
    }
}

flags! {
    /// `enum ibv_qp_attr_mask`: which fields of a [`QpAttr`] a modify uses.
    QpAttrMask: u32 {
        /// `qp_state`.
        STATE = 1;
        /// `cur_qp_state`.
        CUR_STATE = 1 << 1;
        /// `qp_access_flags`.
        ACCESS_FLAGS = 1 << 3;
        /// `pkey_index`.
        PKEY_INDEX = 1 << 4;
        /// `port_num`.
        PORT = 1 << 5;
        /// `qkey`.
        QKEY = 1 << 6;
        /// `ah_attr`.
        AV = 1 << 7;
        /// `path_mtu`.
        PATH_MTU = 1 << 8;
        /// `timeout`.
        TIMEOUT = 1 << 9;
        /// `retry_cnt`.
        RETRY_CNT = 1 << 10;
        /// `rnr_retry`.
        RNR_RETRY = 1 << 11;
        /// `rq_psn`.
        RQ_PSN = 1 << 12;
        /// `max_rd_atomic`.
        MAX_QP_RD_ATOMIC = 1 << 13;
        /// `min_rnr_timer`.
        MIN_RNR_TIMER = 1 << 15;
        /// `sq_psn`.
        SQ_PSN = 1 << 16;
        /// `max_dest_rd_atomic`.
        MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `dest_qp_num`.
        DEST_QPN = 1 << 20;
    }
}

/// `enum ibv_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum QpState {
    /// Just created or reset: no work is processed, nothing is accepted.
    #[default]
    Reset = 0,
    /// Receives may be posted; incoming requests are still dropped.
    Init = 1,
    /// Ready to receive: incoming requests from the connected peer are served.
    Rtr = 2,
    /// Ready to send: the send queue is processed too.
    Rts = 3,
    /// Send queue drain.
    Sqd = 4,
    /// Send queue error.
    Sqe = 5,
    /// Error: every outstanding and new work request completes with a flush error.
    Err = 6,
}

impl QpState {
    /// From the libibverbs value.
    pub fn from_raw(v: u32) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }
}

/// `enum ibv_mtu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    #[default]
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// From the libibverbs value.
    pub fn from_raw(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            _ => return None,
        })
    }
}

/// `enum ibv_qp_type`, the transports this project uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable Connection: bound to one peer QP.
    Rc,
    /// Dynamic Connection initiator: reaches any DC target that shares its key.
    DcInitiator,
}

/// The global route header part of an address vector (`struct ibv_global_route`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GlobalRoute {
    /// The destination GID.
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: u32,
    /// Index of the source GID in the local port's GID table.
    pub sgid_index: u8,
    /// IP hop limit (64 in hipObject).
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// An address vector (`struct ibv_ah_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AhAttr {
    /// The global route; required on RoCE.
    pub grh: Option<GlobalRoute>,
    /// Destination LID (0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port_num: u8,
}

/// The attributes a QP modify can set (`struct ibv_qp_attr`, the fields an
/// RC or DC QP uses). Which of them apply is said by a [`QpAttrMask`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpAttr {
    /// Target state.
    pub qp_state: QpState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Receive PSN: the first PSN expected from the peer.
    pub rq_psn: u32,
    /// Send PSN: the first PSN this QP sends.
    pub sq_psn: u32,
    /// The peer's QP number.
    pub dest_qp_num: u32,
    /// What remote peers may do through this QP (remote read/write/atomic).
    pub qp_access_flags: AccessFlags,
    /// The path to the peer.
    pub ah_attr: AhAttr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Outstanding RDMA READs this QP may issue.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READs this QP accepts as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (IB table: 0 is 655.36 ms, 1 is 0.01 ms ... 31 is 491.52 ms).
    pub min_rnr_timer: u8,
    /// Port number.
    pub port_num: u8,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout (0 means infinite).
    pub timeout: u8,
    /// Transport retries before RETRY_EXC_ERR (0 to 7).
    pub retry_cnt: u8,
    /// RNR retries before RNR_RETRY_EXC_ERR (0 to 6; 7 means infinite).
    pub rnr_retry: u8,
}

/// Capacities asked for when a QP is created (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCap {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
}

impl Default for QpCap {
    /// hipObject's: 8 send and 8 receive work requests of one SGE each.
    fn default() -> QpCap {
        QpCap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
        }
    }
}

/// One scatter/gather entry (`struct ibv_sge`): local memory named by the
/// local key of a registered memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address inside the memory region.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The memory region's local key.
    pub lkey: u32,
}

/// The remote side of an RDMA READ or WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key of the peer's memory region.
    pub rkey: u32,
}

/// cuObject's public DC access key (`0xffeeddcc`, perftest's default too).
/// Anyone who knows it, a target's DCT number and an rkey can reach that
/// target's memory: use it only as an explicit choice, to serve cuObject
/// clients or to be one. Creating a DC target with it logs a warning.
pub const CUOBJECT_DC_KEY: u64 = 0xffee_ddcc;

/// Where a DC initiator's work request goes: the target's address, DCT
/// number and DC access key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcAddr {
    /// The target's GID.
    pub gid: Gid,
    /// The target's LID (0 on RoCE).
    pub lid: u16,
    /// The DC target number (24 bits).
    pub dct_num: u32,
    /// The DC access key the target was created with.
    pub dc_key: u64,
}

/// A send work request's operation (`enum ibv_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// One-sided write into the peer's memory.
    RdmaWrite(RemoteAddr),
    /// One-sided write that also consumes a receive at the peer and delivers
    /// the immediate value in its completion.
    RdmaWriteWithImm(RemoteAddr, u32),
    /// Two-sided send into the peer's next posted receive.
    Send,
    /// Send with an immediate value.
    SendWithImm(u32),
    /// One-sided read from the peer's memory into the local SGEs.
    RdmaRead(RemoteAddr),
}

impl SendOp {
    /// The libibverbs `ibv_wr_opcode` value.
    pub fn raw(&self) -> u32 {
        match self {
            SendOp::RdmaWrite(_) => 0,
            SendOp::RdmaWriteWithImm(..) => 1,
            SendOp::Send => 2,
            SendOp::SendWithImm(_) => 3,
            SendOp::RdmaRead(_) => 4,
        }
    }

    /// The completion opcode a successful request of this kind reports.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::RdmaWrite(_) | SendOp::RdmaWriteWithImm(..) => WcOpcode::RdmaWrite,
            SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
            SendOp::RdmaRead(_) => WcOpcode::RdmaRead,
        }
    }
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local memory: gathered from for writes and sends, scattered into for reads.
    pub sg_list: Vec<Sge>,
    /// Whether a successful completion is generated (errors always are).
    pub signaled: bool,
    /// For DC initiators only: where the request goes.
    pub dc: Option<DcAddr>,
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where an incoming send's payload is scattered.
    pub sg_list: Vec<Sge>,
}

/// `enum ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
    TmErr = 22,
    TmRndvIncomplete = 23,
}

impl WcStatus {
    /// From the libibverbs value; unknown values map to `GeneralErr`.
    pub fn from_raw(v: u32) -> WcStatus {
        use WcStatus::*;
        const ALL: [WcStatus; 24] = [
            Success,
            LocLenErr,
            LocQpOpErr,
            LocEecOpErr,
            LocProtErr,
            WrFlushErr,
            MwBindErr,
            BadRespErr,
            LocAccessErr,
            RemInvReqErr,
            RemAccessErr,
            RemOpErr,
            RetryExcErr,
            RnrRetryExcErr,
            LocRddViolErr,
            RemInvRdReqErr,
            RemAbortErr,
            InvEecnErr,
            InvEecStateErr,
            FatalErr,
            RespTimeoutErr,
            GeneralErr,
            TmErr,
            TmRndvIncomplete,
        ];
        usize::try_from(v)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .unwrap_or(GeneralErr)
    }

    /// libibverbs' `ibv_wc_status_str()` text.
    pub fn as_str(self) -> &'static str {
        use WcStatus::*;
        match self {
            Success => "success",
            LocLenErr => "local length error",
            LocQpOpErr => "local QP operation error",
            LocEecOpErr => "local EE context operation error",
            LocProtErr => "local protection error",
            WrFlushErr => "Work Request Flushed Error",
            MwBindErr => "memory management operation error",
            BadRespErr => "bad response error",
            LocAccessErr => "local access error",
            RemInvReqErr => "remote invalid request error",
            RemAccessErr => "remote access error",
            RemOpErr => "remote operation error",
            RetryExcErr => "transport retry counter exceeded",
            RnrRetryExcErr => "RNR retry counter exceeded",
            LocRddViolErr => "local RDD violation error",
            RemInvRdReqErr => "remote invalid RD request",
            RemAbortErr => "aborted error",
            InvEecnErr => "invalid EE context number",
            InvEecStateErr => "invalid EE context state",
            FatalErr => "fatal error",
            RespTimeoutErr => "response timeout error",
            GeneralErr => "general error",
            TmErr => "TM error",
            TmRndvIncomplete => "TM software rendezvous",
        }
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.as_str(), *self as u32)
    }
}

/// `enum ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// A send completed.
    Send = 0,
    /// An RDMA WRITE (with or without immediate) completed.
    RdmaWrite = 1,
    /// An RDMA READ completed.
    RdmaRead = 2,
    /// A receive consumed by a send.
    Recv = 128,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Operation (valid for successful completions, as in libibverbs).
    pub opcode: WcOpcode,
    /// Provider-specific error detail.
    pub vendor_err: u32,
    /// Bytes received (receive completions) or moved.
    pub byte_len: u32,
    /// The immediate value, for receives consumed by a `*_WITH_IMM`.
    pub imm_data: Option<u32>,
    /// The local QP the work request belonged to.
    pub qp_num: u32,
    /// The remote QP (receive completions).
    pub src_qp: u32,
}

/// How a GID table entry is used (from sysfs `gid_attrs/types`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, link-layer routed).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// Not known (unconfigured entry, or sysfs not readable).
    Unknown,
}

/// One GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the port's table.
    pub index: u16,
    /// The GID.
    pub gid: Gid,
    /// What it is used for.
    pub gid_type: GidType,
}

/// `enum ibv_port_state`, the ones that matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// Link down.
    Down,
    /// Link up, not yet active.
    Init,
    /// Armed.
    Armed,
    /// Active: traffic flows.
    Active,
    /// Other values.
    Other(u32),
}

/// `enum ibv_link_layer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
    /// Unspecified.
    Unspecified,
}

/// What a port query reports (`struct ibv_port_attr`, the fields used here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Port state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// The MTU currently configured.
    pub active_mtu: Mtu,
    /// Entries in the GID table.
    pub gid_tbl_len: u32,
    /// Maximum message size.
    pub max_msg_sz: u32,
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// Link layer.
    pub link_layer: LinkLayer,
}

/// What identifies a device (`struct ibv_device_attr`, the fields used here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`mlx5_0`, `bnxt_re0`, `soft0`).
    pub name: String,
    /// PCI vendor ID (0x14E4 Broadcom, 0x1DD8 Pensando, 0x15B3 Mellanox).
    pub vendor_id: u32,
    /// Vendor part ID.
    pub vendor_part_id: u32,
    /// Physical ports.
    pub phys_port_cnt: u8,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Whether dma-buf MRs can be registered.
    pub supports_dmabuf: bool,
    /// Whether DC (dynamic connection) QPs can be created.
    pub supports_dc: bool,
    /// Why not, when `supports_dc` is false (the library or device that is
    /// missing), for the logs and for the answers that decline DC.
    pub dc_unavailable: Option<String>,
    /// Outstanding RDMA READs a QP may accept as responder (`max_qp_rd_atom`).
    pub max_qp_rd_atom: u32,
    /// Outstanding RDMA READs a QP may issue (`max_qp_init_rd_atom`).
    pub max_qp_init_rd_atom: u32,
}
