//! The software completion queue.

use crate::error::{FabricError, Result};
use crate::seam::CqOps;
use crate::types::WorkCompletion;
use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Debug)]
struct CqState {
    items: VecDeque<WorkCompletion>,
    overrun: bool,
}

/// A bounded queue of completions. Like hardware, a full CQ does not grow:
/// a completion that does not fit marks the CQ overrun, and every later poll
/// fails.
#[derive(Debug)]
pub(crate) struct CqInner {
    state: Mutex<CqState>,
    ready: Condvar,
    capacity: usize,
}

impl CqInner {
    pub fn new(capacity: usize) -> CqInner {
        CqInner {
            state: Mutex::new(CqState {
                items: VecDeque::new(),
                overrun: false,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    /// Adds a completion.
    pub fn push(&self, wc: WorkCompletion) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.items.len() >= self.capacity {
            if !s.overrun {
                tracing::warn!(capacity = self.capacity, "soft CQ overrun");
            }
            s.overrun = true;
        } else {
            s.items.push_back(wc);
        }
        drop(s);
        self.ready.notify_all();
    }
}

/// The provider object behind a [`CompletionQueue`](crate::CompletionQueue).
#[derive(Debug)]
pub(crate) struct SoftCq {
    pub inner: Arc<CqInner>,
}

impl CqOps for SoftCq {
    fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize> {
        let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.overrun {
            return Err(FabricError::CqOverrun {
                capacity: self.inner.capacity,
            });
        }
        let n = max.min(s.items.len());
        out.extend(s.items.drain(..n));
        Ok(n)
    }

    fn wait(&self, timeout: Duration) -> bool {
        let s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = self
            .inner
            .ready
            .wait_timeout_while(s, timeout, |s| s.items.is_empty() && !s.overrun)
            .unwrap_or_else(|e| e.into_inner());
        !s.items.is_empty() || s.overrun
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
