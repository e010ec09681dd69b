//! Posting one-sided RDMA between the staging pool and a client buffer, and
//! waiting for the server's own completions, in order, with several work
//! requests in flight.

use super::completions::AsyncCq;
use super::dci::DciLease;
use super::mapped::MappedSource;
use super::pairs::Pair;
use super::staging::{PoolError, Share, Staging, StagingPool};
use hipobj_fabric::rc;
use hipobj_fabric::{DcAddr, QueuePair, RemoteAddr, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How long the flush of a QP moved to ERR may take before its staging
/// buffers are given up for good (quarantined, never reused).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// The client's buffer, as its token names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBuffer {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
}

/// Which QP moves the bytes: the gateway initiates every RDMA READ and WRITE.
#[derive(Debug)]
pub enum Initiator {
    /// A connected RC pair (held for the whole transfer).
    Rc(Arc<Pair>),
    /// A DC initiator leased from the pool, towards a client DC target.
    Dc {
        /// The initiator and its CQ.
        lease: Box<DciLease>,
        /// The target.
        to: DcAddr,
    },
}

impl Initiator {
    /// The QP that moves the bytes.
    fn qp(&self) -> &QueuePair {
        match self {
            Initiator::Rc(p) => &p.qp,
            Initiator::Dc { lease, .. } => lease.qp(),
        }
    }

    /// Its completion queue.
    fn cq(&self) -> &AsyncCq {
        match self {
            Initiator::Rc(p) => &p.cq,
            Initiator::Dc { lease, .. } => lease.cq(),
        }
    }

    /// The DC target work requests name (none on RC).
    fn dc(&self) -> Option<DcAddr> {
        match self {
            Initiator::Rc(_) => None,
            Initiator::Dc { to, .. } => Some(*to),
        }
    }
}

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// A work request completed with an error.
    #[error("RDMA {op} completed with {status}")]
    Completion {
        /// WRITE or READ.
        op: &'static str,
        /// The status.
        status: WcStatus,
    },
    /// No completion came within the progress deadline.
    #[error("RDMA {op} made no progress within {after:?}")]
    Timeout {
        /// WRITE or READ.
        op: &'static str,
        /// The progress deadline.
        after: Duration,
    },
    /// The transfer had already failed; nothing more is posted.
    #[error("RDMA {0} not posted: the transfer already failed")]
    Aborted(&'static str),
    /// Posting failed.
    #[error("posting RDMA {op} failed: {source}")]
    Post {
        /// WRITE or READ.
        op: &'static str,
        /// Why.
        source: hipobj_fabric::FabricError,
    },
}

/// Why [`Mover::staging`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// The pool stayed empty.
    #[error(transparent)]
    Pool(PoolError),
    /// Retiring a work request failed.
    #[error(transparent)]
    Move(MoveError),
}

/// Work requests in flight and their staging buffers.
///
/// The rule it keeps, on every provider: memory a posted work request names
/// is never reused until that request has completed, successfully or
/// flushed. A staging buffer leaves `inflight` only with its request's
/// completion. When a transfer fails (a completion error, no progress
/// within the deadline, a failed post, or the mover dropped half-way), the
/// QP is moved to ERR first, which makes the provider flush every request
/// still queued, and the buffers go back to the pool only as their flush
/// completions arrive. A buffer whose flush never comes is never reused.
#[derive(Debug)]
pub struct Mover {
    initiator: Option<Initiator>,
    remote: RemoteBuffer,
    inflight: VecDeque<(Held, usize)>,
    next_id: u64,
    progress: Duration,
    failed: bool,
    /// The device the initiator is on, for metrics.
    device: String,
    /// The WRITE that ends at this offset carries this immediate
    /// (hipobj-rc-v2: the last piece is WRITE_WITH_IMM with the cookie).
    imm_at: Option<(u64, u32)>,
}

impl Mover {
    /// A buffer for a transfer whose completed work needs nothing more (the
    /// WRITEs of a GET): if none is free, the oldest work request is retired
    /// first (which frees one) rather than waiting on the pool while holding
    /// buffers, so transfers sharing the pool cannot wait for each other in
    /// a circle. A READ's completed buffer holds data: PUT must deliver it,
    /// not use this.
    pub async fn staging(
        &mut self,
        pool: &StagingPool,
        share: &Share,
        write: bool,
        wait: Duration,
    ) -> Result<Staging, AcquireError> {
        loop {
            if let Some(s) = pool.try_acquire(share) {
                return Ok(s);
            }
            if self.inflight() == 0 {
                return pool.acquire(share, wait).await.map_err(AcquireError::Pool);
            }
            self.complete_oldest(write)
                .await
                .map_err(AcquireError::Move)?;
        }
    }

