//! Translations between the seam's types and the libibverbs structures.
//! Pure functions, tested here without a device.

use super::abi::{
    ibv_ah_attr, ibv_device_attr, ibv_gid, ibv_global_route, ibv_port_attr, ibv_qp_attr,
    ibv_recv_wr, ibv_send_wr, ibv_send_wr_rdma, ibv_send_wr_wr, ibv_sge, ibv_wc,
    IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_INFINIBAND, IBV_SEND_SIGNALED, IBV_WC_WITH_IMM,
};
use crate::error::{FabricError, Result};
use crate::types::{
    AccessFlags, AhAttr, GlobalRoute, LinkLayer, Mtu, PortAttr, PortState, QpAttr, QpAttrMask,
    QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use hipobj_wire::Gid;
use std::ffi::CStr;

/// Every [`QpAttrMask`] bit a [`QpAttr`] can carry. Other `ibv_qp_attr_mask`
/// bits (CUR_STATE, QKEY, ALT_PATH, CAP, ...) name fields `QpAttr` lacks.
pub const SUPPORTED_MASK: QpAttrMask = QpAttrMask(
    QpAttrMask::STATE.0
        | QpAttrMask::ACCESS_FLAGS.0
        | QpAttrMask::PKEY_INDEX.0
        | QpAttrMask::PORT.0
        | QpAttrMask::AV.0
        | QpAttrMask::PATH_MTU.0
        | QpAttrMask::TIMEOUT.0
        | QpAttrMask::RETRY_CNT.0
        | QpAttrMask::RNR_RETRY.0
        | QpAttrMask::RQ_PSN.0
        | QpAttrMask::MAX_QP_RD_ATOMIC.0
        | QpAttrMask::MIN_RNR_TIMER.0
        | QpAttrMask::SQ_PSN.0
        | QpAttrMask::MAX_DEST_RD_ATOMIC.0
        | QpAttrMask::DEST_QPN.0,
);

/// The `attr_mask` for `ibv_modify_qp`: the same bits (the seam uses
/// libibverbs' values), after refusing those `QpAttr` can't express.
pub fn modify_mask(mask: QpAttrMask) -> Result<i32> {
    let extra = mask.0 & !SUPPORTED_MASK.0;
    if extra != 0 {
        return Err(FabricError::invalid(
            "ibv_modify_qp",
            format!("attribute mask bits {extra:#x} name fields QpAttr does not carry"),
        ));
    }
    i32::try_from(mask.0)
        .map_err(|_| FabricError::invalid("ibv_modify_qp", format!("mask {:#x}", mask.0)))
}

fn gid_to_raw(g: &Gid) -> ibv_gid {
    ibv_gid { raw: g.0 }
}

/// A GID from libibverbs.
pub fn gid_from_raw(g: &ibv_gid) -> Gid {
    // SAFETY: every bit pattern of the union's 16 bytes is a valid [u8; 16].
    Gid(unsafe { g.raw })
}

fn ah_to_raw(ah: &AhAttr) -> ibv_ah_attr {
    let mut raw = ibv_ah_attr {
        dlid: ah.dlid,
        sl: ah.sl,
        port_num: ah.port_num,
        ..ibv_ah_attr::default()
    };
    if let Some(grh) = &ah.grh {
        raw.is_global = 1;
        raw.grh = ibv_global_route {
            dgid: gid_to_raw(&grh.dgid),
            flow_label: grh.flow_label,
            sgid_index: grh.sgid_index,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
        };
    }
    raw
}

fn ah_from_raw(raw: &ibv_ah_attr) -> AhAttr {
    AhAttr {
        grh: (raw.is_global != 0).then(|| GlobalRoute {
            dgid: gid_from_raw(&raw.grh.dgid),
            flow_label: raw.grh.flow_label,
            sgid_index: raw.grh.sgid_index,
            hop_limit: raw.grh.hop_limit,
            traffic_class: raw.grh.traffic_class,
        }),
        dlid: raw.dlid,
        sl: raw.sl,
        port_num: raw.port_num,
    }
}

/// `ibv_qp_attr` for a modify. Every field `QpAttr` has is copied; the
/// mask says which of them libibverbs reads.
pub fn qp_attr_to_raw(a: &QpAttr) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: a.qp_state as u32,
        path_mtu: a.path_mtu as u32,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.bits(),
        ah_attr: ah_to_raw(&a.ah_attr),
        pkey_index: a.pkey_index,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        ..ibv_qp_attr::default()
    }
}

