//! The CUDA driver API (`libcuda.so.1`) behind the GPU seam, opened with
//! `dlopen()` on first use and never linked.
//!
//! The driver library is the one piece of CUDA every machine with an
//! NVIDIA GPU has (`libcudart` comes with an application or a toolkit), and
//! the runtime API is built on it: the library works in each device's
//! *primary* context, the one `libcudart` uses, pushed around every call and
//! popped after, so the application's own current context is untouched.
//!
//! `cuMemGetHandleForAddressRange` (dma-buf export, driver 11.7 and later)
//! is optional: without it dma-buf export reports `CUDA_ERROR_NOT_SUPPORTED`
//! and registration falls back (plain MR for nvidia-peermem, then
//! staging). `HIPOBJ_CUDA_LIBRARY` names another file to load (tests load a
//! stub).
//!
//! Every value (`abi.rs`) is from CUDA's public `cuda.h` (the driver API header;
//! the enum or macro it belongs to is named with each). No CUDA header is
//! on the build machines: `tests/cuda_loader.rs` checks these values against
//! a stub compiled with the same numbers, and docs/hardware.md lists them.

use super::event::{Event, EventApi};
use super::gpu::{HipError, HipEvent, HipRuntime, MemoryType, PointerAttributes};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;

/// Environment variable: the CUDA driver library to load.
pub const ENV_CUDA_LIBRARY: &str = "HIPOBJ_CUDA_LIBRARY";

const CUDA_SONAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

mod abi;

use abi::*;
pub use abi::{
    CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY,
    CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NO_DEVICE, CUDA_SUCCESS, CU_EVENT_DISABLE_TIMING,
    CU_MEMHOSTALLOC_PORTABLE, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_STREAM_PER_THREAD,
};

/// The resolved symbols, under the names `libcuda` exports (cuda.h maps
/// several API names to `_v2` entries with macros; those are used).
#[derive(Clone, Copy)]
struct Symbols {
    device_get_count: FnOutInt,
    device_get: FnDeviceGet,
    device_get_pci_bus_id: FnBusId,
    ctx_get_device: FnOutInt,
    primary_ctx_retain: FnRetain,
    primary_ctx_release: FnOnDevice,
    primary_ctx_get_state: FnCtxState,
    ctx_push: FnPush,
    ctx_pop: FnPop,
    ctx_synchronize: FnVoid,
    pointer_get_attributes: FnAttrs,
    mem_host_alloc: FnHostAlloc,
    mem_free_host: FnHostFree,
    memcpy_htod_async: FnHtoDAsync,
    memcpy_dtoh_async: FnDtoHAsync,
    memcpy_htod: FnHtoD,
    memcpy_dtoh: FnDtoH,
    event_create: FnEventCreate,
    event_record: FnEventRecord,
    event_query: FnHandle,
    event_destroy: FnHandle,
    mem_alloc: FnMemAlloc,
    mem_free: FnMemFree,
    get_handle_for_address_range: Option<FnRangeHandle>,
}

/// CUDA through `dlopen()` of the driver library.
pub struct SystemCuda {
    sym: Symbols,
    /// Retained primary contexts, by device ordinal (released on drop).
    contexts: Mutex<Vec<(CuDevice, usize)>>,
    driver_version: c_int,
    _lib: Library,
}

impl fmt::Debug for SystemCuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemCuda")
            .field("driver_version", &self.driver_version)
            .field("dmabuf_export", &self.has_dmabuf_export())
            .finish()
    }
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {{
        // SAFETY: the symbol is declared with the type of the CUDA driver
        // API's public C prototype of the same name (cuda.h).
        let s = unsafe { $lib.get(concat!($name, "\0").as_bytes()) }
            .map_err(|e| format!("{}: {e}", $name))?;
        *s
    }};
}

