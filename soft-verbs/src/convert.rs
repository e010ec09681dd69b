//! Between the C structures and the fabric's types: QP attributes, work
//! requests and completions. Pure functions over values the caller has
//! already read out of program memory.

use crate::ffi::{IBV_SEND_INLINE, IBV_SEND_SIGNALED};
use hipobj_fabric::ibverbs::abi::{
    ibv_ah_attr, ibv_gid, ibv_global_route, ibv_imm, ibv_qp_attr, ibv_wc, IBV_WC_WITH_IMM,
};
use hipobj_fabric::{
    AccessFlags, AhAttr, GlobalRoute, Mtu, QpAttr, QpAttrMask, QpState, RemoteAddr, SendOp,
    WorkCompletion,
};
use hipobj_wire::Gid;
use std::ffi::c_int;

/// `IBV_QP_PATH_MTU`.
const MASK_PATH_MTU: u32 = 1 << 8;
/// `IBV_QP_STATE`.
const MASK_STATE: u32 = 1;

/// An `ibv_qp_attr` and its mask as the fabric's. Values the mask names
/// must be valid (`EINVAL` otherwise); the soft QP then checks the
/// transition and every attribute as a NIC does.
pub fn qp_attr_from_c(attr: &ibv_qp_attr, mask: c_int) -> Result<(QpAttr, QpAttrMask), c_int> {
    let mask = u32::try_from(mask).map_err(|_| libc::EINVAL)?;
    let qp_state = if mask & MASK_STATE != 0 {
        QpState::from_raw(attr.qp_state).ok_or(libc::EINVAL)?
    } else {
        QpState::default()
    };
    let path_mtu = if mask & MASK_PATH_MTU != 0 {
        Mtu::from_raw(attr.path_mtu).ok_or(libc::EINVAL)?
    } else {
        Mtu::default()
    };
    let ah = &attr.ah_attr;
    let ah_attr = AhAttr {
        grh: (ah.is_global != 0).then_some(GlobalRoute {
            // SAFETY: every bit pattern of the union is a valid [u8; 16].
            dgid: Gid(unsafe { ah.grh.dgid.raw }),
            flow_label: ah.grh.flow_label,
            sgid_index: ah.grh.sgid_index,
            hop_limit: ah.grh.hop_limit,
            traffic_class: ah.grh.traffic_class,
        }),
        dlid: ah.dlid,
        sl: ah.sl,
        port_num: ah.port_num,
    };
    let attr = QpAttr {
        qp_state,
        path_mtu,
        rq_psn: attr.rq_psn,
        sq_psn: attr.sq_psn,
        dest_qp_num: attr.dest_qp_num,
        qp_access_flags: AccessFlags(attr.qp_access_flags),
        ah_attr,
        pkey_index: attr.pkey_index,
        max_rd_atomic: attr.max_rd_atomic,
        max_dest_rd_atomic: attr.max_dest_rd_atomic,
        min_rnr_timer: attr.min_rnr_timer,
        port_num: attr.port_num,
        timeout: attr.timeout,
        retry_cnt: attr.retry_cnt,
        rnr_retry: attr.rnr_retry,
    };
    Ok((attr, QpAttrMask(mask)))
}

/// The fabric's QP attributes as an `ibv_qp_attr` (what `ibv_query_qp`
/// fills in).
pub fn qp_attr_to_c(a: &QpAttr, out: &mut ibv_qp_attr) {
    out.qp_state = a.qp_state as u32;
    out.cur_qp_state = a.qp_state as u32;
    out.path_mtu = a.path_mtu as u32;
    out.rq_psn = a.rq_psn;
    out.sq_psn = a.sq_psn;
    out.dest_qp_num = a.dest_qp_num;
    out.qp_access_flags = a.qp_access_flags.bits();
    out.ah_attr = ah_attr_to_c(&a.ah_attr);
    out.pkey_index = a.pkey_index;
    out.max_rd_atomic = a.max_rd_atomic;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic;
    out.min_rnr_timer = a.min_rnr_timer;
    out.port_num = a.port_num;
    out.timeout = a.timeout;
    out.retry_cnt = a.retry_cnt;
    out.rnr_retry = a.rnr_retry;
}

fn ah_attr_to_c(a: &AhAttr) -> ibv_ah_attr {
    let mut out = ibv_ah_attr {
        dlid: a.dlid,
        sl: a.sl,
        port_num: a.port_num,
        ..Default::default()
    };
    if let Some(g) = a.grh {
        out.is_global = 1;
        out.grh = ibv_global_route {
            dgid: ibv_gid { raw: g.dgid.0 },
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        };
    }
    out
}