/// `QpAttr` from an `ibv_query_qp` result.
pub fn qp_attr_from_raw(r: &ibv_qp_attr) -> Result<QpAttr> {
    let qp_state = QpState::from_raw(r.qp_state).ok_or_else(|| {
        FabricError::invalid("ibv_query_qp", format!("unknown QP state {}", r.qp_state))
    })?;
    Ok(QpAttr {
        qp_state,
        // A QP in RESET or INIT reports path_mtu 0: keep the default then.
        path_mtu: Mtu::from_raw(r.path_mtu).unwrap_or_default(),
        rq_psn: r.rq_psn,
        sq_psn: r.sq_psn,
        dest_qp_num: r.dest_qp_num,
        qp_access_flags: AccessFlags(r.qp_access_flags),
        ah_attr: ah_from_raw(&r.ah_attr),
        pkey_index: r.pkey_index,
        max_rd_atomic: r.max_rd_atomic,
        max_dest_rd_atomic: r.max_dest_rd_atomic,
        min_rnr_timer: r.min_rnr_timer,
        port_num: r.port_num,
        timeout: r.timeout,
        retry_cnt: r.retry_cnt,
        rnr_retry: r.rnr_retry,
    })
}

fn sge_to_raw(s: &Sge) -> ibv_sge {
    ibv_sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}

/// A send work request laid out for `post_send`: the WR and the SGE array
/// it points into, owned together so the pointer stays valid for as long
/// as this value lives (the Vec's buffer does not move when the value
/// does).
#[derive(Debug)]
pub struct RawSendWr {
    sges: Vec<ibv_sge>,
    wr: ibv_send_wr,
}

impl RawSendWr {
    /// Translates `wr` for an RC QP.
    pub fn new(wr: &SendWr) -> Result<RawSendWr> {
        if wr.dc.is_some() {
            return Err(FabricError::invalid(
                "ibv_post_send",
                "a DC address on a work request for an RC QP",
            ));
        }
        let sges: Vec<ibv_sge> = wr.sg_list.iter().map(sge_to_raw).collect();
        let num_sge = i32::try_from(sges.len())
            .map_err(|_| FabricError::invalid("ibv_post_send", format!("{} SGEs", sges.len())))?;
        let mut raw = ibv_send_wr {
            wr_id: wr.wr_id,
            num_sge,
            opcode: wr.op.raw(),
            send_flags: if wr.signaled { IBV_SEND_SIGNALED } else { 0 },
            ..ibv_send_wr::default()
        };
        let rdma = |r: &crate::types::RemoteAddr| ibv_send_wr_wr {
            rdma: ibv_send_wr_rdma {
                remote_addr: r.addr,
                rkey: r.rkey,
            },
        };
        match &wr.op {
            SendOp::RdmaWrite(r) | SendOp::RdmaRead(r) => raw.wr = rdma(r),
            SendOp::RdmaWriteWithImm(r, imm) => {
                raw.wr = rdma(r);
                raw.imm.imm_data = imm.to_be();
            }
            SendOp::Send => {}
            SendOp::SendWithImm(imm) => raw.imm.imm_data = imm.to_be(),
        }
        let mut out = RawSendWr { sges, wr: raw };
        out.wr.sg_list = if out.sges.is_empty() {
            std::ptr::null_mut()
        } else {
            out.sges.as_mut_ptr()
        };
        Ok(out)
    }

    /// The WR, whose `sg_list` points into `self`.
    pub fn wr(&mut self) -> &mut ibv_send_wr {
        &mut self.wr
    }
}

/// A receive work request laid out for `post_recv`, as [`RawSendWr`].
#[derive(Debug)]
pub struct RawRecvWr {
    /// Owns the array `wr.sg_list` points into.
    _sges: Vec<ibv_sge>,
    wr: ibv_recv_wr,
}

impl RawRecvWr {
    /// Translates `wr`.
    pub fn new(wr: &RecvWr) -> Result<RawRecvWr> {
        let mut sges: Vec<ibv_sge> = wr.sg_list.iter().map(sge_to_raw).collect();
        let num_sge = i32::try_from(sges.len())
            .map_err(|_| FabricError::invalid("ibv_post_recv", format!("{} SGEs", sges.len())))?;
        let sg_list = if sges.is_empty() {
            std::ptr::null_mut()
        } else {
            sges.as_mut_ptr()
        };
        Ok(RawRecvWr {
            wr: ibv_recv_wr {
                wr_id: wr.wr_id,
                next: std::ptr::null_mut(),
                sg_list,
                num_sge,
            },
            _sges: sges,
        })
    }

    /// The WR, whose `sg_list` points into `self`.
    pub fn wr(&mut self) -> &mut ibv_recv_wr {
        &mut self.wr
    }
}