    /// Moves bytes to or from `remote` over `initiator`, a QP of `device`;
    /// a transfer whose oldest work request does not complete within
    /// `progress` is failed.
    pub fn new(
        initiator: Initiator,
        remote: RemoteBuffer,
        progress: Duration,
        device: &str,
    ) -> Mover {
        Mover {
            initiator: Some(initiator),
            remote,
            inflight: VecDeque::new(),
            next_id: 0,
            progress,
            failed: false,
            device: device.to_string(),
            imm_at: None,
        }
    }

    /// The WRITE that ends at `end` (the last piece) carries `imm`
    /// (WRITE_WITH_IMM, which consumes a receive at the client).
    pub fn imm_at_end(&mut self, end: u64, imm: u32) {
        self.imm_at = Some((end, imm));
    }

    /// Work requests in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    fn qp_cq(&self) -> (&QueuePair, &AsyncCq, Option<DcAddr>) {
        match self.initiator.as_ref() {
            Some(p) => (p.qp(), p.cq(), p.dc()),
            None => unreachable!("the initiator lives until drop"),
        }
    }

    /// Posts a WRITE (`write`) or READ of `len` bytes between `staging` and
    /// the client buffer at `offset`. The caller checked the range.
    pub fn post(
        &mut self,
        write: bool,
        staging: Staging,
        len: usize,
        offset: u64,
    ) -> Result<(), MoveError> {
        let op_name = if write { "WRITE" } else { "READ" };
        let sge = staging.sge(len).map_err(|source| MoveError::Post {
            op: op_name,
            source,
        })?;
        self.post_held(write, Held::Staging(staging), sge, len, offset)
    }

    /// Posts a WRITE of `len` bytes at `at` of a mapped file range to the
    /// client buffer at `offset`; the mapping is held until the WRITE
    /// completes or is flushed.
    pub fn post_mapped(
        &mut self,
        src: &Arc<MappedSource>,
        at: u64,
        len: usize,
        offset: u64,
    ) -> Result<(), MoveError> {
        let sge = src.sge(at, len).map_err(|source| MoveError::Post {
            op: "WRITE",
            source,
        })?;
        self.post_held(true, Held::Mapped(src.clone()), sge, len, offset)
    }

    fn post_held(
        &mut self,
        write: bool,
        held: Held,
        sge: Sge,
        len: usize,
        offset: u64,
    ) -> Result<(), MoveError> {
        let op_name = if write { "WRITE" } else { "READ" };
        if self.failed {
            return Err(MoveError::Aborted(op_name));
        }
        let at = RemoteAddr {
            addr: self.remote.addr.wrapping_add(offset),
            rkey: self.remote.rkey,
        };
        let (qp, _, dc) = self.qp_cq();
        let wr = SendWr {
            wr_id: self.next_id,
            op: match self.imm_at {
                Some((end, imm)) if write && offset.checked_add(len as u64) == Some(end) => {
                    SendOp::RdmaWriteWithImm(at, imm)
                }
                _ if write => SendOp::RdmaWrite(at),
                _ => SendOp::RdmaRead(at),
            },
            sg_list: vec![sge],
            signaled: true,
            dc,
        };
        if let Err(source) = qp.post_send(&wr) {
            // Nothing was queued for this memory; the ones before it are.
            drop(held);
            let e = MoveError::Post {
                op: op_name,
                source,
            };
            // The caller drains: the flushes of the others free them.
            self.abort(write, &e);
            return Err(e);
        }
        self.next_id += 1;
        self.inflight.push_back((held, len));
        Ok(())
    }

    /// Waits for the oldest work request; returns its staging buffer and
    /// length. On failure the transfer is aborted (see [`Mover`]) before
    /// the error is returned.
    pub async fn complete_oldest(
        &mut self,
        write: bool,
    ) -> Result<Option<(Held, usize)>, MoveError> {
        let op_name = if write { "WRITE" } else { "READ" };
        if self.inflight.is_empty() {
            return Ok(None);
        }
        let wc = self.next_completion(self.progress).await;
        match wc {
            Some(wc) if wc.status == WcStatus::Success => {
                let front = self.inflight.pop_front();
                if let Some((_, n)) = &front {
                    crate::metrics::rdma_bytes(&self.device, write, *n);
                }
                Ok(front)
            }
            Some(wc) => {
                // The request's own completion: its buffer is free again.
                self.inflight.pop_front();
                crate::metrics::completion_error(&self.device, write, format!("{:?}", wc.status));
                let e = MoveError::Completion {
                    op: op_name,
                    status: wc.status,
                };
                self.abort_and_drain(write, &e).await;
                Err(e)
            }
            None => {
                crate::metrics::completion_error(&self.device, write, "Timeout".to_string());
                let e = MoveError::Timeout {
                    op: op_name,
                    after: self.progress,
                };
                self.abort_and_drain(write, &e).await;
                Err(e)
            }
        }
    }

    /// The next completion on the initiator's CQ within `limit`, awaited on
    /// the CQ's completion channel (no thread held while waiting).
    async fn next_completion(&self, limit: Duration) -> Option<WorkCompletion> {
        let (_, cq, _) = self.qp_cq();
        cq.next(limit).await.ok().flatten()
    }

    /// Moves the QP to ERR, so that the provider flushes what is queued.
    fn abort(&mut self, write: bool, why: &MoveError) {
        if !self.failed {
            self.failed = true;
            tracing::info!(error = %why, inflight = self.inflight.len(), write, "RDMA transfer aborted: QP to ERR, waiting for the flush");
            let (qp, _, _) = self.qp_cq();
            if let Err(e) = rc::to_error(qp) {
                tracing::warn!(error = %e, "moving the QP to ERR failed");
            }
        }
    }

    /// After [`Mover::abort`]: takes the flush completion of every request
    /// still queued, freeing its buffer as it comes. Buffers whose flush
    /// does not come within [`FLUSH_TIMEOUT`] are quarantined.
    async fn abort_and_drain(&mut self, write: bool, why: &MoveError) {
        self.abort(write, why);
        while !self.inflight.is_empty() {
            match self.next_completion(FLUSH_TIMEOUT).await {
                Some(_) => {
                    self.inflight.pop_front();
                }
                None => {
                    self.quarantine();
                    return;
                }
            }
        }
    }

    /// Buffers whose requests never completed: never back in the pool.
    fn quarantine(&mut self) {
        let n = self.inflight.len();
        tracing::error!(
            buffers = n,
            "RDMA work requests were not flushed in time; their staging buffers are withdrawn from the pool"
        );
        crate::metrics::staging_quarantined(&self.device, n);
        for (s, _) in self.inflight.drain(..) {
            s.quarantine();
        }
    }

    /// Waits for everything in flight (after an error: to know the client
    /// buffer is no longer being touched before answering).
    pub async fn drain(&mut self, write: bool) -> Result<(), MoveError> {
        let mut first = Ok(());
        while !self.inflight.is_empty() {
            if let Err(e) = self.complete_oldest(write).await {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for Mover {
    /// Dropped with work requests in flight (its task was cancelled, or a
    /// caller returned early): the QP goes to ERR, and a thread of its own
    /// waits for the flush before the buffers return to the pool.
    fn drop(&mut self) {
        if self.inflight.is_empty() {
            return;
        }
        let Some(initiator) = self.initiator.take() else {
            return;
        };
        let inflight = std::mem::take(&mut self.inflight);
        let _ = rc::to_error(initiator.qp());
        let mut pending = Pending(inflight, std::mem::take(&mut self.device));
        // On the event loop where there is one (the usual case: a request's
        // task was cancelled), else on a thread of its own.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let cq = initiator.cq();
                while !pending.0.is_empty() {
                    match cq.next(FLUSH_TIMEOUT).await {
                        Ok(Some(_)) => {
                            pending.0.pop_front();
                        }
                        // Dropping `pending` quarantines what is left.
                        _ => break,
                    }
                }
                drop(pending);
                drop(initiator);
            });
            return;
        }
        let reaper = std::thread::Builder::new()
            .name("rdma-flush".into())
            .spawn(move || {
                let cq = initiator.cq().cq().clone();
                while !pending.0.is_empty() {
                    match cq.wait_one(FLUSH_TIMEOUT) {
                        Ok(Some(_)) => {
                            pending.0.pop_front();
                        }
                        // Dropping `pending` quarantines what is left.
                        _ => break,
                    }
                }
                drop(pending);
                drop(initiator);
            });
        if let Err(e) = reaper {
            // No thread: the closure, and with it `pending`, was dropped,
            // which withdrew the buffers: never reused rather than reused early.
            tracing::error!(error = %e, "no thread to wait for a flush; staging buffers withdrawn");
        }
    }
}

