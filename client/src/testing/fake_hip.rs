//! A fake GPU runtime whose "device memory" is host memory.

use crate::platform::gpu::{
    HipError, HipEvent, HipRuntime, MemoryType, PointerAttributes, HIP_ERROR_INVALID_DEVICE,
    HIP_ERROR_INVALID_VALUE, HIP_ERROR_NOT_SUPPORTED, HIP_ERROR_NO_DEVICE, HIP_ERROR_OUT_OF_MEMORY,
};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How the fake's copies behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyBehavior {
    /// Copy at once.
    #[default]
    Immediate,
    /// Hold the copy until the test calls [`FakeHip::release_held_copies`]
    /// (a slow DMA whose end the test decides, not a clock).
    Held,
    /// Never finish, and never touch the memory.
    Never,
}

/// Counters of what the fake was asked to do.
#[derive(Debug, Default)]
pub struct FakeHipLog {
    /// Copies started.
    pub copies: AtomicUsize,
    /// `hipDeviceSynchronize` calls.
    pub synchronizes: AtomicUsize,
    /// dma-buf exports.
    pub exports: AtomicUsize,
    /// Pinned allocations live.
    pub pinned_live: AtomicUsize,
}

#[derive(Debug)]
struct FakeEvent {
    done: Arc<AtomicBool>,
}

impl HipEvent for FakeEvent {
    fn done(&self) -> Result<bool, HipError> {
        Ok(self.done.load(Ordering::Acquire))
    }
}

/// A fake GPU runtime whose "device memory" is host memory it allocated
/// and reports as device memory, so the software provider can reach it
/// when a test lets it.
#[derive(Debug, Default)]
pub struct FakeHip {
    /// PCI bus ids of the fake GPUs (device `i` is `bus_ids[i]`).
    pub bus_ids: Vec<String>,
    /// The current device.
    pub current: i32,
    /// How copies behave.
    pub copies: Mutex<CopyBehavior>,
    /// Whether dma-buf export works.
    pub dmabuf_export: AtomicBool,
    /// Whether pinned host allocation works.
    pub pinned_alloc: AtomicBool,
    /// What happened.
    pub log: FakeHipLog,
    device_allocs: Mutex<BTreeMap<usize, (Vec<u64>, i32)>>,
    pinned: Mutex<BTreeMap<usize, Vec<u64>>>,
    held: Mutex<Vec<HeldCopy>>,
}

/// A copy [`CopyBehavior::Held`] keeps back: source, destination, size,
/// and the flag its event reads.
#[derive(Debug)]
struct HeldCopy {
    dst: usize,
    src: usize,
    size: usize,
    done: Arc<AtomicBool>,
}

impl FakeHip {
    /// A fake with GPUs at `bus_ids`, device 0 current, copies immediate,
    /// dma-buf export and pinned allocation working.
    pub fn new(bus_ids: &[&str]) -> FakeHip {
        FakeHip {
            bus_ids: bus_ids.iter().map(|s| s.to_string()).collect(),
            dmabuf_export: AtomicBool::new(true),
            pinned_alloc: AtomicBool::new(true),
            ..FakeHip::default()
        }
    }

    /// Allocates `size` bytes of "device memory" on `device` (8-byte aligned).
    pub fn alloc_device(&self, size: usize, device: i32) -> usize {
        let v = vec![0u64; size.div_ceil(8).max(1)];
        let p = v.as_ptr() as usize;
        self.device_allocs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p, (v, device));
        p
    }

    /// Sets how copies behave.
    pub fn set_copies(&self, b: CopyBehavior) {
        *self.copies.lock().unwrap_or_else(|e| e.into_inner()) = b;
    }

    /// Runs every copy [`CopyBehavior::Held`] kept back, on the calling
    /// thread, and marks its event done; returns how many ran. Once it
    /// returns, the library sees those copies as finished.
    pub fn release_held_copies(&self) -> usize {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        for c in &held {
            // SAFETY: both ranges were checked to lie in fake memory when the
            // copy was started; the library keeps the staging buffer of an
            // abandoned copy allocated until its event is done (set just
            // below), and the fake's device memory lives as long as it.
            unsafe { std::ptr::copy(c.src as *const u8, c.dst as *mut u8, c.size) };
            c.done.store(true, Ordering::Release);
        }
        held.len()
    }

    /// Copies bytes out of fake device (or any fake) memory, for checks.
    pub fn read(&self, ptr: usize, out: &mut [u8]) {
        assert!(self.owns(ptr, out.len()), "not fake memory");
        // SAFETY: the range lies inside an allocation this fake owns and keeps alive.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, out.as_mut_ptr(), out.len()) }
    }

    /// Copies bytes into fake memory, for set-up.
    pub fn write(&self, ptr: usize, data: &[u8]) {
        assert!(self.owns(ptr, data.len()), "not fake memory");
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr as *mut u8, data.len()) }
    }

    /// Whether `[ptr, ptr + len)` lies in fake device memory.
    pub fn is_device_range(&self, ptr: usize, len: usize) -> bool {
        let m = self.device_allocs.lock().unwrap_or_else(|e| e.into_inner());
        Self::find(&m, ptr).is_some_and(|(base, size, _)| ptr + len <= base + size)
    }

    fn owns(&self, ptr: usize, len: usize) -> bool {
        if self.is_device_range(ptr, len) {
            return true;
        }
        let m = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        m.range(..=ptr)
            .next_back()
            .is_some_and(|(b, v)| ptr + len <= b + v.len() * 8)
    }

    fn find<T>(m: &BTreeMap<usize, (Vec<u64>, T)>, ptr: usize) -> Option<(usize, usize, &T)> {
        let (base, (v, d)) = m.range(..=ptr).next_back()?;
        let size = v.len() * 8;
        (ptr < base + size).then_some((*base, size, d))
    }
}