/// `enum ibv_wr_opcode` values this library posts.
pub const IBV_WR_RDMA_WRITE: u32 = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IBV_WR_SEND`.
pub const IBV_WR_SEND: u32 = 2;
/// `IBV_WR_SEND_WITH_IMM`.
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
/// `IBV_WR_RDMA_READ`.
pub const IBV_WR_RDMA_READ: u32 = 4;

/// A send work request's operation from its opcode, remote address and
/// immediate (network byte order, as `imm_data` holds it). Atomics, memory
/// windows, invalidation and TSO are `EINVAL`, as on a NIC without them.
pub fn send_op(opcode: u32, remote: RemoteAddr, imm_be: u32) -> Result<SendOp, c_int> {
    let imm = u32::from_be(imm_be);
    Ok(match opcode {
        IBV_WR_RDMA_WRITE => SendOp::RdmaWrite(remote),
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::RdmaWriteWithImm(remote, imm),
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(imm),
        IBV_WR_RDMA_READ => SendOp::RdmaRead(remote),
        _ => return Err(libc::EINVAL),
    })
}

/// What a send's flags ask for: (signalled, inline).
pub fn send_flags(flags: u32, sq_sig_all: bool) -> (bool, bool) {
    (
        sq_sig_all || flags & IBV_SEND_SIGNALED != 0,
        flags & IBV_SEND_INLINE != 0,
    )
}

/// A completion as an `ibv_wc`: the immediate back in network byte order,
/// with `IBV_WC_WITH_IMM`.
pub fn wc_to_c(wc: &WorkCompletion) -> ibv_wc {
    let (imm, flags) = match wc.imm_data {
        Some(v) => (v.to_be(), IBV_WC_WITH_IMM),
        None => (0, 0),
    };
    ibv_wc {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm: ibv_imm { imm_data: imm },
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipobj_fabric::{WcOpcode, WcStatus};

    #[test]
    fn immediates_keep_network_order() {
        let imm_be = 0x1122_3344u32.to_be();
        let op = send_op(
            IBV_WR_SEND_WITH_IMM,
            RemoteAddr { addr: 0, rkey: 0 },
            imm_be,
        )
        .unwrap();
        assert_eq!(op, SendOp::SendWithImm(0x1122_3344));
        let wc = WorkCompletion {
            wr_id: 7,
            status: WcStatus::Success,
            opcode: WcOpcode::RecvRdmaWithImm,
            vendor_err: 0,
            byte_len: 8,
            imm_data: Some(0x1122_3344),
            qp_num: 0x1234,
            src_qp: 0x5678,
        };
        let c = wc_to_c(&wc);
        // SAFETY: imm_data was written above.
        assert_eq!(unsafe { c.imm.imm_data }, imm_be);
        assert_eq!(c.wc_flags, IBV_WC_WITH_IMM);
        assert_eq!(c.opcode, 129);
    }

    #[test]
    fn unknown_opcodes_and_states_are_einval() {
        let r = RemoteAddr { addr: 0, rkey: 0 };
        for op in [5, 6, 7, 8, 9, 10, 11, 14, 15, 99] {
            assert_eq!(send_op(op, r, 0), Err(libc::EINVAL), "opcode {op}");
        }
        let attr = ibv_qp_attr {
            qp_state: 9,
            ..Default::default()
        };
        assert_eq!(qp_attr_from_c(&attr, 1).unwrap_err(), libc::EINVAL);
        assert_eq!(qp_attr_from_c(&attr, -1).unwrap_err(), libc::EINVAL);
    }

    #[test]
    fn attributes_round_trip() {
        let mut c = ibv_qp_attr {
            qp_state: 2,
            path_mtu: 5,
            rq_psn: 0x123,
            dest_qp_num: 0xabcd00,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            ..Default::default()
        };
        c.ah_attr.is_global = 1;
        c.ah_attr.port_num = 1;
        c.ah_attr.grh.hop_limit = 64;
        c.ah_attr.grh.dgid = ibv_gid {
            raw: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
        };
        let (a, m) = qp_attr_from_c(&c, 0x1_3981).unwrap();
        assert_eq!(a.qp_state, QpState::Rtr);
        assert_eq!(a.path_mtu, Mtu::Mtu4096);
        assert_eq!(m.bits(), 0x1_3981);
        let g = a.ah_attr.grh.unwrap();
        assert_eq!(g.dgid.0[12..], [127, 0, 0, 1]);
        let mut back = ibv_qp_attr::default();
        qp_attr_to_c(&a, &mut back);
        assert_eq!(back.dest_qp_num, 0xabcd00);
        assert_eq!(back.ah_attr.is_global, 1);
        assert_eq!(back.ah_attr.grh.hop_limit, 64);
    }
}
