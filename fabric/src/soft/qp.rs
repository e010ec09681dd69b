//! A software queue pair's verbs: creation, the transitions between states,
//! and posting to its send and receive queues.
//!
//! Its state ([`QpInner`], [`QpCore`]) is in [`super::shared`]. The
//! requester side (sending, retransmitting, completing) runs on a thread
//! per QP in RTS ([`super::requester`]); the responder side runs on the
//! device's connection threads ([`super::responder`]). Both work on the
//! [`QpCore`] under one lock, which is never held across socket I/O.

use super::completion::vendor_err;
use super::cq::soft_cq;
use super::packet::MAX_MESSAGE;
use super::shared::{segments, ActiveWr, DeviceShared, QpCore, QpInner, Target};
use super::{psn, qp_state, requester};
use crate::error::{FabricError, Result};
use crate::seam::{QpInit, QpOps};
use crate::types::{
    QpAttr, QpAttrMask, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus,
};
use std::sync::{Arc, Condvar, Mutex};

impl QpInner {
    pub fn create(dev: &Arc<DeviceShared>, pd_id: u64, init: &QpInit<'_>) -> Result<Arc<QpInner>> {
        let c = init.cap;
        if c.max_send_wr == 0 && c.max_recv_wr == 0
            || c.max_send_wr > 16384
            || c.max_recv_wr > 16384
            || c.max_send_sge > 32
            || c.max_recv_sge > 32
        {
            return Err(FabricError::invalid(
                "create_qp",
                format!("capacities {c:?}"),
            ));
        }
        let send_cq = soft_cq(init.send_cq, "create_qp")?;
        let recv_cq = soft_cq(init.recv_cq, "create_qp")?;
        let mut made = None;
        dev.alloc_qpn(|qpn| {
            let qp = Arc::new(QpInner {
                dev: dev.clone(),
                qpn,
                qp_type: init.qp_type,
                pd_id,
                send_cq,
                recv_cq,
                cap: c,
                core: Mutex::new(QpCore::default()),
                wake: Condvar::new(),
            });
            let t = Target::Rc(Arc::downgrade(&qp));
            made = Some(qp);
            t
        })?;
        made.ok_or_else(|| FabricError::invalid("create_qp", "no QP number"))
    }

    fn modify(self: &Arc<Self>, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let mut g = self.lock();
        let to = qp_state::check(self.qp_type, g.state, attr, mask)
            .map_err(|why| FabricError::invalid("modify_qp", why))?;
        let from = g.state;
        match to {
            QpState::Reset => {
                // Everything queued is discarded without completions;
                // threads still busy with memory keep their count, and
                // what they hold is delivered when they let go.
                self.stop_threads(&mut g);
                let gen = g.gen;
                let busy = g.busy;
                let held = std::mem::take(&mut g.held);
                *g = QpCore {
                    gen,
                    busy,
                    held,
                    ..QpCore::default()
                };
                return Ok(());
            }
            QpState::Err => {
                qp_state::apply(&mut g.attr, attr, mask);
                g.attr.qp_state = from;
                self.enter_error(&mut g);
                return Ok(());
            }
            _ => {}
        }
        qp_state::apply(&mut g.attr, attr, mask);
        g.state = to;
        if from == QpState::Init && to == QpState::Rtr {
            g.epsn = g.attr.rq_psn;
            g.nak_seq_sent = false;
        }
        if from == QpState::Rtr && to == QpState::Rts {
            let p = g.attr.sq_psn;
            g.next_psn = p;
            g.send_psn = p;
            g.sent_hi = p;
            g.una = p;
            g.retry_left = g.attr.retry_cnt;
            g.rnr_left = g.attr.rnr_retry;
            g.gen += 1;
            let gen = g.gen;
            drop(g);
            requester::start(self.clone(), gen)?;
        }
        Ok(())
    }

