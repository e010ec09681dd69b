//! An RC connection: a QP and the CQ it completes on, and its peer.

use crate::device::RdmaDevice;
use crate::error::{Error, Result};
use hipobj_fabric::rc::{self, RcPeer};
use hipobj_fabric::{
    AccessFlags, CompletionQueue, QpAttr, QpAttrMask, QpCap, QpState, QpType, QueuePair,
};

/// A QP in INIT (no peer) or RTS (connected to `peer`).
#[derive(Debug)]
pub struct RcConnection {
    /// The queue pair.
    pub qp: QueuePair,
    /// Its completion queue (16 entries, as hipObject).
    pub cq: CompletionQueue,
    /// The server QP it is connected to.
    pub peer: Option<RcPeer>,
    access: AccessFlags,
}

impl RcConnection {
    /// A 16-entry CQ and a QP of 8 send and 8 receive requests of one SGE,
    /// in INIT, allowing peers nothing until a transfer says what it needs.
    pub fn create(dev: &RdmaDevice) -> Result<RcConnection> {
        let cq = dev.device.create_cq(16)?;
        let qp = dev.pd.create_qp(QpType::Rc, &cq, &cq, QpCap::default())?;
        rc::to_init(&qp, dev.port, AccessFlags::EMPTY)?;
        Ok(RcConnection {
            qp,
            cq,
            peer: None,
            access: AccessFlags::EMPTY,
        })
    }

    /// Connects to `peer` (INIT to RTR to RTS).
    pub fn connect(&mut self, dev: &RdmaDevice, peer: RcPeer) -> Result<()> {
        rc::connect(&self.qp, &peer, &dev.rc_params())
            .map_err(|e| Error::rdma(format!("connecting to QP {:#x}: {e}", peer.qp_num)))?;
        self.peer = Some(peer);
        Ok(())
    }

    /// Back to INIT with no peer, draining the CQ: ready for another server.
    pub fn reset(&mut self, dev: &RdmaDevice) -> Result<()> {
        self.peer = None;
        self.access = AccessFlags::EMPTY;
        rc::reset_to_init(&self.qp, dev.port, AccessFlags::EMPTY)?;
        let mut drained = Vec::new();
        while self.cq.poll(&mut drained, 16)? > 0 {
            drained.clear();
        }
        Ok(())
    }

    /// Whether it is connected and healthy.
    pub fn is_connected(&self) -> bool {
        self.peer.is_some() && matches!(self.qp.state(), Ok(QpState::Rts))
    }

    /// Whether it needs a reset before use (connected once, now broken).
    pub fn is_broken(&self) -> bool {
        !matches!(self.qp.state(), Ok(QpState::Init | QpState::Rts))
            || (self.peer.is_some() && !self.is_connected())
    }

    /// Lets peers do exactly `access` through this QP (RTS to RTS).
    pub fn allow(&mut self, access: AccessFlags) -> Result<()> {
        if self.access == access {
            return Ok(());
        }
        let state = self.qp.state()?;
        let attr = QpAttr {
            qp_state: state,
            qp_access_flags: access,
            ..QpAttr::default()
        };
        self.qp
            .modify(&attr, QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS)?;
        self.access = access;
        Ok(())
    }
}