/// `enum ibv_wc_opcode` to the seam's; `None` for opcodes this project
/// never posts (atomics, binds, TSO, tag matching).
pub fn wc_opcode(raw: u32) -> Option<WcOpcode> {
    Some(match raw {
        0 => WcOpcode::Send,
        1 => WcOpcode::RdmaWrite,
        2 => WcOpcode::RdmaRead,
        128 => WcOpcode::Recv,
        129 => WcOpcode::RecvRdmaWithImm,
        _ => return None,
    })
}

/// A completion from `poll_cq`. libibverbs leaves `opcode` undefined in
/// error completions; an opcode this project doesn't know is reported as
/// `Send` then (and logged when the completion claims success).
pub fn wc_from_raw(wc: &ibv_wc) -> WorkCompletion {
    let status = WcStatus::from_raw(wc.status);
    let opcode = wc_opcode(wc.opcode).unwrap_or_else(|| {
        if status == WcStatus::Success {
            tracing::warn!(
                opcode = wc.opcode,
                wr_id = wc.wr_id,
                "successful completion with an opcode this provider does not post"
            );
        }
        WcOpcode::Send
    });
    let imm_data = (wc.wc_flags & IBV_WC_WITH_IMM != 0)
        // SAFETY: both union members are u32; any bits are valid.
        .then(|| u32::from_be(unsafe { wc.imm.imm_data }));
    WorkCompletion {
        wr_id: wc.wr_id,
        status,
        opcode,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm_data,
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
    }
}

/// `enum ibv_port_state`.
pub fn port_state(raw: u32) -> PortState {
    match raw {
        1 => PortState::Down,
        2 => PortState::Init,
        3 => PortState::Armed,
        4 => PortState::Active,
        v => PortState::Other(v),
    }
}

/// `ibv_port_attr` to the seam's.
pub fn port_attr_from_raw(p: &ibv_port_attr) -> PortAttr {
    PortAttr {
        state: port_state(p.state),
        max_mtu: Mtu::from_raw(p.max_mtu).unwrap_or_default(),
        active_mtu: Mtu::from_raw(p.active_mtu).unwrap_or_default(),
        gid_tbl_len: u32::try_from(p.gid_tbl_len).unwrap_or(0),
        max_msg_sz: p.max_msg_sz,
        lid: p.lid,
        link_layer: match p.link_layer {
            IBV_LINK_LAYER_INFINIBAND => LinkLayer::InfiniBand,
            IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
            _ => LinkLayer::Unspecified,
        },
    }
}

