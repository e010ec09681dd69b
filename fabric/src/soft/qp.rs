//! A software queue pair: its state, its send and receive queues, and the
//! transitions between states.
//!
//! The requester side (sending, retransmitting, completing) runs on a thread
//! per QP in RTS ([`super::requester`]); the responder side runs on the
//! device's connection threads ([`super::responder`]). Both work on the
//! [`QpCore`] under one lock, which is never held across socket I/O.

use super::cq::CqInner;
use super::device::{soft_cq, DeviceShared, Target};
use super::packet::{MAX_MESSAGE, SEGMENT};
use super::{psn, qp_state, requester};
use crate::error::{FabricError, Result};
use crate::seam::{QpInit, QpOps};
use crate::types::{
    QpAttr, QpAttrMask, QpCap, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};
use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Vendor error codes the software provider puts in failed completions.
pub mod vendor_err {
    /// The work request was flushed.
    pub const FLUSHED: u32 = 0;
    /// No acknowledgement came before the retries ran out (peer silent,
    /// unreachable, or dropping the requests).
    pub const NO_ACK: u32 = 0x51;
    /// The peer refused the request with a NAK.
    pub const NAK: u32 = 0x52;
    /// A local key, bound or access check failed.
    pub const LOCAL_KEY: u32 = 0x53;
    /// The peer sent a malformed or unexpected response.
    pub const BAD_RESPONSE: u32 = 0x54;
    /// The peer kept answering "receiver not ready".
    pub const RNR: u32 = 0x55;
}

/// A posted send work request and the PSNs it occupies.
#[derive(Debug, Clone)]
pub(crate) struct ActiveWr {
    pub wr: SendWr,
    pub first_psn: u32,
    pub nsegs: u32,
    pub len: u64,
    /// A READ whose data the same-host path has copied: it completes with
    /// the acknowledgement of its last PSN.
    pub cma_read_done: bool,
}

impl ActiveWr {
    /// The PSN after this request's last.
    pub fn end_psn(&self) -> u32 {
        psn::add(self.first_psn, self.nsegs)
    }

    /// Whether `p` is one of this request's PSNs.
    pub fn holds(&self, p: u32) -> bool {
        let d = psn::diff(p, self.first_psn);
        d >= 0 && (d as u32) < self.nsegs
    }

    /// Offset and length of segment `k`.
    pub fn segment(&self, k: u32) -> (u64, u32) {
        let off = u64::from(k) * u64::from(SEGMENT);
        let len = (self.len - off.min(self.len)).min(u64::from(SEGMENT)) as u32;
        (off, len)
    }

    pub fn is_read(&self) -> bool {
        matches!(self.wr.op, SendOp::RdmaRead(_))
    }
}

/// Segments a message of `len` bytes occupies (at least one).
pub(crate) fn segments(len: u64) -> u32 {
    len.div_ceil(u64::from(SEGMENT)).max(1) as u32
}

/// The requester's connection to its responder.
#[derive(Debug)]
pub(crate) struct ReqConn {
    pub id: u64,
    pub stream: TcpStream,
    /// The responder's process, where the same-host path is open (offered
    /// by the responder, checked to hold the connection's far end).
    pub cma_pid: Option<u32>,
    /// Cleared when the kernel refuses a copy: the path is not used on
    /// this connection again.
    pub cma_live: std::sync::atomic::AtomicBool,
}

impl ReqConn {
    /// The process to copy to and from, while the same-host path is open.
    pub fn cma(&self) -> Option<u32> {
        self.cma_pid
            .filter(|_| self.cma_live.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// A same-host grant the receiver thread took off the stream, for the
/// engine waiting on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmaGrant {
    pub conn: u64,
    pub psn: u32,
    pub nonce: u32,
    pub addr: u64,
}

/// Everything about a QP that changes, under one lock.
#[derive(Debug, Default)]
pub(crate) struct QpCore {
    pub state: QpState,
    pub attr: QpAttr,
    /// Bumped whenever threads working for the previous state must stop.
    pub gen: u64,
    pub destroyed: bool,
    // Responder side.
    pub epsn: u32,
    pub nak_seq_sent: bool,
    pub rq: VecDeque<RecvWr>,
    // Requester side.
    pub sq: VecDeque<ActiveWr>,
    /// PSN the next posted request gets.
    pub next_psn: u32,
    /// Next PSN to transmit (moves back on a retransmission).
    pub send_psn: u32,
    /// Highest PSN transmitted, plus one.
    pub sent_hi: u32,
    /// Oldest PSN not yet acknowledged.
    pub una: u32,
    pub retry_left: u8,
    pub rnr_left: u8,
    pub timer: Option<std::time::Instant>,
    pub rnr_until: Option<std::time::Instant>,
    pub conn: Option<Arc<ReqConn>>,
    /// For DC initiators: where the current connection goes.
    pub dc_target: Option<crate::types::DcAddr>,
    /// Threads now moving bytes between a socket and memory that one of
    /// this QP's work requests names, outside the lock.
    pub busy: u32,
    /// Completions not delivered yet because `busy` was not zero when they
    /// were made (see [`QpInner::deliver`]): delivered, in order, when the
    /// last busy thread lets go.
    pub held: VecDeque<(CqSide, WorkCompletion)>,
    /// The latest same-host grant received.
    pub cma_grant: Option<CmaGrant>,
    /// The nonce of the next same-host request.
    pub cma_nonce: u32,
    /// The engine is copying by the same-host path: the connection must
    /// not close under it (the responder keeps the region registered until
    /// the stream says done, or ends).
    pub cma_copying: bool,
    /// A connection to close once the copy is over.
    pub cma_deferred_close: Option<Arc<ReqConn>>,
}

/// Which of a QP's completion queues a completion goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CqSide {
    Send,
    Recv,
}

/// A QP shared by its handle and the threads working for it.
#[derive(Debug)]
pub(crate) struct QpInner {
    pub dev: Arc<DeviceShared>,
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd_id: u64,
    pub send_cq: Arc<CqInner>,
    pub recv_cq: Arc<CqInner>,
    pub cap: QpCap,
    pub core: Mutex<QpCore>,
    pub wake: Condvar,
}

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

