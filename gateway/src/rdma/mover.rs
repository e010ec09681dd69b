//! Posting one-sided RDMA between the staging pool and a client buffer, and
//! waiting for the server's own completions, in order, with several work
//! requests in flight.

use super::pairs::Pair;
use super::staging::Staging;
use hipobj_fabric::{
    CompletionQueue, DcAddr, QueuePair, RemoteAddr, SendOp, SendWr, WcStatus, WorkCompletion,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How long one work request may take before the transfer is failed.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(120);

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

/// Which QP moves the bytes.
#[derive(Debug)]
pub enum Path {
    /// A connected RC pair (held for the whole transfer).
    Rc(Arc<Pair>),
    /// A DC initiator made for this transfer, towards a client DC target.
    Dc {
        /// The initiator.
        qp: QueuePair,
        /// Its CQ.
        cq: CompletionQueue,
        /// The target.
        to: DcAddr,
    },
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
    /// No completion came in time.
    #[error("RDMA {0} did not complete within {COMPLETION_TIMEOUT:?}")]
    Timeout(&'static str),
    /// Posting failed.
    #[error("posting RDMA {op} failed: {source}")]
    Post {
        /// WRITE or READ.
        op: &'static str,
        /// Why.
        source: hipobj_fabric::FabricError,
    },
}

/// The completion, if it is there already: a chunk's WRITE or READ often
/// completes while the next chunk is filled, and then no blocking thread is
/// needed to wait for it. (Polling longer, yielding, was tried: on a 2-core
/// host the spinning task takes the core the software provider's threads
/// need, and 4 KiB GETs got slower.)
fn poll_now(cq: &CompletionQueue) -> hipobj_fabric::Result<Option<WorkCompletion>> {
    let mut out = Vec::with_capacity(1);
    if cq.poll(&mut out, 1)? == 1 {
        return Ok(out.pop());
    }
    Ok(None)
}

/// Work requests in flight and their staging buffers.
#[derive(Debug)]
pub struct Mover {
    path: Path,
    remote: RemoteBuffer,
    inflight: VecDeque<(Staging, usize)>,
    next_id: u64,
}

impl Mover {
    /// Moves bytes to or from `remote` over `path`.
    pub fn new(path: Path, remote: RemoteBuffer) -> Mover {
        Mover {
            path,
            remote,
            inflight: VecDeque::new(),
            next_id: 0,
        }
    }

    /// Work requests in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    fn qp_cq(&self) -> (&QueuePair, &CompletionQueue, Option<DcAddr>) {
        match &self.path {
            Path::Rc(p) => (&p.qp, &p.cq, None),
            Path::Dc { qp, cq, to } => (qp, cq, Some(*to)),
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
        let at = RemoteAddr {
            addr: self.remote.addr.wrapping_add(offset),
            rkey: self.remote.rkey,
        };
        let sge = staging.sge(len).map_err(|source| MoveError::Post {
            op: op_name,
            source,
        })?;
        let (qp, _, dc) = self.qp_cq();
        let wr = SendWr {
            wr_id: self.next_id,
            op: if write {
                SendOp::RdmaWrite(at)
            } else {
                SendOp::RdmaRead(at)
            },
            sg_list: vec![sge],
            signaled: true,
            dc,
        };
        qp.post_send(&wr).map_err(|source| MoveError::Post {
            op: op_name,
            source,
        })?;
        self.next_id += 1;
        self.inflight.push_back((staging, len));
        Ok(())
    }

    /// Waits for the oldest work request; returns its staging buffer and length.
    pub async fn complete_oldest(
        &mut self,
        write: bool,
    ) -> Result<Option<(Staging, usize)>, MoveError> {
        let op_name = if write { "WRITE" } else { "READ" };
        let Some(front) = self.inflight.pop_front() else {
            return Ok(None);
        };
        let (_, cq, _) = self.qp_cq();
        let cq = cq.clone();
        let wc = match poll_now(&cq) {
            Ok(Some(wc)) => Some(wc),
            Ok(None) => tokio::task::spawn_blocking(move || cq.wait_one(COMPLETION_TIMEOUT))
                .await
                .ok()
                .and_then(|r| r.ok())
                .flatten(),
            Err(_) => None,
        };
        match wc {
            Some(wc) if wc.status == WcStatus::Success => {
                crate::metrics::rdma_bytes(write, front.1);
                Ok(Some(front))
            }
            Some(wc) => {
                crate::metrics::completion_error(write, format!("{:?}", wc.status));
                Err(MoveError::Completion {
                    op: op_name,
                    status: wc.status,
                })
            }
            None => {
                crate::metrics::completion_error(write, "Timeout".to_string());
                Err(MoveError::Timeout(op_name))
            }
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