/// The memory a posted work request names, held until it completes or is
/// flushed: a staging buffer, or a mapped file range (a GET's source).
#[derive(Debug)]
pub enum Held {
    /// A staging buffer (back to the pool on drop).
    Staging(Staging),
    /// A share of a mapped file range (unmapped when the last goes).
    Mapped(Arc<MappedSource>),
}

impl Held {
    /// The staging buffer, if it is one (a READ's always is).
    pub fn into_staging(self) -> Option<Staging> {
        match self {
            Held::Staging(s) => Some(s),
            Held::Mapped(_) => None,
        }
    }

    /// Never reused or released: a work request may still name it.
    fn quarantine(self) {
        match self {
            Held::Staging(s) => s.quarantine(),
            Held::Mapped(m) => m.leak(),
        }
    }
}

/// Buffers of work requests not completed yet, held by the flush thread:
/// whatever is still here when it drops is quarantined, never returned.
struct Pending(VecDeque<(Held, usize)>, String);

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        tracing::error!(
            buffers = self.0.len(),
            "RDMA work requests were not flushed in time; their staging buffers are withdrawn from the pool"
        );
        crate::metrics::staging_quarantined(&self.1, self.0.len());
        for (s, _) in self.0.drain(..) {
            s.quarantine();
        }
    }
}
