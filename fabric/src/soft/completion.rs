//! How a soft QP's work requests complete: the rule that holds a
//! completion while its memory may still be touched, completing the head of
//! the send queue or a receive, and moving to ERR (which flushes the rest).
//! Used by the requester, the responder and the QP's verbs alike.

use super::shared::{CqSide, QpCore, QpInner};
use crate::types::{QpState, WcOpcode, WcStatus, WorkCompletion};
use std::net::Shutdown;

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

impl QpInner {
    pub fn wc(
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
            // Only a destroy waits for the count to reach zero (the engine
            // does not: waking it here would cost a switch per packet).
            if g.destroyed {
                self.wake.notify_all();
            }
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

    pub fn stop_threads(&self, g: &mut QpCore) {
        g.gen += 1;
        g.timer = None;
        g.rnr_until = None;
        // A transmitter of the old generation may still be in send(2) on
        // the old connection (shut down below); it no longer speaks for
        // the QP, and one of a new generation uses a new connection.
        g.tx_active = false;
        g.engine_idle = false;
        if let Some(c) = g.conn.take() {
            if g.cma_copying {
                g.cma_deferred_close = Some(c);
            } else {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
        }
        self.wake.notify_all();
    }
}
