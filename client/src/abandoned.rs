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

    /// Whether none is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
