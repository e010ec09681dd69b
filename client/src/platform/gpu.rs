//! The GPU runtime seam: what hipObject asks of HIP (and of HSA, for
//! dma-buf export), and of CUDA behind the same trait. The fake for tests
//! is `testing::FakeHip` (feature `testing`).
//!
//! Addresses cross this seam as `usize`: device memory is not memory this
//! process may dereference.

use std::fmt::Debug;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// A GPU runtime's error code: `hipError_t` for HIP, `CUresult` for CUDA
/// (both are C `int`s; `hipObjError_t.hipError` carries either).
pub type HipError = i32;

/// `hipErrorInvalidValue`.
pub const HIP_ERROR_INVALID_VALUE: HipError = 1;
/// `hipErrorOutOfMemory`.
pub const HIP_ERROR_OUT_OF_MEMORY: HipError = 2;
/// `hipErrorNoDevice`.
pub const HIP_ERROR_NO_DEVICE: HipError = 100;
/// `hipErrorInvalidDevice`.
pub const HIP_ERROR_INVALID_DEVICE: HipError = 101;
/// `hipErrorNotSupported`.
pub const HIP_ERROR_NOT_SUPPORTED: HipError = 801;

/// Where a pointer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryType {
    /// Host memory (pageable or pinned).
    Host,
    /// GPU memory.
    Device,
}

/// `hipPointerGetAttributes`, the fields used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerAttributes {
    /// Where the memory lives.
    pub memory_type: MemoryType,
    /// The device it belongs to (device memory).
    pub device: i32,
    /// Start of the allocation containing the pointer.
    pub base: usize,
    /// Size of that allocation.
    pub size: usize,
}

/// A recorded event after an async copy.
pub trait HipEvent: Send + Sync + Debug {
    /// Whether the work before the event has finished (`hipEventQuery`).
    fn done(&self) -> Result<bool, HipError>;
}

/// What hipObject uses of a GPU runtime (HIP and HSA, or CUDA). Methods
/// take `&self`: one runtime serves every thread.
pub trait HipRuntime: Send + Sync + Debug {
    /// The runtime's name for messages (`HIP`, `CUDA`).
    fn name(&self) -> &'static str {
        "HIP"
    }
    /// On a platform with several runtimes ([`GpuRuntimes`](super::gpus::GpuRuntimes)):
    /// the one whose device memory `ptr` is. `None` means this runtime
    /// answers for the pointer itself (a single runtime always does).
    fn owner(&self, _ptr: usize) -> Option<Arc<dyn HipRuntime>> {
        None
    }
    /// `hipGetDeviceCount`.
    fn device_count(&self) -> Result<i32, HipError>;
    /// `hipGetDevice`: the calling thread's current device.
    fn current_device(&self) -> Result<i32, HipError>;
    /// `hipDeviceGetPCIBusId`.
    fn pci_bus_id(&self, device: i32) -> Result<String, HipError>;
    /// `hipPointerGetAttributes`; an error for memory HIP does not know,
    /// which the library treats as host memory.
    fn pointer_attributes(&self, ptr: usize) -> Result<PointerAttributes, HipError>;
    /// `hipHostMalloc`: pinned host memory.
    fn host_alloc(&self, size: usize) -> Result<usize, HipError>;
    /// `hipHostFree`.
    fn host_free(&self, ptr: usize);
    /// `hipMemcpyAsync` on the calling thread's per-thread default stream,
    /// then `hipEventRecord`: the returned event completes with the copy.
    fn copy_async(
        &self,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError>;
    /// `hipDeviceSynchronize`.
    fn device_synchronize(&self) -> Result<(), HipError>;
    /// `hsa_amd_portable_export_dmabuf` (CUDA: `cuMemGetHandleForAddressRange`):
    /// a dma-buf fd and the offset of `ptr` in it.
    fn export_dmabuf(&self, ptr: usize, size: usize) -> Result<(OwnedFd, u64), HipError>;
    /// Device memory on `device` (`hipMalloc`, `cuMemAlloc`), for
    /// applications and tools that let the library allocate it.
    fn device_alloc(&self, _device: i32, _size: usize) -> Result<usize, HipError> {
        Err(HIP_ERROR_NOT_SUPPORTED)
    }
    /// Frees memory from [`device_alloc`](Self::device_alloc).
    fn device_free(&self, _ptr: usize) {}
    /// A synchronous copy between host and device memory (`hipMemcpy`,
    /// `cuMemcpyHtoD`/`cuMemcpyDtoH`).
    fn copy_sync(&self, _dst: usize, _src: usize, _size: usize) -> Result<(), HipError> {
        Err(HIP_ERROR_NOT_SUPPORTED)
    }
}

/// No GPU runtime: no devices, nothing is device memory.
#[derive(Debug, Default)]
pub struct NoHip;

impl HipRuntime for NoHip {
    fn device_count(&self) -> Result<i32, HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn current_device(&self) -> Result<i32, HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn pci_bus_id(&self, _device: i32) -> Result<String, HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn pointer_attributes(&self, _ptr: usize) -> Result<PointerAttributes, HipError> {
        Err(HIP_ERROR_INVALID_VALUE)
    }
    fn host_alloc(&self, _size: usize) -> Result<usize, HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn host_free(&self, _ptr: usize) {}
    fn copy_async(
        &self,
        _dst: usize,
        _src: usize,
        _size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn device_synchronize(&self) -> Result<(), HipError> {
        Err(HIP_ERROR_NO_DEVICE)
    }
    fn export_dmabuf(&self, _ptr: usize, _size: usize) -> Result<(OwnedFd, u64), HipError> {
        Err(HIP_ERROR_NOT_SUPPORTED)
    }
}