impl HipRuntime for FakeHip {
    fn device_count(&self) -> Result<i32, HipError> {
        if self.bus_ids.is_empty() {
            Err(HIP_ERROR_NO_DEVICE)
        } else {
            Ok(self.bus_ids.len() as i32)
        }
    }

    fn current_device(&self) -> Result<i32, HipError> {
        self.device_count().map(|_| self.current)
    }

    fn pci_bus_id(&self, device: i32) -> Result<String, HipError> {
        usize::try_from(device)
            .ok()
            .and_then(|d| self.bus_ids.get(d).cloned())
            .ok_or(HIP_ERROR_INVALID_DEVICE)
    }

    fn pointer_attributes(&self, ptr: usize) -> Result<PointerAttributes, HipError> {
        let m = self.device_allocs.lock().unwrap_or_else(|e| e.into_inner());
        match Self::find(&m, ptr) {
            Some((base, size, dev)) => Ok(PointerAttributes {
                memory_type: MemoryType::Device,
                device: *dev,
                base,
                size,
            }),
            None => Err(HIP_ERROR_INVALID_VALUE),
        }
    }

    fn host_alloc(&self, size: usize) -> Result<usize, HipError> {
        if !self.pinned_alloc.load(Ordering::Relaxed) {
            return Err(HIP_ERROR_OUT_OF_MEMORY);
        }
        let v = vec![0u64; size.div_ceil(8).max(1)];
        let p = v.as_ptr() as usize;
        self.pinned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p, v);
        self.log.pinned_live.fetch_add(1, Ordering::Relaxed);
        Ok(p)
    }

    fn host_free(&self, ptr: usize) {
        if self
            .pinned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ptr)
            .is_some()
        {
            self.log.pinned_live.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn copy_async(
        &self,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError> {
        if !self.owns(dst, size) || !self.owns(src, size) {
            return Err(HIP_ERROR_INVALID_VALUE);
        }
        self.log.copies.fetch_add(1, Ordering::Relaxed);
        let done = Arc::new(AtomicBool::new(false));
        let copy = move || {
            // SAFETY: both ranges were checked to lie in fake memory. The
            // library keeps the staging buffer of an abandoned copy
            // allocated until the copy is done, and tests keep the fake's
            // device memory alive for the fake's lifetime.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) }
        };
        match *self.copies.lock().unwrap_or_else(|e| e.into_inner()) {
            CopyBehavior::Immediate => {
                copy();
                done.store(true, Ordering::Release);
            }
            CopyBehavior::Held => {
                self.held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(HeldCopy {
                        dst,
                        src,
                        size,
                        done: done.clone(),
                    });
            }
            CopyBehavior::Never => {}
        }
        Ok(Box::new(FakeEvent { done }))
    }

    fn device_synchronize(&self) -> Result<(), HipError> {
        self.log.synchronizes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn export_dmabuf(&self, ptr: usize, size: usize) -> Result<(OwnedFd, u64), HipError> {
        if !self.dmabuf_export.load(Ordering::Relaxed) || !self.is_device_range(ptr, size) {
            return Err(HIP_ERROR_NOT_SUPPORTED);
        }
        self.log.exports.fetch_add(1, Ordering::Relaxed);
        // A real fd stands in for the dma-buf: /dev/null, opened read-only.
        let f = std::fs::File::open("/dev/null").map_err(|_| HIP_ERROR_OUT_OF_MEMORY)?;
        Ok((OwnedFd::from(f), 0))
    }
}