    pub fn lock(&self) -> MutexGuard<'_, QpCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wc(
        &self,
        wr_id: u64,
        status: WcStatus,
        opcode: WcOpcode,
        vendor_err: u32,
    ) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            vendor_err,
            byte_len: 0,
            imm_data: None,
            qp_num: self.qpn,
            src_qp: 0,
        }
    }

    /// Hands a completion to its CQ, unless a thread may still be touching
    /// memory a work request of this QP names.
    ///
    /// The rule hardware keeps, and the one that lets an application reuse
    /// a buffer: once a work request's completion is seen, nothing reads or
    /// writes its memory for it any more. A failed or flushed request's
    /// memory may be in the middle of a `send(2)` or `recv(2)` on another
    /// thread (the QP went to ERR while the engine was sending a segment, or
    /// a READ response was being placed); such a completion, and every one
    /// after it, is held until the last busy thread lets go
    /// ([`QpInner::unbusy`]). A successful completion is delivered at once
    /// when nothing is held: its bytes were acknowledged, and a
    /// retransmission of it still in a socket is a duplicate the responder
    /// discards unread.
    pub fn deliver(&self, g: &mut QpCore, side: CqSide, wc: WorkCompletion) {
        if g.busy > 0 && (wc.status != WcStatus::Success || !g.held.is_empty()) {
            g.held.push_back((side, wc));
            return;
        }
        self.push_now(side, wc);
    }

    fn push_now(&self, side: CqSide, wc: WorkCompletion) {
        match side {
            CqSide::Send => self.send_cq.push(wc),
            CqSide::Recv => self.recv_cq.push(wc),
        }
    }

    /// A thread starts moving bytes for one of this QP's work requests
    /// outside the lock.
    pub fn busy(&self, g: &mut QpCore) {
        g.busy += 1;
    }

    /// The thread that called [`QpInner::busy`] no longer touches the
    /// memory: the last one out delivers what was held.
    pub fn unbusy(&self, g: &mut QpCore) {
        g.busy = g.busy.saturating_sub(1);
        if g.busy == 0 {
            while let Some((side, wc)) = g.held.pop_front() {
                self.push_now(side, wc);
            }
            self.wake.notify_all();
        }
    }

    /// Completes the request at the head of the send queue.
    pub fn complete_head(&self, g: &mut QpCore, status: WcStatus, vendor_err: u32) {
        if let Some(a) = g.sq.pop_front() {
            if status != WcStatus::Success || a.wr.signaled {
                let mut wc = self.wc(a.wr.wr_id, status, a.wr.op.wc_opcode(), vendor_err);
                if status == WcStatus::Success {
                    wc.byte_len = a.len as u32;
                }
                self.deliver(g, CqSide::Send, wc);
            }
        }
    }

    /// Completes a receive.
    #[allow(clippy::too_many_arguments)]
    pub fn complete_recv(
        &self,
        g: &mut QpCore,
        wr_id: u64,
        status: WcStatus,
        wc_op: WcOpcode,
        len: u64,
        imm: Option<u32>,
        src_qp: u32,
    ) {
        let mut wc = self.wc(wr_id, status, wc_op, 0);
        wc.byte_len = len as u32;
        wc.imm_data = imm;
        wc.src_qp = src_qp;
        self.deliver(g, CqSide::Recv, wc);
    }

    /// Moves to ERR: every outstanding request and receive completes with
    /// WR_FLUSH_ERR, and the threads of the old state stop.
    pub fn enter_error(&self, g: &mut QpCore) {
        if g.state == QpState::Err {
            return;
        }
        tracing::debug!(qpn = format_args!("{:#x}", self.qpn), from = ?g.state, "soft QP to ERR");
        g.state = QpState::Err;
        g.attr.qp_state = QpState::Err;
        self.stop_threads(g);
        while !g.sq.is_empty() {
            self.complete_head(g, WcStatus::WrFlushErr, vendor_err::FLUSHED);
        }
        while let Some(r) = g.rq.pop_front() {
            self.complete_recv(g, r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, None, 0);
        }
    }

    /// Fails the request at the head with `status` (its predecessors were
    /// completed by the caller), then moves to ERR.
    pub fn fail_head(&self, g: &mut QpCore, status: WcStatus, vendor_err: u32) {
        self.complete_head(g, status, vendor_err);
        self.enter_error(g);
    }

    fn stop_threads(&self, g: &mut QpCore) {
        g.gen += 1;
        g.timer = None;
        g.rnr_until = None;
        if let Some(c) = g.conn.take() {
            if g.cma_copying {
                g.cma_deferred_close = Some(c);
            } else {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
        }
        self.wake.notify_all();
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
        drop(g);
        self.wake.notify_all();
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
