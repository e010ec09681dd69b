//! Moving a DC initiator (DCI) to RTS.
//!
//! A DCI has no fixed peer: each work request names its target (DCT number,
//! DC key and address), so it goes RESET → INIT (port and P_Key index) →
//! RTR (path MTU, and an address vector that names only the port and the
//! source GID, as UCX does for ConnectX DCIs) → RTS with the same transport
//! attributes as an RC requester ([`crate::rc::to_rts`]).

use crate::error::Result;
use crate::rc::{self, RcParams};
use crate::types::{AhAttr, GlobalRoute, QpAttr, QpAttrMask, QpState};
use crate::verbs::QueuePair;
use hipobj_wire::Gid;

/// Moves a fresh DCI (in RESET) to RTS on `p.port` with `p.mtu` and `p`'s
/// timeout, retries and READ depth.
pub fn initiator_to_rts(qp: &QueuePair, p: &RcParams) -> Result<()> {
    qp.modify(
        &QpAttr {
            qp_state: QpState::Init,
            port_num: p.port,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::PORT | QpAttrMask::PKEY_INDEX,
    )?;
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: p.mtu,
            ah_attr: AhAttr {
                grh: Some(GlobalRoute {
                    dgid: Gid::ZERO,
                    flow_label: 0,
                    sgid_index: p.gid_index,
                    hop_limit: p.hop_limit,
                    traffic_class: 0,
                }),
                dlid: 0,
                sl: 0,
                port_num: p.port,
            },
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::PATH_MTU | QpAttrMask::AV,
    )?;
    rc::to_rts(qp, p)
}