    fn post_send(&self, wr: &SendWr) -> Result<()> {
        const V: &str = "post_send";
        if wr.sg_list.len() > self.cap.max_send_sge as usize {
            return Err(FabricError::invalid(
                V,
                format!(
                    "{} SGEs, the QP allows {}",
                    wr.sg_list.len(),
                    self.cap.max_send_sge
                ),
            ));
        }
        match (self.qp_type, &wr.op, wr.dc.is_some()) {
            (QpType::Rc, _, false) => {}
            (QpType::DcInitiator, SendOp::RdmaWrite(_) | SendOp::RdmaRead(_), true) => {}
            (QpType::Rc, _, true) => {
                return Err(FabricError::invalid(
                    V,
                    "an RC work request has no DC address",
                ))
            }
            (QpType::DcInitiator, _, false) => {
                return Err(FabricError::invalid(
                    V,
                    "a DC work request needs a DC address",
                ))
            }
            (QpType::DcInitiator, op, true) => {
                return Err(FabricError::invalid(
                    V,
                    format!("{op:?} is not supported on a DC initiator"),
                ))
            }
        }
        let len = wr
            .sg_list
            .iter()
            .try_fold(0u64, |acc, s| acc.checked_add(u64::from(s.length)));
        let len = len.filter(|&l| l <= MAX_MESSAGE).ok_or_else(|| {
            FabricError::invalid(V, format!("message longer than {MAX_MESSAGE} bytes"))
        })?;
        let mut g = self.lock();
        match g.state {
            QpState::Rts => {}
            QpState::Err => {
                // Accepted, and flushed at once (the queue is already empty).
                g.sq.push_back(ActiveWr {
                    wr: wr.clone(),
                    first_psn: 0,
                    nsegs: 0,
                    len,
                    cma_read_done: false,
                });
                self.complete_head(&mut g, WcStatus::WrFlushErr, vendor_err::FLUSHED);
                return Ok(());
            }
            s => {
                return Err(FabricError::invalid(
                    V,
                    format!("the QP is in {s:?}, not RTS"),
                ))
            }
        }
        if g.sq.len() >= self.cap.max_send_wr as usize {
            return Err(FabricError::no_resources(
                V,
                format!("send queue full ({} requests)", self.cap.max_send_wr),
            ));
        }
        let nsegs = segments(len);
        let first_psn = g.next_psn;
        g.next_psn = psn::add(first_psn, nsegs);
        g.sq.push_back(ActiveWr {
            wr: wr.clone(),
            first_psn,
            nsegs,
            len,
            cma_read_done: false,
        });
        requester::post(self, g, len);
        Ok(())
    }

    fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        const V: &str = "post_recv";
        if self.qp_type != QpType::Rc {
            return Err(FabricError::invalid(
                V,
                "a DC initiator has no receive queue",
            ));
        }
        if wr.sg_list.len() > self.cap.max_recv_sge as usize {
            return Err(FabricError::invalid(
                V,
                format!(
                    "{} SGEs, the QP allows {}",
                    wr.sg_list.len(),
                    self.cap.max_recv_sge
                ),
            ));
        }
        let mut g = self.lock();
        match g.state {
            QpState::Reset => return Err(FabricError::invalid(V, "the QP is in RESET")),
            QpState::Err => {
                self.complete_recv(
                    &mut g,
                    wr.wr_id,
                    WcStatus::WrFlushErr,
                    WcOpcode::Recv,
                    0,
                    None,
                    0,
                );
                return Ok(());
            }
            _ => {}
        }
        if g.rq.len() >= self.cap.max_recv_wr as usize {
            return Err(FabricError::no_resources(
                V,
                format!("receive queue full ({} requests)", self.cap.max_recv_wr),
            ));
        }
        g.rq.push_back(wr.clone());
        Ok(())
    }
}

/// The provider object behind a [`QueuePair`](crate::QueuePair).
#[derive(Debug)]
pub(crate) struct SoftQp {
    pub inner: Arc<QpInner>,
}

impl QpOps for SoftQp {
    fn qp_num(&self) -> u32 {
        self.inner.qpn
    }
    fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }
    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.inner.modify(attr, mask)
    }
    fn query(&self) -> Result<QpAttr> {
        let g = self.inner.lock();
        Ok(QpAttr {
            qp_state: g.state,
            ..g.attr
        })
    }
    fn post_send(&self, wr: &SendWr) -> Result<()> {
        self.inner.post_send(wr)
    }
    fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        self.inner.post_recv(wr)
    }
}

impl Drop for SoftQp {
    fn drop(&mut self) {
        let q = &self.inner;
        q.dev.free_qpn(q.qpn);
        let mut g = q.lock();
        // A destroyed QP answers nothing, even to threads that still hold it.
        g.destroyed = true;
        g.state = QpState::Reset;
        q.stop_threads(&mut g);
        // As ibv_destroy_qp: once it returns, nothing touches the memory
        // the QP's work requests named. The sockets are shut down, so a
        // thread in send(2) or recv(2) returns at once.
        while g.busy > 0 {
            g = q
                .wake
                .wait_timeout(g, std::time::Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
