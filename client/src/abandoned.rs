//! Staging copies that timed out but may still run.
//!
//! A copy that missed its deadline cannot be stopped, and may still read or
//! write the staging buffer whenever the GPU gets to it. So its event and
//! the buffer's entry are kept here: holding the entry keeps the staging
//! memory allocated and makes deregistration report `Busy`, and transfers on
//! that buffer report `Busy` while the copy runs. Handing a copy over must
//! not fail, so room is reserved before the copy starts.

use crate::buffer::BufEntry;
use crate::platform::gpu::HipEvent;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug)]
struct Copy {
    event: Box<dyn HipEvent>,
    entry: Arc<BufEntry>,
}

#[derive(Debug, Default)]
struct Inner {
    copies: Vec<Copy>,
    reserved: usize,
}

/// The list.
#[derive(Debug, Default)]
pub struct AbandonedCopies {
    inner: Mutex<Inner>,
}

/// Room for one copy, reserved before the copy starts.
#[derive(Debug)]
pub struct Slot<'a> {
    list: &'a AbandonedCopies,
    used: bool,
}

impl AbandonedCopies {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves room for one copy.
    pub fn reserve(&self) -> Slot<'_> {
        let mut g = self.lock();
        g.reserved += 1;
        let extra = g.reserved;
        g.copies.reserve(extra);
        Slot {
            list: self,
            used: false,
        }
    }

    /// Releases copies that have finished.
    pub fn prune(&self) {
        self.lock()
            .copies
            .retain(|c| !matches!(c.event.done(), Ok(true)));
    }

    /// Whether a copy of `entry`'s staging buffer is still running.
    pub fn is_busy(&self, entry: &Arc<BufEntry>) -> bool {
        let mut g = self.lock();
        g.copies.retain(|c| !matches!(c.event.done(), Ok(true)));
        g.copies.iter().any(|c| Arc::ptr_eq(&c.entry, entry))
    }

    /// Copies still running.
    pub fn len(&self) -> usize {
        self.lock().copies.len()
    }
}

impl Slot<'_> {
    /// Hands a copy that missed its deadline over; never allocates.
    pub fn add(mut self, event: Box<dyn HipEvent>, entry: Arc<BufEntry>) {
        let mut g = self.list.lock();
        g.reserved -= 1;
        self.used = true;
        // Capacity was reserved by `reserve`, so this push does not allocate.
        g.copies.push(Copy { event, entry });
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if !self.used {
            let mut g = self.list.lock();
            g.reserved -= 1;
        }
    }
}

impl Drop for AbandonedCopies {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        for c in g.copies.drain(..) {
            if matches!(c.event.done(), Ok(true)) {
                continue;
            }
            // Still running: its staging buffer must never be freed under
            // it, so the entry (and the event) are leaked on purpose.
            tracing::warn!(
                addr = format_args!("{:#x}", c.entry.addr),
                "leaking the staging buffer of a copy that is still running"
            );
            std::mem::forget(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::platform::gpu::{HipError, HipEvent, NoHip};
    use crate::platform::topology::NoTopology;
    use crate::platform::Platform;
    use crate::{Config, Hipobj, OpError, Options};
    use hipobj_fabric::soft::{SoftConfig, SoftProvider};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// An event the test completes.
    #[derive(Debug)]
    struct Gate(Arc<AtomicBool>);

    impl HipEvent for Gate {
        fn done(&self) -> Result<bool, HipError> {
            Ok(self.0.load(Ordering::Acquire))
        }
    }

    #[test]
    fn a_buffer_an_abandoned_copy_holds_cannot_be_deregistered_until_it_ends() {
        let platform = Platform {
            hip: Arc::new(NoHip),
            rdma: Arc::new(SoftProvider::new(
                vec![std::net::Ipv4Addr::LOCALHOST],
                SoftConfig::from_env(),
            )),
            topology: Arc::new(NoTopology),
        };
        let lib = Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0"))
            .unwrap();
        let inst = lib.instance();
        let mut mem = vec![0u8; 4096];
        let addr = mem.as_mut_ptr() as usize;
        // SAFETY: `mem` outlives the registration: it is deregistered below,
        // before `mem` is dropped.
        unsafe { inst.buffers.register_host(&inst.device, addr, 4096) }.unwrap();
        let entry = inst.buffers.find(addr).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        inst.abandoned
            .reserve()
            .add(Box::new(Gate(done.clone())), entry.clone());
        assert!(inst.abandoned.is_busy(&entry));
        drop(entry);
        assert_eq!(inst.abandoned_copies(), 1);
        assert_eq!(inst.buffers.deregister(addr).unwrap_err().op, OpError::Busy);
        done.store(true, Ordering::Release);
        inst.abandoned.prune();
        assert_eq!(inst.abandoned_copies(), 0);
        inst.buffers.deregister(addr).unwrap();
        assert!(inst.buffers.is_empty());
        drop(mem);
    }
}
