//! The real GPU runtime: HIP (`libamdhip64.so`) and HSA's dma-buf export
//! (`libhsa-runtime64.so`), opened with `dlopen()` on first use and never
//! linked.
//!
//! Every symbol is resolved once into a table; HSA is optional (without it
//! dma-buf export reports `hipErrorNotSupported` and registration falls back
//! as the seed says). `HIPOBJ_HIP_LIBRARY` and `HIPOBJ_HSA_LIBRARY` name
//! other files to load (tests load a stub).

use super::event::{Event, EventApi};
use super::gpu::{
    HipError, HipEvent, HipRuntime, MemoryType, PointerAttributes, HIP_ERROR_INVALID_VALUE,
    HIP_ERROR_NOT_SUPPORTED,
};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::os::fd::{FromRawFd, OwnedFd};

/// Environment variable: the HIP runtime library to load.
pub const ENV_HIP_LIBRARY: &str = "HIPOBJ_HIP_LIBRARY";
/// Environment variable: the HSA runtime library to load.
pub const ENV_HSA_LIBRARY: &str = "HIPOBJ_HSA_LIBRARY";

const HIP_SONAMES: [&str; 3] = ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];
const HSA_SONAMES: [&str; 2] = ["libhsa-runtime64.so.1", "libhsa-runtime64.so"];

/// `hipErrorNotReady`: an event's work has not finished.
const HIP_ERROR_NOT_READY: HipError = 600;
/// `hipMemcpyDefault`: direction inferred from the pointers.
const HIP_MEMCPY_DEFAULT: c_int = 4;
/// `hipStreamPerThread`: the calling thread's default stream.
const HIP_STREAM_PER_THREAD: *mut c_void = 2 as *mut c_void;
/// `hipEventDisableTiming`.
const HIP_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// ROCm 6 renumbered `hipMemoryType`.
const ROCM6_RUNTIME_VERSION: c_int = 60_000_000;

/// `hipPointerAttribute_t` (ROCm 5 has a union of two int-sized enums in
/// place of `type`: the same layout).
#[repr(C)]
struct HipPointerAttribute {
    memory_type: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    is_managed: c_int,
    allocation_flags: c_uint,
}

type FnInt = unsafe extern "C" fn(*mut c_int) -> c_int;
type FnBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
type FnPtrAttr = unsafe extern "C" fn(*mut HipPointerAttribute, *const c_void) -> c_int;
type FnAddrRange = unsafe extern "C" fn(*mut *mut c_void, *mut usize, *mut c_void) -> c_int;
type FnHostMalloc = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int;
type FnPtr = unsafe extern "C" fn(*mut c_void) -> c_int;
type FnMemcpyAsync =
    unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> c_int;
type FnEventCreate = unsafe extern "C" fn(*mut *mut c_void, c_uint) -> c_int;
type FnEventRecord = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type FnVoid = unsafe extern "C" fn() -> c_int;
type FnExportDmabuf = unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> c_int;
type FnSetDevice = unsafe extern "C" fn(c_int) -> c_int;
type FnMalloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type FnMemcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int;

/// The resolved symbols. The libraries they came from are kept loaded for
/// as long as the table lives.
struct Symbols {
    get_device_count: FnInt,
    get_device: FnInt,
    runtime_get_version: FnInt,
    device_get_pci_bus_id: FnBusId,
    pointer_get_attributes: FnPtrAttr,
    mem_get_address_range: FnAddrRange,
    host_malloc: FnHostMalloc,
    host_free: FnPtr,
    memcpy_async: FnMemcpyAsync,
    event_create_with_flags: FnEventCreate,
    event_record: FnEventRecord,
    event_query: FnPtr,
    event_destroy: FnPtr,
    device_synchronize: FnVoid,
    set_device: FnSetDevice,
    malloc: FnMalloc,
    free: FnPtr,
    memcpy: FnMemcpy,
    export_dmabuf: Option<FnExportDmabuf>,
}

/// HIP through `dlopen()`.
pub struct SystemHip {
    sym: Symbols,
    rocm6: bool,
    _hip: Library,
    _hsa: Option<Library>,
}

impl fmt::Debug for SystemHip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemHip")
            .field("rocm6", &self.rocm6)
            .field("dmabuf_export", &self.sym.export_dmabuf.is_some())
            .finish()
    }
}

fn open(env: &str, sonames: &[&str]) -> Result<Library, String> {
    let names: Vec<String> = match std::env::var(env) {
        Ok(p) if !p.is_empty() => vec![p],
        _ => sonames.iter().map(|s| s.to_string()).collect(),
    };
    let mut last = String::new();
    for n in &names {
        // SAFETY: loading a shared library runs its initializers; these are
        // the GPU runtime's own libraries (or the file the user named).
        match unsafe { Library::new(n) } {
            Ok(l) => return Ok(l),
            Err(e) => last = format!("{n}: {e}"),
        }
    }
    Err(last)
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {{
        // SAFETY: the symbol is declared with the type of HIP's public C
        // prototype of the same name.
        let s = unsafe { $lib.get(concat!($name, "\0").as_bytes()) }
            .map_err(|e| format!("{}: {e}", $name))?;
        *s
    }};
}

