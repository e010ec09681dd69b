//! Awaiting a CQ's completions on the event loop, without a thread.
//!
//! A CQ whose provider has a completion channel (libibverbs'
//! `ibv_comp_channel`, the software provider's eventfd) is registered with
//! tokio's reactor through [`AsyncFd`]; a transfer that waits for a
//! completion arms the CQ and sleeps on the descriptor, and wakes as soon as
//! the provider signals it. No thread is held while waiting, so the
//! gateway's thread count does not grow with the transfers in flight. A CQ
//! without a channel (or made outside a runtime) is waited on by a blocking
//! thread, as before.

use hipobj_fabric::{CompletionQueue, WorkCompletion};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// The channel's descriptor, owned by the CQ (not closed here).
#[derive(Debug)]
struct ChannelFd(RawFd);

impl AsRawFd for ChannelFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A completion queue and, where it has one, its channel registered with
/// the reactor.
#[derive(Debug)]
pub struct AsyncCq {
    // Declared first so that it is dropped first: deregistered from the
    // reactor while `cq` still holds the descriptor open.
    channel: Option<AsyncFd<ChannelFd>>,
    cq: CompletionQueue,
}

impl AsyncCq {
    /// Registers `cq`'s channel with the current runtime's reactor, if
    /// there are both.
    pub fn new(cq: CompletionQueue) -> AsyncCq {
        let channel = match (cq.event_fd(), tokio::runtime::Handle::try_current()) {
            (Some(fd), Ok(handle)) => {
                let _in = handle.enter();
                // SAFETY: `fd` is the CQ's channel descriptor, which the
                // provider keeps open, unchanged, for as long as the CQ
                // lives (`CompletionQueue::event_fd`). This `AsyncCq` holds
                // a clone of the CQ in `cq`, declared after `channel`, so
                // the registration is dropped (deregistered) before that
                // clone, and so before the descriptor can close. `ChannelFd`
                // always returns the same descriptor.
                let registered = unsafe {
                    AsyncFd::register_with_interest(ChannelFd(fd), tokio::io::Interest::READABLE)
                };
                match registered {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::debug!(error = %e, "CQ channel not registered; its waiters use a thread");
                        None
                    }
                }
            }
            _ => None,
        };
        AsyncCq { channel, cq }
    }

    /// The queue itself (for polling, and for blocking waits off the
    /// event loop).
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// The next completion, waiting at most `limit`; `None` when none came.
    pub async fn next(&self, limit: Duration) -> hipobj_fabric::Result<Option<WorkCompletion>> {
        let mut out = Vec::with_capacity(1);
        if self.cq.poll(&mut out, 1)? == 1 {
            return Ok(out.pop());
        }
        let Some(channel) = &self.channel else {
            let cq = self.cq.clone();
            return tokio::task::spawn_blocking(move || cq.wait_one(limit))
                .await
                .unwrap_or(Ok(None));
        };
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            self.cq.arm()?;
            // A completion that came before the arming raised no event.
            if self.cq.poll(&mut out, 1)? == 1 {
                return Ok(out.pop());
            }
            let mut ready = match tokio::time::timeout_at(deadline, channel.readable()).await {
                Err(_) => return Ok(None),
                Ok(Err(e)) => {
                    return Err(hipobj_fabric::FabricError::Os {
                        verb: "waiting on the completion channel",
                        source: e,
                    })
                }
                Ok(Ok(guard)) => guard,
            };
            self.cq.take_events()?;
            ready.clear_ready();
            if self.cq.poll(&mut out, 1)? == 1 {
                return Ok(out.pop());
            }
        }
    }
}