/// The firmware version string of a device attribute.
pub fn fw_ver(attr: &ibv_device_attr) -> String {
    let bytes: Vec<u8> = attr.fw_ver.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RemoteAddr;

    #[test]
    fn rtr_attributes_are_copied_field_by_field() {
        let gid = Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: Mtu::Mtu4096,
            rq_psn: 0x123456,
            sq_psn: 0x654321,
            dest_qp_num: 0xabcdef,
            qp_access_flags: AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
            ah_attr: AhAttr {
                grh: Some(GlobalRoute {
                    dgid: gid,
                    flow_label: 7,
                    sgid_index: 3,
                    hop_limit: 64,
                    traffic_class: 5,
                }),
                dlid: 9,
                sl: 2,
                port_num: 1,
            },
            pkey_index: 4,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 15,
            min_rnr_timer: 12,
            port_num: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
        };
        let r = qp_attr_to_raw(&a);
        assert_eq!(r.qp_state, 2);
        assert_eq!(r.path_mtu, 5);
        assert_eq!(r.rq_psn, 0x123456);
        assert_eq!(r.sq_psn, 0x654321);
        assert_eq!(r.dest_qp_num, 0xabcdef);
        assert_eq!(r.qp_access_flags, 6);
        assert_eq!(r.ah_attr.is_global, 1);
        assert_eq!(gid_from_raw(&r.ah_attr.grh.dgid), gid);
        assert_eq!(r.ah_attr.grh.sgid_index, 3);
        assert_eq!(r.ah_attr.grh.hop_limit, 64);
        assert_eq!(r.ah_attr.grh.flow_label, 7);
        assert_eq!(r.ah_attr.grh.traffic_class, 5);
        assert_eq!(
            (r.ah_attr.dlid, r.ah_attr.sl, r.ah_attr.port_num),
            (9, 2, 1)
        );
        assert_eq!((r.pkey_index, r.port_num), (4, 1));
        assert_eq!((r.max_rd_atomic, r.max_dest_rd_atomic), (16, 15));
        assert_eq!((r.min_rnr_timer, r.timeout), (12, 14));
        assert_eq!((r.retry_cnt, r.rnr_retry), (7, 6));
        assert_eq!(qp_attr_from_raw(&r).unwrap(), a);
    }

    #[test]
    fn no_grh_means_not_global() {
        let r = qp_attr_to_raw(&QpAttr::default());
        assert_eq!(r.ah_attr.is_global, 0);
        assert_eq!(qp_attr_from_raw(&r).unwrap().ah_attr.grh, None);
    }

    #[test]
    fn masks_pass_through_and_unknown_bits_are_refused() {
        let m = QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::DEST_QPN;
        assert_eq!(modify_mask(m).unwrap(), 1 | 1 << 7 | 1 << 20);
        assert_eq!(
            modify_mask(SUPPORTED_MASK).unwrap(),
            SUPPORTED_MASK.0 as i32
        );
        assert!(modify_mask(QpAttrMask::CUR_STATE).is_err());
        assert!(modify_mask(QpAttrMask::QKEY).is_err());
        assert!(modify_mask(QpAttrMask(1 << 19)).is_err());
    }

    #[test]
    fn send_wrs_are_laid_out_as_libibverbs_expects() {
        let sg = vec![
            Sge {
                addr: 0x1000,
                length: 64,
                lkey: 0x11,
            },
            Sge {
                addr: 0x2000,
                length: 32,
                lkey: 0x22,
            },
        ];
        let ra = RemoteAddr {
            addr: 0xdead_beef_0000,
            rkey: 0x77,
        };
        let cases = [
            (SendOp::RdmaWrite(ra), 0, None, true),
            (
                SendOp::RdmaWriteWithImm(ra, 0x0102_0304),
                1,
                Some(0x0102_0304u32),
                true,
            ),
            (SendOp::Send, 2, None, false),
            (SendOp::SendWithImm(5), 3, Some(5), false),
            (SendOp::RdmaRead(ra), 4, None, true),
        ];
        for (op, opcode, imm, rdma) in cases {
            let wr = SendWr {
                wr_id: 42,
                op,
                sg_list: sg.clone(),
                signaled: true,
                dc: None,
            };
            let mut raw = RawSendWr::new(&wr).unwrap();
            let w = *raw.wr();
            assert_eq!(w.wr_id, 42);
            assert_eq!(w.opcode, opcode);
            assert_eq!(w.num_sge, 2);
            assert!(w.next.is_null());
            assert_eq!(w.send_flags, IBV_SEND_SIGNALED);
            // SAFETY: sg_list points at the two SGEs `raw` owns.
            let sges = unsafe { std::slice::from_raw_parts(w.sg_list, 2) };
            assert_eq!(
                (sges[0].addr, sges[0].length, sges[0].lkey),
                (0x1000, 64, 0x11)
            );
            assert_eq!(
                (sges[1].addr, sges[1].length, sges[1].lkey),
                (0x2000, 32, 0x22)
            );
            if let Some(imm) = imm {
                // SAFETY: imm_data is a u32 member written above.
                assert_eq!(unsafe { w.imm.imm_data }, imm.to_be());
            }
            if rdma {
                // SAFETY: the rdma member was written for this opcode.
                let r = unsafe { w.wr.rdma };
                assert_eq!((r.remote_addr, r.rkey), (0xdead_beef_0000, 0x77));
            }
        }
        let unsignaled = SendWr {
            wr_id: 1,
            op: SendOp::Send,
            sg_list: vec![],
            signaled: false,
            dc: None,
        };
        let mut raw = RawSendWr::new(&unsignaled).unwrap();
        assert_eq!(raw.wr().send_flags, 0);
        assert!(raw.wr().sg_list.is_null());
        assert_eq!(raw.wr().num_sge, 0);
    }

    #[test]
    fn completions_map_status_vendor_err_and_imm() {
        let mut wc = ibv_wc {
            wr_id: 9,
            status: 12,
            opcode: 77,
            vendor_err: 0x81,
            byte_len: 0,
            qp_num: 5,
            ..ibv_wc::default()
        };
        let c = wc_from_raw(&wc);
        assert_eq!(c.status, WcStatus::RetryExcErr);
        assert_eq!(c.vendor_err, 0x81);
        assert_eq!(c.imm_data, None);
        assert_eq!(c.qp_num, 5);
        wc.status = 0;
        wc.opcode = 129;
        wc.byte_len = 4096;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm.imm_data = 0xdead_beef_u32.to_be();
        wc.src_qp = 0x42;
        let c = wc_from_raw(&wc);
        assert_eq!(c.status, WcStatus::Success);
        assert_eq!(c.opcode, WcOpcode::RecvRdmaWithImm);
        assert_eq!(c.imm_data, Some(0xdead_beef));
        assert_eq!((c.byte_len, c.src_qp), (4096, 0x42));
    }
}
