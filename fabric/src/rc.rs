//! Moving an RC queue pair through its states with hipObject's attributes.
//!
//! hipObject connects with MTU 4096, PSNs 0, timeout 14 (about 67 ms),
//! 7 retries, 7 RNR retries (infinite) and hop limit 64; these are the
//! defaults of [`RcParams`]. A QP is reused for a new peer by moving it to
//! RESET and back to INIT: an RC QP cannot reconnect from RTS any other way.

use crate::error::Result;
use crate::types::{
    AccessFlags, AhAttr, DeviceInfo, GlobalRoute, Mtu, QpAttr, QpAttrMask, QpCap, QpState, QpType,
};
use crate::verbs::{CompletionQueue, Device, ProtectionDomain, QueuePair};
use hipobj_wire::Gid;

/// The peer an RC QP connects to: its QP number and address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcPeer {
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's GID.
    pub gid: Gid,
    /// The peer's LID (0 on RoCE).
    pub lid: u16,
}

/// Connection attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcParams {
    /// Local port (1).
    pub port: u8,
    /// Index of the local GID to send from.
    pub gid_index: u8,
    /// Path MTU (4096).
    pub mtu: Mtu,
    /// Local ACK timeout exponent (14).
    pub timeout: u8,
    /// Transport retries (7).
    pub retry_cnt: u8,
    /// RNR retries (7: infinite).
    pub rnr_retry: u8,
    /// RNR NAK timer code (12: 0.64 ms).
    pub min_rnr_timer: u8,
    /// Hop limit (64).
    pub hop_limit: u8,
    /// Outstanding READs as requester.
    pub max_rd_atomic: u8,
    /// Outstanding READs as responder.
    pub max_dest_rd_atomic: u8,
    /// First PSN sent (0).
    pub sq_psn: u32,
    /// First PSN expected (0).
    pub rq_psn: u32,
}

impl Default for RcParams {
    fn default() -> RcParams {
        RcParams {
            port: 1,
            gid_index: 0,
            mtu: Mtu::Mtu4096,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            hop_limit: 64,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            sq_psn: 0,
            rq_psn: 0,
        }
    }
}

impl RcParams {
    /// These parameters with the READ depths capped at what `device`
    /// allows (`max_qp_init_rd_atom` as requester, `max_qp_rd_atom` as
    /// responder; at least 1): a NIC refuses a connect that asks for more.
    pub fn within(self, device: &DeviceInfo) -> RcParams {
        let cap = |limit: u32, want: u8| {
            u8::try_from(limit.clamp(1, u32::from(want.max(1)))).unwrap_or(want)
        };
        RcParams {
            max_rd_atomic: cap(device.max_qp_init_rd_atom, self.max_rd_atomic),
            max_dest_rd_atomic: cap(device.max_qp_rd_atom, self.max_dest_rd_atomic),
            ..self
        }
    }
}

/// A new RC QP with the default capacities over a CQ of its own (`cqe`
/// entries, for sends and receives), moved to INIT on `port` allowing
/// peers `access`: the QP a hipobj-rc-v2 client makes for a transfer (the
/// client library's, and the test kit's raw peer).
pub fn init_qp(
    device: &Device,
    pd: &ProtectionDomain,
    cqe: u32,
    port: u8,
    access: AccessFlags,
) -> Result<(QueuePair, CompletionQueue)> {
    let cq = device.create_cq(cqe)?;
    let qp = pd.create_qp(QpType::Rc, &cq, &cq, QpCap::default())?;
    to_init(&qp, port, access)?;
    Ok((qp, cq))
}

/// RESET to INIT, allowing peers `access` (remote read and/or write).
pub fn to_init(qp: &QueuePair, port: u8, access: AccessFlags) -> Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: port,
        qp_access_flags: access,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
}

/// INIT to RTR, aimed at `peer`.
pub fn to_rtr(qp: &QueuePair, peer: &RcPeer, p: &RcParams) -> Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: p.mtu,
        dest_qp_num: peer.qp_num,
        rq_psn: p.rq_psn,
        max_dest_rd_atomic: p.max_dest_rd_atomic,
        min_rnr_timer: p.min_rnr_timer,
        ah_attr: AhAttr {
            grh: Some(GlobalRoute {
                dgid: peer.gid,
                sgid_index: p.gid_index,
                hop_limit: p.hop_limit,
                flow_label: 0,
                traffic_class: 0,
            }),
            dlid: peer.lid,
            sl: 0,
            port_num: p.port,
        },
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )
}

/// RTR to RTS.
pub fn to_rts(qp: &QueuePair, p: &RcParams) -> Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Rts,
        timeout: p.timeout,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        sq_psn: p.sq_psn,
        max_rd_atomic: p.max_rd_atomic,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
}

/// INIT to RTR to RTS, connected to `peer`.
pub fn connect(qp: &QueuePair, peer: &RcPeer, p: &RcParams) -> Result<()> {
    to_rtr(qp, peer, p)?;
    to_rts(qp, p)
}

/// Any state to RESET.
pub fn reset(qp: &QueuePair) -> Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Reset,
        ..QpAttr::default()
    };
    qp.modify(&attr, QpAttrMask::STATE)
}

/// Any state to ERR: outstanding work completes with WR_FLUSH_ERR.
pub fn to_error(qp: &QueuePair) -> Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    qp.modify(&attr, QpAttrMask::STATE)
}

/// RESET then INIT: ready to connect to a different peer.
pub fn reset_to_init(qp: &QueuePair, port: u8, access: AccessFlags) -> Result<()> {
    reset(qp)?;
    to_init(qp, port, access)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(init: u32, dest: u32) -> DeviceInfo {
        DeviceInfo {
            name: "x".into(),
            vendor_id: 0,
            vendor_part_id: 0,
            phys_port_cnt: 1,
            max_mr_size: u64::MAX,
            supports_dmabuf: false,
            supports_dc: false,
            dc_unavailable: Some("a test device".to_string()),
            max_qp_rd_atom: dest,
            max_qp_init_rd_atom: init,
        }
    }

    #[test]
    fn read_depth_is_capped_by_the_device() {
        let p = RcParams::default().within(&info(4, 8));
        assert_eq!((p.max_rd_atomic, p.max_dest_rd_atomic), (4, 8));
        let p = RcParams::default().within(&info(64, 64));
        assert_eq!((p.max_rd_atomic, p.max_dest_rd_atomic), (16, 16));
        let p = RcParams::default().within(&info(0, 0));
        assert_eq!((p.max_rd_atomic, p.max_dest_rd_atomic), (1, 1));
    }
}
