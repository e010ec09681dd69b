//! [`VerbsCq`]: a completion queue, polled through the context's ops
//! table, with its completion channel when there is one.

use super::abi::{ibv_comp_channel, ibv_cq, ibv_wc};
use super::convert;
use super::inner::DeviceInner;
use super::os::check;
use crate::error::{FabricError, Result};
use crate::seam::CqOps;
use crate::types::WorkCompletion;
use std::any::Any;
use std::ffi::{c_int, c_void};
use std::fmt;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// Completions moved per `poll_cq` call.
pub(super) const POLL_BATCH: usize = 16;

/// A completion queue, destroyed on drop.
pub struct VerbsCq {
    pub(super) cq: NonNull<ibv_cq>,
    pub(super) poll: Option<super::abi::PollCqFn>,
    /// Its own completion channel, destroyed after it.
    pub(super) channel: Option<NonNull<ibv_comp_channel>>,
    pub(super) req_notify: Option<super::abi::ReqNotifyCqFn>,
    pub(super) capacity: usize,
    pub(super) dev: Arc<DeviceInner>,
}

// SAFETY: the provider's poll_cq locks the CQ (libibverbs CQs are thread
// safe unless created single-threaded, which these are not).
unsafe impl Send for VerbsCq {}
// SAFETY: as above.
unsafe impl Sync for VerbsCq {}

impl fmt::Debug for VerbsCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsCq")
            .field("device", &self.dev.name)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Drop for VerbsCq {
    fn drop(&mut self) {
        // SAFETY: the CQ was created by this provider and is destroyed once;
        // the QPs using it hold an Arc of it, so none is left.
        let rc = unsafe { (self.dev.lib.destroy_cq)(self.cq.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.dev.name, rc, "ibv_destroy_cq failed");
        }
        if let (Some(ch), Some(fns)) = (self.channel, self.dev.lib.comp_channel) {
            // SAFETY: the channel was made for this CQ alone, which is gone
            // (every event it got was acknowledged in `take_events`, so
            // ibv_destroy_cq did not wait).
            let rc = unsafe { (fns.destroy)(ch.as_ptr()) };
            if rc != 0 {
                tracing::warn!(device = %self.dev.name, rc, "ibv_destroy_comp_channel failed");
            }
        }
    }
}

impl CqOps for VerbsCq {
    fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize> {
        let Some(poll) = self.poll else {
            return Ok(0);
        };
        let mut buf = [ibv_wc::default(); POLL_BATCH];
        let mut total = 0;
        while total < max {
            let want = (max - total).min(POLL_BATCH);
            // SAFETY: the CQ is live; `buf` has room for `want` (at most
            // POLL_BATCH) completions. This is the header's inline
            // ibv_poll_cq: cq->context->ops.poll_cq(cq, n, wc).
            let n = unsafe { poll(self.cq.as_ptr(), want as c_int, buf.as_mut_ptr()) };
            if n < 0 {
                if total > 0 {
                    // Hand over what was polled; the error repeats next time.
                    break;
                }
                return Err(FabricError::Os {
                    verb: "ibv_poll_cq",
                    source: io::Error::other(format!("the provider's poll_cq returned {n}")),
                });
            }
            let n = usize::try_from(n).unwrap_or(0).min(want);
            out.extend(buf[..n].iter().map(convert::wc_from_raw));
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        // SAFETY: the channel lives as long as this CQ.
        self.channel.map(|ch| unsafe { (*ch.as_ptr()).fd })
    }

    fn arm(&self) -> Result<()> {
        let (Some(_), Some(notify)) = (self.channel, self.req_notify) else {
            return Ok(());
        };
        // SAFETY: the CQ is live; this is the header's inline
        // ibv_req_notify_cq: cq->context->ops.req_notify_cq(cq, 0).
        let rc = unsafe { notify(self.cq.as_ptr(), 0) };
        check("ibv_req_notify_cq", rc)
    }

    fn take_events(&self) -> Result<u32> {
        let (Some(ch), Some(fns)) = (self.channel, self.dev.lib.comp_channel) else {
            return Ok(0);
        };
        let mut n: u32 = 0;
        loop {
            let mut cq: *mut ibv_cq = ptr::null_mut();
            let mut ctx: *mut c_void = ptr::null_mut();
            // SAFETY: the channel is live and nonblocking; the out pointers
            // are live locals.
            let rc = unsafe { (fns.get_event)(ch.as_ptr(), &mut cq, &mut ctx) };
            if rc != 0 {
                break;
            }
            n = n.saturating_add(1);
        }
        if n > 0 {
            // SAFETY: acknowledges exactly the events just taken for this CQ
            // (its channel serves no other).
            unsafe { (fns.ack)(self.cq.as_ptr(), n) };
        }
        Ok(n)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
