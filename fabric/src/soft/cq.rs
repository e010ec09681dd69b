//! The software completion queue.

use crate::error::{FabricError, Result};
use crate::seam::CqOps;
use crate::types::WorkCompletion;
use std::any::Any;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
    /// The completion channel: an eventfd, made on first use (a CQ nobody
    /// waits on asynchronously costs no descriptor).
    events: OnceLock<io::Result<OwnedFd>>,
    /// Set by `arm`, taken by the next completion, which then signals the
    /// eventfd once (`ibv_req_notify_cq` semantics).
    armed: AtomicBool,
    /// Whether a completion (or the overrun) waits: set and cleared under
    /// `state`'s lock, read without it by a spinning waiter.
    pending: AtomicBool,
    /// How long a waiter polls before it sleeps (`SoftConfig::cq_spin`;
    /// zero on a machine with one CPU).
    spin: Duration,
}

/// Whether this machine has more than one CPU to run on (a waiter that
/// polls on the only one just keeps the completer from running).
fn several_cpus() -> bool {
    static SEVERAL: OnceLock<bool> = OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// A nonblocking, close-on-exec eventfd.
fn new_eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative return is a new
    // descriptor this process owns and nothing else closes.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl CqInner {
    /// A CQ of `capacity` completions whose waiters poll for `spin`
    /// before they sleep.
    pub fn new(capacity: usize, spin: Duration) -> CqInner {
        CqInner {
            state: Mutex::new(CqState {
                items: VecDeque::new(),
                overrun: false,
            }),
            ready: Condvar::new(),
            capacity,
            events: OnceLock::new(),
            armed: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            spin: if several_cpus() { spin } else { Duration::ZERO },
        }
    }

    fn eventfd(&self) -> Result<RawFd> {
        match self.events.get_or_init(new_eventfd) {
            Ok(fd) => Ok(fd.as_raw_fd()),
            Err(e) => Err(FabricError::Os {
                verb: "eventfd (soft completion channel)",
                source: io::Error::new(e.kind(), e.to_string()),
            }),
        }
    }

    /// Signals the channel if it was armed.
    fn signal(&self) {
        if !self.armed.swap(false, Ordering::AcqRel) {
            return;
        }
        if let Some(Ok(fd)) = self.events.get() {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd this CQ
            // owns. A full counter (EAGAIN, after 2^64-2 unread events)
            // still leaves the descriptor readable, which is all a waiter needs.
            let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
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
        self.pending.store(true, Ordering::Release);
        drop(s);
        self.ready.notify_all();
        self.signal();
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
        self.inner
            .pending
            .store(!s.items.is_empty(), Ordering::Release);
        Ok(n)
    }

    fn wait(&self, timeout: Duration) -> bool {
        // Poll first, giving the CPU to whatever else is runnable between
        // polls (the thread that will push the completion, often): the
        // waiter stays runnable, so its CPU does not go idle and need a
        // wake-up, and a completion that comes meanwhile is seen at once.
        let spin = self.inner.spin.min(timeout);
        if !spin.is_zero() {
            let start = Instant::now();
            loop {
                if self.inner.pending.load(Ordering::Acquire) {
                    return true;
                }
                if start.elapsed() >= spin {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let timeout = timeout.saturating_sub(spin);
        let s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = self
            .inner
            .ready
            .wait_timeout_while(s, timeout, |s| s.items.is_empty() && !s.overrun)
            .unwrap_or_else(|e| e.into_inner());
        !s.items.is_empty() || s.overrun
    }

    fn event_fd(&self) -> Option<RawFd> {
        self.inner.eventfd().ok()
    }

    fn arm(&self) -> Result<()> {
        self.inner.eventfd()?;
        self.inner.armed.store(true, Ordering::Release);
        // A completion already queued (or an overrun) would not signal:
        // signal it now, as hardware raises an event for an armed CQ that
        // is not empty.
        let pending = {
            let s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            !s.items.is_empty() || s.overrun
        };
        if pending {
            self.inner.signal();
        }
        Ok(())
    }

    fn arm_next(&self) -> Result<()> {
        self.inner.eventfd()?;
        self.inner.armed.store(true, Ordering::Release);
        Ok(())
    }

    fn take_events(&self) -> Result<u32> {
        let fd = self.inner.eventfd()?;
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from the CQ's own eventfd.
        let n = unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
        if n == 8 {
            return Ok(u32::try_from(count).unwrap_or(u32::MAX));
        }
        let e = io::Error::last_os_error();
        if n < 0 && e.kind() == io::ErrorKind::WouldBlock {
            return Ok(0);
        }
        Err(FabricError::Os {
            verb: "read (soft completion channel)",
            source: e,
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Recovers the software CQ behind a seam CQ.
pub(crate) fn soft_cq(cq: &Arc<dyn CqOps>, verb: &'static str) -> Result<Arc<CqInner>> {
    cq.as_any()
        .downcast_ref::<SoftCq>()
        .map(|c| c.inner.clone())
        .ok_or_else(|| FabricError::invalid(verb, "the CQ belongs to another provider"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{WcOpcode, WcStatus};

    fn wc(id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id: id,
            status: WcStatus::Success,
            opcode: WcOpcode::RdmaWrite,
            vendor_err: 0,
            byte_len: 0,
            imm_data: None,
            qp_num: 1,
            src_qp: 0,
        }
    }

    /// Whether the descriptor is readable now.
    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 1 && p.revents & libc::POLLIN != 0
    }

    #[test]
    fn an_armed_cq_signals_its_eventfd_once_per_arming() {
        let cq = SoftCq {
            inner: Arc::new(CqInner::new(8, Duration::ZERO)),
        };
        let fd = cq.event_fd().unwrap();
        cq.inner.push(wc(1));
        assert!(!readable(fd), "not armed: no event");
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 8).unwrap(), 1);

        cq.arm().unwrap();
        assert!(!readable(fd));
        cq.inner.push(wc(2));
        cq.inner.push(wc(3));
        assert!(readable(fd));
        assert_eq!(cq.take_events().unwrap(), 1);
        assert!(!readable(fd));
        assert_eq!(cq.take_events().unwrap(), 0);
        assert_eq!(cq.poll(&mut out, 8).unwrap(), 2);
    }

    #[test]
    fn arming_for_the_next_completion_ignores_those_queued() {
        let cq = SoftCq {
            inner: Arc::new(CqInner::new(8, Duration::ZERO)),
        };
        let fd = cq.event_fd().unwrap();
        cq.inner.push(wc(1));
        cq.arm_next().unwrap();
        assert!(!readable(fd), "a queued completion raised an event");
        cq.inner.push(wc(2));
        assert!(readable(fd));
        assert_eq!(cq.take_events().unwrap(), 1);
    }

    #[test]
    fn arming_a_cq_that_holds_completions_signals_at_once() {
        let cq = SoftCq {
            inner: Arc::new(CqInner::new(8, Duration::ZERO)),
        };
        let fd = cq.event_fd().unwrap();
        cq.inner.push(wc(1));
        cq.arm().unwrap();
        assert!(readable(fd));
        assert_eq!(cq.take_events().unwrap(), 1);
    }

    /// A waiter that polls before it sleeps sees a completion that comes
    /// while it polls, and one that comes after it has gone to sleep; a
    /// drained CQ is empty again to it, and a spin longer than the wait's
    /// timeout is cut to it.
    #[test]
    fn a_polling_waiter_sees_completions_during_and_after_its_spin() {
        for spin in [
            Duration::ZERO,
            Duration::from_millis(20),
            Duration::from_secs(5),
        ] {
            let cq = SoftCq {
                inner: Arc::new(CqInner {
                    // Forced on, whatever the machine's CPUs.
                    spin,
                    ..CqInner::new(8, Duration::ZERO)
                }),
            };
            let mut out = Vec::new();
            // Empty: the wait ends by its timeout, not by the spin.
            assert!(!cq.wait(Duration::from_millis(30)), "{spin:?}");
            for delay_ms in [1u64, 60] {
                let inner = cq.inner.clone();
                let pusher = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    inner.push(wc(delay_ms));
                });
                assert!(cq.wait(Duration::from_secs(10)), "{spin:?} {delay_ms}");
                assert_eq!(cq.poll(&mut out, 8).unwrap(), 1);
                assert_eq!(out.pop().unwrap().wr_id, delay_ms);
                pusher.join().unwrap();
                assert!(!cq.wait(Duration::from_millis(5)), "drained");
            }
        }
    }
}