fn check(rc: CuResult) -> Result<(), HipError> {
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

impl SystemCuda {
    /// Loads `HIPOBJ_CUDA_LIBRARY`, or `libcuda.so.1`, and initializes the
    /// driver; an error says which library or symbol is missing, or what
    /// `cuInit` answered (`CUDA_ERROR_NO_DEVICE`, 100, on a host with the
    /// driver and no GPU).
    pub fn load() -> Result<SystemCuda, String> {
        let names: Vec<String> = match std::env::var(ENV_CUDA_LIBRARY) {
            Ok(p) if !p.is_empty() => vec![p],
            _ => CUDA_SONAMES.iter().map(|s| s.to_string()).collect(),
        };
        let mut last = String::new();
        for n in &names {
            match Self::load_path(Path::new(n)) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Loads the driver library at `path` (a soname is searched as
    /// `dlopen()` does).
    pub fn load_path(path: &Path) -> Result<SystemCuda, String> {
        // SAFETY: loading a shared library runs its initializers; this is
        // the NVIDIA driver's library, or the file the user named.
        let lib = unsafe { Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        let init: FnInit = sym!(lib, "cuInit");
        let driver_get_version: FnOutInt = sym!(lib, "cuDriverGetVersion");
        let get_handle_for_address_range = {
            // SAFETY: declared with the type of cuda.h's prototype.
            unsafe { lib.get::<FnRangeHandle>(b"cuMemGetHandleForAddressRange\0") }
                .ok()
                .map(|s| *s)
        };
        let sym = Symbols {
            device_get_count: sym!(lib, "cuDeviceGetCount"),
            device_get: sym!(lib, "cuDeviceGet"),
            device_get_pci_bus_id: sym!(lib, "cuDeviceGetPCIBusId"),
            ctx_get_device: sym!(lib, "cuCtxGetDevice"),
            primary_ctx_retain: sym!(lib, "cuDevicePrimaryCtxRetain"),
            primary_ctx_release: sym!(lib, "cuDevicePrimaryCtxRelease_v2"),
            primary_ctx_get_state: sym!(lib, "cuDevicePrimaryCtxGetState"),
            ctx_push: sym!(lib, "cuCtxPushCurrent_v2"),
            ctx_pop: sym!(lib, "cuCtxPopCurrent_v2"),
            ctx_synchronize: sym!(lib, "cuCtxSynchronize"),
            pointer_get_attributes: sym!(lib, "cuPointerGetAttributes"),
            mem_host_alloc: sym!(lib, "cuMemHostAlloc"),
            mem_free_host: sym!(lib, "cuMemFreeHost"),
            memcpy_htod_async: sym!(lib, "cuMemcpyHtoDAsync_v2"),
            memcpy_dtoh_async: sym!(lib, "cuMemcpyDtoHAsync_v2"),
            memcpy_htod: sym!(lib, "cuMemcpyHtoD_v2"),
            memcpy_dtoh: sym!(lib, "cuMemcpyDtoH_v2"),
            event_create: sym!(lib, "cuEventCreate"),
            event_record: sym!(lib, "cuEventRecord"),
            event_query: sym!(lib, "cuEventQuery"),
            event_destroy: sym!(lib, "cuEventDestroy_v2"),
            mem_alloc: sym!(lib, "cuMemAlloc_v2"),
            mem_free: sym!(lib, "cuMemFree_v2"),
            get_handle_for_address_range,
        };
        // SAFETY: cuInit takes flags, which must be 0.
        let rc = unsafe { init(0) };
        if rc != CUDA_SUCCESS {
            return Err(format!(
                "{}: cuInit failed: CUDA error {rc}",
                path.display()
            ));
        }
        let mut driver_version: c_int = 0;
        // SAFETY: writes one int through a valid pointer.
        unsafe { driver_get_version(&mut driver_version) };
        Ok(SystemCuda {
            sym,
            contexts: Mutex::new(Vec::new()),
            driver_version,
            _lib: lib,
        })
    }

    /// Whether `cuMemGetHandleForAddressRange` was found.
    pub fn has_dmabuf_export(&self) -> bool {
        self.sym.get_handle_for_address_range.is_some()
    }

    /// `cuDriverGetVersion` (e.g. 12040 for 12.4).
    pub fn driver_version(&self) -> i32 {
        self.driver_version
    }

    fn device(&self, ordinal: i32) -> Result<CuDevice, HipError> {
        let mut d: CuDevice = 0;
        // SAFETY: writes one device handle; the driver checks the ordinal.
        check(unsafe { (self.sym.device_get)(&mut d, ordinal) })?;
        Ok(d)
    }

    /// The primary context of device `ordinal`, retained once and kept.
    fn context(&self, ordinal: i32) -> Result<Handle, HipError> {
        let mut ctxs = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
        let dev = self.device(ordinal)?;
        if let Some(&(_, c)) = ctxs.iter().find(|(d, _)| *d == dev) {
            return Ok(c as Handle);
        }
        let mut ctx: Handle = std::ptr::null_mut();
        // SAFETY: writes one context handle for a valid device.
        check(unsafe { (self.sym.primary_ctx_retain)(&mut ctx, dev) })?;
        ctxs.push((dev, ctx as usize));
        Ok(ctx)
    }

    /// Runs `f` with `ctx` current on this thread, then restores the
    /// thread's previous context.
    fn in_context<T>(
        &self,
        ctx: Handle,
        f: impl FnOnce() -> Result<T, HipError>,
    ) -> Result<T, HipError> {
        // SAFETY: `ctx` is a retained primary context.
        check(unsafe { (self.sym.ctx_push)(ctx) })?;
        let r = f();
        let mut popped: Handle = std::ptr::null_mut();
        // SAFETY: pops the context pushed above.
        unsafe { (self.sym.ctx_pop)(&mut popped) };
        r
    }

    /// The device ordinal a pointer's memory belongs to, if it is CUDA
    /// device memory.
    fn device_of(&self, ptr: usize) -> Option<i32> {
        match self.pointer_attributes(ptr) {
            Ok(a) if a.memory_type == MemoryType::Device => Some(a.device),
            _ => None,
        }
    }
}

impl Drop for SystemCuda {
    fn drop(&mut self) {
        let ctxs = self.contexts.get_mut().unwrap_or_else(|e| e.into_inner());
        for (dev, _) in ctxs.drain(..) {
            // SAFETY: each device's primary context was retained once.
            unsafe { (self.sym.primary_ctx_release)(dev) };
        }
    }
}

/// How CUDA queries and destroys an event on a context's per-thread
/// stream (destroyed with its context current).
struct CudaEvents {
    ctx: Handle,
    sym: Symbols,
}

// SAFETY: a CUevent is a handle the driver lets any thread query
// (cuEventQuery is thread-safe on a shared event) and destroy; `ctx` is a
// primary context the runtime keeps retained, which any thread may push.
unsafe impl EventApi for CudaEvents {
    const NAME: &'static str = "CudaEvent";
    const DONE: HipError = CUDA_SUCCESS;
    const NOT_READY: HipError = CUDA_ERROR_NOT_READY;

    unsafe fn query(&self, event: *mut c_void) -> HipError {
        // SAFETY: the caller passes a live event (created by cuEventCreate).
        unsafe { (self.sym.event_query)(event) }
    }

    unsafe fn destroy(&self, event: *mut c_void) {
        // SAFETY: the context is retained; the caller passes a live event,
        // destroyed exactly once, here, with its context current.
        unsafe {
            if (self.sym.ctx_push)(self.ctx) == CUDA_SUCCESS {
                (self.sym.event_destroy)(event);
                let mut popped: Handle = std::ptr::null_mut();
                (self.sym.ctx_pop)(&mut popped);
            }
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|&p| p.is_power_of_two())
        .unwrap_or(4096)
}

impl HipRuntime for SystemCuda {
    fn name(&self) -> &'static str {
        "CUDA"
    }

    fn device_count(&self) -> Result<i32, HipError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int through a valid pointer.
        check(unsafe { (self.sym.device_get_count)(&mut n) })?;
        Ok(n)
    }

    fn current_device(&self) -> Result<i32, HipError> {
        let count = self.device_count()?;
        if count == 0 {
            return Err(CUDA_ERROR_NO_DEVICE);
        }
        let mut d: CuDevice = 0;
        // SAFETY: writes one device handle; fails without a current context.
        if unsafe { (self.sym.ctx_get_device)(&mut d) } != CUDA_SUCCESS {
            // No context is current: device 0, as cudaGetDevice answers.
            return Ok(0);
        }
        // The handle back to its ordinal.
        Ok((0..count)
            .find(|&i| self.device(i).ok() == Some(d))
            .unwrap_or(0))
    }

    fn pci_bus_id(&self, device: i32) -> Result<String, HipError> {
        let dev = self.device(device)?;
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer's length is passed, and the driver writes a
        // NUL-terminated string of at most that many bytes.
        check(unsafe {
            (self.sym.device_get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, dev)
        })?;
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        // CUDA writes hex digits in upper case ("0000:C1:00.0"); sysfs uses
        // lower case.
        String::from_utf8(bytes)
            .map(|s| s.to_ascii_lowercase())
            .map_err(|_| CUDA_ERROR_INVALID_VALUE)
    }

    fn pointer_attributes(&self, ptr: usize) -> Result<PointerAttributes, HipError> {
        let (mut mem_type, mut managed, mut ordinal): (c_uint, c_uint, c_int) = (0, 0, -1);
        let (mut start, mut size): (CuPtr, usize) = (0, 0);
        let mut kinds = [
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        ];
        let mut data: [*mut c_void; 5] = [
            (&mut mem_type as *mut c_uint).cast(),
            (&mut managed as *mut c_uint).cast(),
            (&mut ordinal as *mut c_int).cast(),
            (&mut start as *mut CuPtr).cast(),
            (&mut size as *mut usize).cast(),
        ];
        // SAFETY: five attributes, each with a pointer to storage of the
        // type cuda.h documents for it; memory CUDA does not know gets
        // default (zero) values and CUDA_SUCCESS.
        check(unsafe {
            (self.sym.pointer_get_attributes)(
                kinds.len() as c_uint,
                kinds.as_mut_ptr(),
                data.as_mut_ptr(),
                ptr as CuPtr,
            )
        })?;
        let memory_type = match (mem_type, managed) {
            (CU_MEMORYTYPE_DEVICE, 0) => MemoryType::Device,
            (CU_MEMORYTYPE_HOST, 0) => MemoryType::Host,
            // Unknown to CUDA (0), managed, or an array: not CUDA's device
            // memory, so the library registers it as host memory.
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        Ok(PointerAttributes {
            memory_type,
            device: ordinal,
            base: start as usize,
            size,
        })
    }

    fn host_alloc(&self, size: usize) -> Result<usize, HipError> {
        let ctx = self.context(self.current_device()?)?;
        self.in_context(ctx, || {
            let mut p = std::ptr::null_mut::<c_void>();
            // SAFETY: writes one pointer; portable pinned memory serves
            // every context.
            check(unsafe { (self.sym.mem_host_alloc)(&mut p, size, CU_MEMHOSTALLOC_PORTABLE) })?;
            Ok(p as usize)
        })
    }

    fn host_free(&self, ptr: usize) {
        let Ok(ctx) = self.current_device().and_then(|d| self.context(d)) else {
            return;
        };
        let _ = self.in_context(ctx, || {
            // SAFETY: `ptr` came from cuMemHostAlloc and is freed once (the
            // caller, `Pinned`, owns it).
            check(unsafe { (self.sym.mem_free_host)(ptr as *mut c_void) })
        });
    }

    fn copy_async(
        &self,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError> {
        let (device, to_device) = match (self.device_of(dst), self.device_of(src)) {
            (Some(d), _) => (d, true),
            (None, Some(d)) => (d, false),
            (None, None) => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let ctx = self.context(device)?;
        self.in_context(ctx, || {
            let mut event: Handle = std::ptr::null_mut();
            // SAFETY: writes one event handle in the current context.
            check(unsafe { (self.sym.event_create)(&mut event, CU_EVENT_DISABLE_TIMING) })?;
            let events = CudaEvents { ctx, sym: self.sym };
            // SAFETY: the event was just created, and nothing else owns it.
            let ev = unsafe { Event::new(event, events) };
            let stream = CU_STREAM_PER_THREAD as Handle;
            // SAFETY: the ranges are a registered buffer and its staging
            // memory (checked by the caller), both kept allocated until the
            // event reports completion, or forever if it never does.
            check(unsafe {
                if to_device {
                    (self.sym.memcpy_htod_async)(dst as CuPtr, src as *const c_void, size, stream)
                } else {
                    (self.sym.memcpy_dtoh_async)(dst as *mut c_void, src as CuPtr, size, stream)
                }
            })?;
            // SAFETY: records the live event on the per-thread stream.
            check(unsafe { (self.sym.event_record)(ev.handle(), stream) })?;
            Ok(Box::new(ev) as Box<dyn HipEvent>)
        })
    }

    fn device_synchronize(&self) -> Result<(), HipError> {
        // Every device whose primary context is active (the application
        // uses it); a context the library would have to create has no work.
        for ordinal in 0..self.device_count()? {
            let dev = self.device(ordinal)?;
            let (mut flags, mut active): (c_uint, c_int) = (0, 0);
            // SAFETY: writes the flags and the active state of a device.
            check(unsafe { (self.sym.primary_ctx_get_state)(dev, &mut flags, &mut active) })?;
            if active != 0 {
                let ctx = self.context(ordinal)?;
                // SAFETY: takes no arguments; synchronizes the current context.
                self.in_context(ctx, || check(unsafe { (self.sym.ctx_synchronize)() }))?;
            }
        }
        Ok(())
    }

    fn export_dmabuf(&self, ptr: usize, size: usize) -> Result<(OwnedFd, u64), HipError> {
        let f = self
            .sym
            .get_handle_for_address_range
            .ok_or(CUDA_ERROR_NOT_SUPPORTED)?;
        let device = self.device_of(ptr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        // The range must be aligned to the host page size.
        let page = page_size();
        let start = ptr & !(page - 1);
        let end = ptr
            .checked_add(size)
            .and_then(|e| e.checked_next_multiple_of(page))
            .ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let ctx = self.context(device)?;
        let mut fd: c_int = -1;
        self.in_context(ctx, || {
            // SAFETY: the handle is written as an int (the fd) through a
            // valid pointer; the range is page-aligned device memory.
            check(unsafe {
                f(
                    (&mut fd as *mut c_int).cast(),
                    start as CuPtr,
                    end - start,
                    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                    0,
                )
            })
        })?;
        if fd < 0 {
            return Err(CUDA_ERROR_NOT_SUPPORTED);
        }
        // SAFETY: the driver returned a new fd that nothing else owns.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, (ptr - start) as u64))
    }

    fn device_alloc(&self, device: i32, size: usize) -> Result<usize, HipError> {
        let ctx = self.context(device)?;
        self.in_context(ctx, || {
            let mut p: CuPtr = 0;
            // SAFETY: writes one device pointer.
            check(unsafe { (self.sym.mem_alloc)(&mut p, size) })?;
            Ok(p as usize)
        })
    }

    fn device_free(&self, ptr: usize) {
        let Some(ctx) = self.device_of(ptr).and_then(|d| self.context(d).ok()) else {
            return;
        };
        // SAFETY: `ptr` came from cuMemAlloc and is freed once by its owner.
        let _ = self.in_context(ctx, || check(unsafe { (self.sym.mem_free)(ptr as CuPtr) }));
    }

    fn copy_sync(&self, dst: usize, src: usize, size: usize) -> Result<(), HipError> {
        let (device, to_device) = match (self.device_of(dst), self.device_of(src)) {
            (Some(d), _) => (d, true),
            (None, Some(d)) => (d, false),
            (None, None) => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let ctx = self.context(device)?;
        self.in_context(ctx, || {
            // SAFETY: a device range and a host range of `size` bytes, both
            // allocated for the call (the caller's promise).
            check(unsafe {
                if to_device {
                    (self.sym.memcpy_htod)(dst as CuPtr, src as *const c_void, size)
                } else {
                    (self.sym.memcpy_dtoh)(dst as *mut c_void, src as CuPtr, size)
                }
            })
        })
    }
}