impl SystemHip {
    /// Loads HIP (and HSA, if present) and resolves every symbol; an error
    /// says which library or symbol is missing.
    pub fn load() -> Result<SystemHip, String> {
        let hip = open(ENV_HIP_LIBRARY, &HIP_SONAMES)?;
        let hsa = open(ENV_HSA_LIBRARY, &HSA_SONAMES).ok();
        let export_dmabuf = hsa.as_ref().and_then(|l| {
            // SAFETY: declared with the type of HSA's public prototype.
            unsafe { l.get::<FnExportDmabuf>(b"hsa_amd_portable_export_dmabuf\0") }
                .ok()
                .map(|s| *s)
        });
        let sym = Symbols {
            get_device_count: sym!(hip, "hipGetDeviceCount"),
            get_device: sym!(hip, "hipGetDevice"),
            runtime_get_version: sym!(hip, "hipRuntimeGetVersion"),
            device_get_pci_bus_id: sym!(hip, "hipDeviceGetPCIBusId"),
            pointer_get_attributes: sym!(hip, "hipPointerGetAttributes"),
            mem_get_address_range: sym!(hip, "hipMemGetAddressRange"),
            host_malloc: sym!(hip, "hipHostMalloc"),
            host_free: sym!(hip, "hipHostFree"),
            memcpy_async: sym!(hip, "hipMemcpyAsync"),
            event_create_with_flags: sym!(hip, "hipEventCreateWithFlags"),
            event_record: sym!(hip, "hipEventRecord"),
            event_query: sym!(hip, "hipEventQuery"),
            event_destroy: sym!(hip, "hipEventDestroy"),
            device_synchronize: sym!(hip, "hipDeviceSynchronize"),
            set_device: sym!(hip, "hipSetDevice"),
            malloc: sym!(hip, "hipMalloc"),
            free: sym!(hip, "hipFree"),
            memcpy: sym!(hip, "hipMemcpy"),
            export_dmabuf,
        };
        let mut version: c_int = 0;
        // SAFETY: the function writes one int through a valid pointer.
        let rocm6 = unsafe { (sym.runtime_get_version)(&mut version) } == 0
            && version >= ROCM6_RUNTIME_VERSION;
        Ok(SystemHip {
            sym,
            rocm6,
            _hip: hip,
            _hsa: hsa,
        })
    }

    /// Whether HSA's dma-buf export was found.
    pub fn has_dmabuf_export(&self) -> bool {
        self.sym.export_dmabuf.is_some()
    }

    fn memory_type(&self, raw: c_int) -> Option<MemoryType> {
        // ROCm 6: Unregistered 0, Host 1, Device 2, Managed 3, Array 10,
        // Unified 11. ROCm 5: Host 0, Device 1, Array 2, Unified 3, Managed 4.
        match (self.rocm6, raw) {
            (true, 1) | (false, 0) => Some(MemoryType::Host),
            (true, 2) | (false, 1) => Some(MemoryType::Device),
            _ => None,
        }
    }
}

fn check(rc: c_int) -> Result<(), HipError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}

/// How HIP queries and destroys an event on the per-thread stream.
struct HipEvents {
    query: FnPtr,
    destroy: FnPtr,
}

// SAFETY: a hipEvent_t is a handle the HIP runtime lets any thread query
// (hipEventQuery is thread-safe on a shared event) and destroy; the value
// holds only function pointers.
unsafe impl EventApi for HipEvents {
    const NAME: &'static str = "SystemEvent";
    const DONE: HipError = 0;
    const NOT_READY: HipError = HIP_ERROR_NOT_READY;

    unsafe fn query(&self, event: *mut c_void) -> HipError {
        // SAFETY: the caller passes a live event created by
        // hipEventCreateWithFlags.
        unsafe { (self.query)(event) }
    }

    unsafe fn destroy(&self, event: *mut c_void) {
        // SAFETY: the caller passes a live event, destroyed exactly once.
        unsafe { (self.destroy)(event) };
    }
}

