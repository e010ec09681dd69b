//! Several GPU runtimes behind the one seam: HIP and CUDA on a host that
//! has both (either or both may be absent).
//!
//! The runtime is chosen per pointer: memory a runtime reports as its
//! device memory is that runtime's ([`HipRuntime::owner`]), and the buffer
//! map keeps the owner with the buffer, so its dma-buf export, staging
//! memory, copies and synchronizes all go to it. Memory no runtime calls
//! device memory is host memory.
//!
//! Devices are numbered across the runtimes in their order (HIP's first,
//! then CUDA's): with two AMD and four NVIDIA GPUs, `gpuDevice` 0 and 1 are
//! HIP's, 2 to 5 CUDA's 0 to 3. The current device is the first runtime's
//! that has a device.

use super::gpu::{
    HipError, HipEvent, HipRuntime, MemoryType, PointerAttributes, HIP_ERROR_INVALID_DEVICE,
    HIP_ERROR_INVALID_VALUE, HIP_ERROR_NOT_SUPPORTED, HIP_ERROR_NO_DEVICE,
};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The GPU runtimes of a platform, in device-numbering order.
#[derive(Debug, Clone)]
pub struct GpuRuntimes {
    runtimes: Vec<Arc<dyn HipRuntime>>,
}

impl GpuRuntimes {
    /// The runtimes, in the order their devices are numbered.
    pub fn new(runtimes: Vec<Arc<dyn HipRuntime>>) -> GpuRuntimes {
        GpuRuntimes { runtimes }
    }

    /// The runtimes held.
    pub fn runtimes(&self) -> &[Arc<dyn HipRuntime>] {
        &self.runtimes
    }

    fn count(rt: &Arc<dyn HipRuntime>) -> i32 {
        rt.device_count().unwrap_or(0).max(0)
    }

    /// The runtime and its own index for a device number across all.
    fn locate(&self, device: i32) -> Result<(&Arc<dyn HipRuntime>, i32), HipError> {
        if device < 0 {
            return Err(HIP_ERROR_INVALID_DEVICE);
        }
        let mut first = 0;
        for rt in &self.runtimes {
            let n = Self::count(rt);
            if device < first + n {
                return Ok((rt, device - first));
            }
            first += n;
        }
        Err(HIP_ERROR_INVALID_DEVICE)
    }

    /// The number of the first device of the runtime at `index`.
    fn first_device(&self, index: usize) -> i32 {
        self.runtimes[..index].iter().map(Self::count).sum()
    }

    /// The first runtime with a device, else the first one.
    fn primary(&self) -> Option<&Arc<dyn HipRuntime>> {
        self.runtimes
            .iter()
            .find(|rt| Self::count(rt) > 0)
            .or(self.runtimes.first())
    }

    fn owner_of(&self, ptr: usize) -> Option<(usize, &Arc<dyn HipRuntime>, PointerAttributes)> {
        self.runtimes.iter().enumerate().find_map(|(i, rt)| {
            rt.pointer_attributes(ptr)
                .ok()
                .filter(|a| a.memory_type == MemoryType::Device)
                .map(|a| (i, rt, a))
        })
    }

    /// The runtime for a copy between `dst` and `src`: the owner of
    /// either's device memory, else the primary one.
    fn for_copy(&self, dst: usize, src: usize) -> Result<&Arc<dyn HipRuntime>, HipError> {
        self.owner_of(dst)
            .or_else(|| self.owner_of(src))
            .map(|(_, rt, _)| rt)
            .or_else(|| self.primary())
            .ok_or(HIP_ERROR_NO_DEVICE)
    }
}

impl HipRuntime for GpuRuntimes {
    fn name(&self) -> &'static str {
        match self.runtimes.as_slice() {
            [one] => one.name(),
            _ => "GPU",
        }
    }

    fn owner(&self, ptr: usize) -> Option<Arc<dyn HipRuntime>> {
        self.owner_of(ptr).map(|(_, rt, _)| rt.clone())
    }

    fn device_count(&self) -> Result<i32, HipError> {
        match self.runtimes.iter().map(Self::count).sum() {
            0 => Err(HIP_ERROR_NO_DEVICE),
            n => Ok(n),
        }
    }

    fn current_device(&self) -> Result<i32, HipError> {
        let i = self
            .runtimes
            .iter()
            .position(|rt| Self::count(rt) > 0)
            .ok_or(HIP_ERROR_NO_DEVICE)?;
        Ok(self.first_device(i) + self.runtimes[i].current_device()?)
    }

    fn pci_bus_id(&self, device: i32) -> Result<String, HipError> {
        let (rt, local) = self.locate(device)?;
        rt.pci_bus_id(local)
    }

    fn pointer_attributes(&self, ptr: usize) -> Result<PointerAttributes, HipError> {
        if let Some((i, _, mut a)) = self.owner_of(ptr) {
            a.device += self.first_device(i);
            return Ok(a);
        }
        self.runtimes
            .iter()
            .find_map(|rt| rt.pointer_attributes(ptr).ok())
            .ok_or(HIP_ERROR_INVALID_VALUE)
    }

    fn host_alloc(&self, size: usize) -> Result<usize, HipError> {
        self.primary().ok_or(HIP_ERROR_NO_DEVICE)?.host_alloc(size)
    }

    fn host_free(&self, ptr: usize) {
        if let Some(rt) = self.primary() {
            rt.host_free(ptr);
        }
    }

    fn copy_async(
        &self,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError> {
        self.for_copy(dst, src)?.copy_async(dst, src, size)
    }

    fn device_synchronize(&self) -> Result<(), HipError> {
        for rt in self.runtimes.iter().filter(|rt| Self::count(rt) > 0) {
            rt.device_synchronize()?;
        }
        Ok(())
    }

    fn export_dmabuf(&self, ptr: usize, size: usize) -> Result<(OwnedFd, u64), HipError> {
        match self.owner_of(ptr) {
            Some((_, rt, _)) => rt.export_dmabuf(ptr, size),
            None => Err(HIP_ERROR_NOT_SUPPORTED),
        }
    }

    fn device_alloc(&self, device: i32, size: usize) -> Result<usize, HipError> {
        let (rt, local) = self.locate(device)?;
        rt.device_alloc(local, size)
    }

    fn device_free(&self, ptr: usize) {
        if let Some((_, rt, _)) = self.owner_of(ptr) {
            rt.device_free(ptr);
        }
    }

    fn copy_sync(&self, dst: usize, src: usize, size: usize) -> Result<(), HipError> {
        self.for_copy(dst, src)?.copy_sync(dst, src, size)
    }
}