impl HipRuntime for SystemHip {
    fn device_count(&self) -> Result<i32, HipError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int through a valid pointer.
        check(unsafe { (self.sym.get_device_count)(&mut n) })?;
        Ok(n)
    }

    fn current_device(&self) -> Result<i32, HipError> {
        let mut d: c_int = 0;
        // SAFETY: writes one int through a valid pointer.
        check(unsafe { (self.sym.get_device)(&mut d) })?;
        Ok(d)
    }

    fn pci_bus_id(&self, device: i32) -> Result<String, HipError> {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer's length is passed, and HIP writes a
        // NUL-terminated string of at most that many bytes.
        check(unsafe {
            (self.sym.device_get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, device)
        })?;
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8(bytes).map_err(|_| HIP_ERROR_INVALID_VALUE)
    }

    fn pointer_attributes(&self, ptr: usize) -> Result<PointerAttributes, HipError> {
        let mut a = HipPointerAttribute {
            memory_type: -1,
            device: -1,
            device_pointer: std::ptr::null_mut(),
            host_pointer: std::ptr::null_mut(),
            is_managed: 0,
            allocation_flags: 0,
        };
        // SAFETY: `a` is a valid attribute struct; HIP only inspects `ptr`.
        check(unsafe { (self.sym.pointer_get_attributes)(&mut a, ptr as *const c_void) })?;
        let memory_type = self
            .memory_type(a.memory_type)
            .ok_or(HIP_ERROR_INVALID_VALUE)?;
        let (mut base, mut size) = (std::ptr::null_mut::<c_void>(), 0usize);
        if memory_type == MemoryType::Device {
            // SAFETY: writes a pointer and a size through valid pointers.
            check(unsafe {
                (self.sym.mem_get_address_range)(&mut base, &mut size, ptr as *mut c_void)
            })?;
        }
        Ok(PointerAttributes {
            memory_type,
            device: a.device,
            base: base as usize,
            size,
        })
    }

    fn host_alloc(&self, size: usize) -> Result<usize, HipError> {
        let mut p = std::ptr::null_mut::<c_void>();
        // SAFETY: writes one pointer; flags 0 is hipHostMallocDefault.
        check(unsafe { (self.sym.host_malloc)(&mut p, size, 0) })?;
        Ok(p as usize)
    }

    fn host_free(&self, ptr: usize) {
        // SAFETY: `ptr` came from hipHostMalloc and is freed once (the
        // caller, `Pinned`, owns it).
        unsafe { (self.sym.host_free)(ptr as *mut c_void) };
    }

    fn copy_async(
        &self,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Result<Box<dyn HipEvent>, HipError> {
        let mut event = std::ptr::null_mut::<c_void>();
        // SAFETY: writes one event handle.
        check(unsafe { (self.sym.event_create_with_flags)(&mut event, HIP_EVENT_DISABLE_TIMING) })?;
        let events = HipEvents {
            query: self.sym.event_query,
            destroy: self.sym.event_destroy,
        };
        // SAFETY: the event was just created, and nothing else owns it.
        let ev = unsafe { Event::new(event, events) };
        // SAFETY: the ranges are a registered buffer and its staging memory
        // (checked by the caller), both kept allocated until the event
        // reports completion, or forever if it never does.
        check(unsafe {
            (self.sym.memcpy_async)(
                dst as *mut c_void,
                src as *const c_void,
                size,
                HIP_MEMCPY_DEFAULT,
                HIP_STREAM_PER_THREAD,
            )
        })?;
        // SAFETY: records the live event on the per-thread stream.
        check(unsafe { (self.sym.event_record)(ev.handle(), HIP_STREAM_PER_THREAD) })?;
        Ok(Box::new(ev))
    }

    fn device_synchronize(&self) -> Result<(), HipError> {
        // SAFETY: takes no arguments.
        check(unsafe { (self.sym.device_synchronize)() })
    }

    fn export_dmabuf(&self, ptr: usize, size: usize) -> Result<(OwnedFd, u64), HipError> {
        let f = self.sym.export_dmabuf.ok_or(HIP_ERROR_NOT_SUPPORTED)?;
        let (mut fd, mut offset): (c_int, u64) = (-1, 0);
        // SAFETY: writes an fd and an offset through valid pointers.
        let rc = unsafe { f(ptr as *const c_void, size, &mut fd, &mut offset) };
        if rc != 0 || fd < 0 {
            return Err(HIP_ERROR_NOT_SUPPORTED);
        }
        // SAFETY: HSA returned a new fd that nothing else owns.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, offset))
    }

    fn device_alloc(&self, device: i32, size: usize) -> Result<usize, HipError> {
        let previous = self.current_device()?;
        // SAFETY: takes a device index; HIP checks it.
        check(unsafe { (self.sym.set_device)(device) })?;
        let mut p = std::ptr::null_mut::<c_void>();
        // SAFETY: writes one pointer.
        let rc = unsafe { (self.sym.malloc)(&mut p, size) };
        // SAFETY: restores the thread's device, which existed.
        unsafe { (self.sym.set_device)(previous) };
        check(rc)?;
        Ok(p as usize)
    }

    fn device_free(&self, ptr: usize) {
        // SAFETY: `ptr` came from hipMalloc and is freed once by its owner.
        unsafe { (self.sym.free)(ptr as *mut c_void) };
    }

    fn copy_sync(&self, dst: usize, src: usize, size: usize) -> Result<(), HipError> {
        // SAFETY: the caller passes a device range and a host range of
        // `size` bytes, both allocated for the call.
        check(unsafe {
            (self.sym.memcpy)(
                dst as *mut c_void,
                src as *const c_void,
                size,
                HIP_MEMCPY_DEFAULT,
            )
        })
    }
}
