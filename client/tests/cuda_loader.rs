//! The CUDA driver runtime through the real loader path, against a stub
//! `libcuda` compiled here (`tests/stubs/cuda_stub.c`) that logs every
//! call and can make each registration path succeed or fail: the
//! constants, every call the runtime makes, the three registration paths
//! and their fallbacks, bytes through staging, the copy deadline, HIP and
//! CUDA side by side (chosen per pointer), and no CUDA library at all.
//!
//! Each test loads its own copy of the stub (a separate file is a separate
//! `dlopen()` handle, with its own state), so the tests run in parallel.
//! Only `system_platform_with_and_without_cuda` sets environment variables.

mod common;

use common::*;
use hipobj::buffer::Registration;
use hipobj::platform::cuda::{self, SystemCuda, ENV_CUDA_LIBRARY};
use hipobj::platform::gpu::{HipRuntime, MemoryType};
use hipobj::platform::gpus::GpuRuntimes;
use hipobj::platform::hip::ENV_HIP_LIBRARY;
use hipobj::platform::Platform;
use hipobj::testing::{FakeHip, GpuView, IsDevice};
use hipobj::{Config, Hipobj, OpError, Options};
use libloading::{Library, Symbol};
use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const ALLOC: usize = 16384;

fn compile(name: &str, defines: &[&str]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-stub");
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join(format!("{name}.so"));
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/cuda_stub.c");
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror"])
        .args(defines)
        .arg("-o")
        .arg(&so)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(st.success());
    so
}

/// A fresh copy of the stub (with or without the dma-buf export symbol).
fn stub_copy(test: &str, with_export: bool) -> PathBuf {
    static FULL: OnceLock<PathBuf> = OnceLock::new();
    static OLD: OnceLock<PathBuf> = OnceLock::new();
    let built = if with_export {
        FULL.get_or_init(|| compile("libcuda-stub", &[]))
    } else {
        OLD.get_or_init(|| compile("libcuda-stub-old", &["-DNO_DMABUF_EXPORT"]))
    };
    let copy = built.with_file_name(format!("libcuda-{test}.so"));
    std::fs::copy(built, &copy).unwrap();
    copy
}

/// The test's handle on its stub: settings, log, allocations.
struct Stub {
    lib: Arc<Library>,
    path: PathBuf,
}

impl Stub {
    fn new(test: &str) -> Stub {
        Stub::with_export(test, true)
    }

    fn with_export(test: &str, with_export: bool) -> Stub {
        let path = stub_copy(test, with_export);
        // SAFETY: the stub has no initializers; SystemCuda loading the same
        // path gets this same handle.
        let lib = Arc::new(unsafe { Library::new(&path) }.unwrap());
        Stub { lib, path }
    }

    fn cuda(&self) -> SystemCuda {
        SystemCuda::load_path(&self.path).unwrap()
    }

    fn set(&self, key: &str, value: i32) {
        let k = CString::new(key).unwrap();
        // SAFETY: stub function of this type.
        let f: Symbol<unsafe extern "C" fn(*const c_char, c_int)> =
            unsafe { self.lib.get(b"stubSet\0") }.unwrap();
        // SAFETY: as above.
        unsafe { f(k.as_ptr(), value) };
    }

    fn constant(&self, name: &str) -> i32 {
        let k = CString::new(name).unwrap();
        // SAFETY: stub function of this type.
        let f: Symbol<unsafe extern "C" fn(*const c_char) -> c_int> =
            unsafe { self.lib.get(b"stubConst\0") }.unwrap();
        // SAFETY: as above.
        unsafe { f(k.as_ptr()) }
    }

    fn log(&self) -> String {
        // SAFETY: stub function of this type, returning its NUL-terminated log.
        let f: Symbol<unsafe extern "C" fn() -> *const c_char> =
            unsafe { self.lib.get(b"stubLog\0") }.unwrap();
        // SAFETY: as above.
        unsafe { CStr::from_ptr(f()) }
            .to_string_lossy()
            .into_owned()
    }

    fn clear_log(&self) {
        self.call0(b"stubLogClear\0");
    }

    fn call0(&self, name: &[u8]) {
        // SAFETY: a stub function taking nothing.
        let f: Symbol<unsafe extern "C" fn()> = unsafe { self.lib.get(name) }.unwrap();
        // SAFETY: as above.
        unsafe { f() };
    }

    fn int(&self, name: &[u8], arg: c_int) -> c_int {
        // SAFETY: a stub function of this type.
        let f: Symbol<unsafe extern "C" fn(c_int) -> c_int> =
            unsafe { self.lib.get(name) }.unwrap();
        // SAFETY: as above.
        unsafe { f(arg) }
    }

    fn ctx_depth(&self) -> i32 {
        self.int(b"stubCtxDepth\0", 0)
    }

    fn retained(&self, ordinal: i32) -> i32 {
        self.int(b"stubRetained\0", ordinal)
    }

    /// Device memory on `device`; the stub keeps it for the process's life.
    fn alloc_device(&self, size: usize, device: i32) -> usize {
        // SAFETY: a stub function of this type.
        let f: Symbol<unsafe extern "C" fn(usize, c_int) -> usize> =
            unsafe { self.lib.get(b"stubAllocDevice\0") }.unwrap();
        // SAFETY: as above.
        unsafe { f(size, device) }
    }

    fn alloc_managed(&self, size: usize) -> usize {
        // SAFETY: a stub function of this type.
        let f: Symbol<unsafe extern "C" fn(usize) -> usize> =
            unsafe { self.lib.get(b"stubAllocManaged\0") }.unwrap();
        // SAFETY: as above.
        unsafe { f(size) }
    }

    fn is_device(&self) -> IsDevice {
        let lib = self.lib.clone();
        Arc::new(move |addr, len| {
            // SAFETY: a stub function of this type; `lib` keeps it loaded.
            let f: Symbol<unsafe extern "C" fn(usize, usize) -> c_int> =
                unsafe { lib.get(b"stubIsDevice\0") }.unwrap();
            // SAFETY: as above; it only compares addresses.
            unsafe { f(addr, len) != 0 }
        })
    }
}

/// Reads stub device memory (host memory underneath).
fn device_bytes(addr: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: stub device memory is host memory the stub keeps allocated.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, v.as_mut_ptr(), len) };
    v
}

fn write_device(addr: usize, data: &[u8]) {
    // SAFETY: as in `device_bytes`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
}

fn page() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// A library over the stub's CUDA, with a NIC that reaches its memory by
/// dma-buf and/or a plain MR as told.
fn cuda_lib(stub: &Stub, dmabuf: bool, plain: bool, options: Options) -> Hipobj {
    let rdma = Arc::new(GpuView::over(soft(), stub.is_device(), dmabuf, plain));
    let mut topology = soft_topology();
    topology.nics[0].pci_bus_id = Some("0000:c1:00.0".into());
    let platform = Platform {
        hip: Arc::new(stub.cuda()),
        rdma,
        topology: Arc::new(topology),
    };
    let lib = Hipobj::with_platform(platform, options, &Config::default()).unwrap();
    stub.clear_log();
    lib
}

#[test]
fn constants_are_cuda_h_values_and_the_stubs() {
    let stub = Stub::new("constants");
    // (name, the value in cuda.h, the value cuda/abi.rs uses)
    let table: [(&str, i32, i64); 17] = [
        ("CUDA_SUCCESS", 0, cuda::CUDA_SUCCESS.into()),
        (
            "CUDA_ERROR_INVALID_VALUE",
            1,
            cuda::CUDA_ERROR_INVALID_VALUE.into(),
        ),
        (
            "CUDA_ERROR_NO_DEVICE",
            100,
            cuda::CUDA_ERROR_NO_DEVICE.into(),
        ),
        (
            "CUDA_ERROR_INVALID_DEVICE",
            101,
            cuda::CUDA_ERROR_INVALID_DEVICE.into(),
        ),
        (
            "CUDA_ERROR_NOT_READY",
            600,
            cuda::CUDA_ERROR_NOT_READY.into(),
        ),
        (
            "CUDA_ERROR_NOT_SUPPORTED",
            801,
            cuda::CUDA_ERROR_NOT_SUPPORTED.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_MEMORY_TYPE",
            2,
            cuda::CU_POINTER_ATTRIBUTE_MEMORY_TYPE.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_IS_MANAGED",
            8,
            cuda::CU_POINTER_ATTRIBUTE_IS_MANAGED.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL",
            9,
            cuda::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_RANGE_START_ADDR",
            11,
            cuda::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_RANGE_SIZE",
            12,
            cuda::CU_POINTER_ATTRIBUTE_RANGE_SIZE.into(),
        ),
        ("CU_MEMORYTYPE_HOST", 1, cuda::CU_MEMORYTYPE_HOST.into()),
        ("CU_MEMORYTYPE_DEVICE", 2, cuda::CU_MEMORYTYPE_DEVICE.into()),
        (
            "CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD",
            1,
            cuda::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD.into(),
        ),
        (
            "CU_MEMHOSTALLOC_PORTABLE",
            1,
            cuda::CU_MEMHOSTALLOC_PORTABLE.into(),
        ),
        (
            "CU_EVENT_DISABLE_TIMING",
            2,
            cuda::CU_EVENT_DISABLE_TIMING.into(),
        ),
        ("CU_STREAM_PER_THREAD", 2, cuda::CU_STREAM_PER_THREAD as i64),
    ];
    for (name, header, ours) in table {
        assert_eq!(ours, i64::from(header), "{name} in cuda/abi.rs");
        assert_eq!(stub.constant(name), header, "{name} in the stub");
    }
}

#[test]
fn every_call_through_the_loader() {
    let stub = Stub::new("calls");
    let cuda = stub.cuda();
    assert!(cuda.has_dmabuf_export());
    assert_eq!(cuda.driver_version(), 12040);
    assert!(stub.log().contains("cuInit flags=0"));
    assert_eq!(cuda.name(), "CUDA");
    assert_eq!(cuda.device_count().unwrap(), 2);
    // No current context: device 0, as cudaGetDevice; else the context's
    // device handle mapped back to its ordinal.
    assert_eq!(cuda.current_device().unwrap(), 0);
    stub.set("current", 1);
    assert_eq!(cuda.current_device().unwrap(), 1);
    // Upper-case hex from CUDA, lower case as sysfs has it.
    assert_eq!(cuda.pci_bus_id(1).unwrap(), "0000:c1:00.0");
    assert_eq!(
        cuda.pci_bus_id(7).unwrap_err(),
        cuda::CUDA_ERROR_INVALID_DEVICE
    );

    let dev = stub.alloc_device(ALLOC, 1);
    let a = cuda.pointer_attributes(dev + 100).unwrap();
    assert_eq!(
        (a.memory_type, a.device, a.base, a.size),
        (MemoryType::Device, 1, dev, ALLOC)
    );
    let host = [0u8; 16];
    assert!(cuda.pointer_attributes(host.as_ptr() as usize).is_err());
    let managed = stub.alloc_managed(ALLOC);
    assert!(
        cuda.pointer_attributes(managed).is_err(),
        "managed memory is not device memory to register"
    );

    // Pinned staging memory, in the current device's primary context.
    let pinned = cuda.host_alloc(4096).unwrap();
    assert!(stub.log().contains("cuDevicePrimaryCtxRetain dev=1"));
    assert!(stub
        .log()
        .contains("cuMemHostAlloc size=4096 flags=1 dev=1"));
    assert_eq!(
        cuda.pointer_attributes(pinned).unwrap().memory_type,
        MemoryType::Host
    );
    // Device to host and back, on the per-thread stream with an event.
    write_device(dev, &pattern(1, 4096));
    let ev = cuda.copy_async(pinned, dev, 4096).unwrap();
    assert!(ev.done().unwrap());
    drop(ev);
    assert_eq!(device_bytes(pinned, 4096), pattern(1, 4096));
    write_device(pinned, &pattern(2, 4096));
    cuda.copy_async(dev + 4096, pinned, 4096).unwrap();
    assert_eq!(device_bytes(dev + 4096, 4096), pattern(2, 4096));
    let log = stub.log();
    assert!(log.contains("cuEventCreate flags=2"), "{log}");
    assert!(
        log.contains("cuMemcpyDtoHAsync src=+0 n=4096 stream=0x2 dev=1"),
        "{log}"
    );
    assert!(
        log.contains("cuMemcpyHtoDAsync dst=+4096 n=4096 stream=0x2 dev=1"),
        "{log}"
    );
    assert!(cuda.copy_async(pinned, host.as_ptr() as usize, 16).is_err());
    cuda.host_free(pinned);
    assert!(stub.log().contains("cuMemFreeHost size=4096"));

    // dma-buf export: the page-aligned range around the pointer, and the
    // pointer's offset in it.
    let (_fd, offset) = cuda.export_dmabuf(dev + 100, 5000).unwrap();
    assert_eq!(offset, 100);
    let size = (100 + 5000usize).next_multiple_of(page());
    assert!(stub.log().contains(&format!(
        "cuMemGetHandleForAddressRange start=+0 size={size} type=1 flags=0 dev=1"
    )));

    // Synchronize: the devices whose primary context is active (1 here).
    stub.clear_log();
    cuda.device_synchronize().unwrap();
    assert_eq!(stub.log(), "cuCtxSynchronize dev=1\n");

    // Allocation and synchronous copies (register_device, hipobj cp --gpu).
    let mem = cuda.device_alloc(0, 8192).unwrap();
    assert!(stub.log().contains("cuMemAlloc size=8192 dev=0"));
    let data = pattern(3, 8192);
    cuda.copy_sync(mem, data.as_ptr() as usize, 8192).unwrap();
    let mut back = vec![0u8; 8192];
    cuda.copy_sync(back.as_mut_ptr() as usize, mem, 8192)
        .unwrap();
    assert_eq!(back, data);
    cuda.device_free(mem);
    assert!(stub.log().contains("cuMemFree size=8192 dev=0"));

    // Every push was popped; the primary contexts are released on drop.
    assert_eq!(stub.ctx_depth(), 0);
    assert_eq!((stub.retained(0), stub.retained(1)), (1, 1));
    drop(cuda);
    assert_eq!((stub.retained(0), stub.retained(1)), (0, 0));
}

#[test]
fn dmabuf_path_registers_the_export_and_a_get_lands_on_the_gpu() {
    let stub = Stub::new("dmabuf");
    let lib = cuda_lib(&stub, true, false, Options::default());
    assert_eq!(
        lib.instance().chosen.gpu_bus_id.as_deref(),
        Some("0000:41:00.0"),
        "device 0, no context current"
    );
    let dev = stub.alloc_device(ALLOC, 1);
    let peer = peer();
    peer.put_object("obj", pattern(5, 8000));
    {
        // SAFETY: the stub keeps `dev` allocated.
        let buf = unsafe { lib.register(dev + 100, 8000) }.unwrap();
        let entry = lib.instance().buffers.find(dev + 100).unwrap();
        assert_eq!(entry.kind, Registration::GpuDirect { dmabuf: true });
        assert_eq!(entry.gpu().unwrap().name(), "CUDA");
        let size = (100 + 8000usize).next_multiple_of(page());
        let log = stub.log();
        // One export per direction's region.
        let line =
            format!("cuMemGetHandleForAddressRange start=+0 size={size} type=1 flags=0 dev=1");
        assert_eq!(log.matches(&line).count(), 2, "{log}");
        buf.get(0, 8000, &mut PeerOps::get(&peer, "obj")).unwrap();
        assert!(stub.log().contains("cuCtxSynchronize dev=1"));
    }
    assert_eq!(device_bytes(dev + 100, 8000), pattern(5, 8000));
    assert_eq!(stub.ctx_depth(), 0);
}

/// `Hipobj::device_memory`: the whole range inside one device allocation
/// names its runtime and device; host memory, pinned host memory, a range
/// running past the allocation, and managed memory do not.
#[test]
fn device_memory_is_what_the_runtime_calls_device_memory() {
    let stub = Stub::new("device-memory");
    let lib = cuda_lib(&stub, false, true, Options::default());
    let dev = stub.alloc_device(ALLOC, 1);
    assert_eq!(lib.device_memory(dev, ALLOC), Some(("CUDA", 1)));
    assert_eq!(lib.device_memory(dev + 100, ALLOC - 100), Some(("CUDA", 1)));
    assert_eq!(
        lib.device_memory(dev + 100, ALLOC - 99),
        None,
        "past the end"
    );
    let host = vec![0u8; 4096];
    assert_eq!(lib.device_memory(host.as_ptr() as usize, host.len()), None);
    let managed = stub.alloc_managed(ALLOC);
    assert_eq!(lib.device_memory(managed, ALLOC), None);
}

#[test]
fn a_failed_export_falls_back_to_a_plain_mr() {
    let stub = Stub::new("export-fails");
    stub.set("export", cuda::CUDA_ERROR_NOT_SUPPORTED);
    let lib = cuda_lib(&stub, true, true, Options::default());
    let dev = stub.alloc_device(ALLOC, 0);
    // SAFETY: the stub keeps `dev` allocated.
    let buf = unsafe { lib.register(dev, ALLOC) }.unwrap();
    assert!(stub.log().contains("cuMemGetHandleForAddressRange"));
    assert_eq!(
        lib.instance().buffers.find(dev).unwrap().kind,
        Registration::GpuDirect { dmabuf: false }
    );
    let peer = peer();
    write_device(dev, &pattern(6, ALLOC));
    buf.put(0, ALLOC, &mut PeerOps::put(&peer, "up")).unwrap();
    assert_eq!(*peer.object("up").unwrap(), pattern(6, ALLOC));
}

#[test]
fn a_driver_without_the_export_symbol_falls_back_to_a_plain_mr() {
    let stub = Stub::with_export("old-driver", false);
    assert!(!stub.cuda().has_dmabuf_export());
    let lib = cuda_lib(&stub, true, true, Options::default());
    let dev = stub.alloc_device(ALLOC, 0);
    // SAFETY: the stub keeps `dev` allocated.
    let _buf = unsafe { lib.register(dev, ALLOC) }.unwrap();
    assert_eq!(
        lib.instance().buffers.find(dev).unwrap().kind,
        Registration::GpuDirect { dmabuf: false }
    );
}

#[test]
fn staging_moves_the_bytes_both_ways() {
    let stub = Stub::new("staging");
    let lib = cuda_lib(&stub, false, false, Options::default());
    let dev = stub.alloc_device(ALLOC, 1);
    let peer = peer();
    peer.put_object("obj", pattern(7, ALLOC));
    {
        // SAFETY: the stub keeps `dev` allocated.
        let buf = unsafe { lib.register(dev, ALLOC) }.unwrap();
        let entry = lib.instance().buffers.find(dev).unwrap();
        assert_eq!(entry.kind, Registration::Staged);
        assert!(
            !stub.log().contains("cuMemGetHandleForAddressRange"),
            "the NIC has no dma-buf: nothing is exported"
        );
        assert!(stub
            .log()
            .contains(&format!("cuMemHostAlloc size={ALLOC} flags=1")));
        drop(entry);
        // GET: into staging, then host to device.
        buf.get(0, ALLOC, &mut PeerOps::get(&peer, "obj")).unwrap();
        assert_eq!(device_bytes(dev, ALLOC), pattern(7, ALLOC));
        assert!(stub.log().contains(&format!(
            "cuMemcpyHtoDAsync dst=+0 n={ALLOC} stream=0x2 dev=1"
        )));
        // PUT of part of it: device to host, then the server reads staging.
        write_device(dev + 4096, &pattern(8, 8192));
        buf.put(4096, 8192, &mut PeerOps::put(&peer, "part"))
            .unwrap();
        assert_eq!(*peer.object("part").unwrap(), pattern(8, 8192));
        assert!(stub
            .log()
            .contains("cuMemcpyDtoHAsync src=+4096 n=8192 stream=0x2 dev=1"));
    }
    // Deregistered: the staging memory is freed.
    assert!(stub.log().contains(&format!("cuMemFreeHost size={ALLOC}")));
    assert_eq!(stub.ctx_depth(), 0);
}

#[test]
fn require_gpu_direct_makes_staging_a_failure() {
    let stub = Stub::new("require-direct");
    let options = Options {
        require_gpu_direct: true,
        ..Options::default()
    };
    let lib = cuda_lib(&stub, false, false, options);
    let dev = stub.alloc_device(ALLOC, 0);
    // SAFETY: the stub keeps `dev` allocated.
    let e = unsafe { lib.register(dev, ALLOC) }.unwrap_err();
    assert_eq!(e.op, OpError::RdmaError);
    assert!(e.message.contains("HIPOBJ_REQUIRE_GPU_DIRECT"), "{e}");
    assert!(!stub.log().contains("cuMemHostAlloc"));
}

#[test]
fn a_staging_copy_past_its_deadline_fails_and_holds_the_buffer() {
    let stub = Stub::new("deadline");
    let options = Options {
        stage_timeout: Duration::from_millis(20),
        ..Options::default()
    };
    let lib = cuda_lib(&stub, false, false, options);
    let dev = stub.alloc_device(ALLOC, 0);
    let peer = peer();
    peer.put_object("obj", pattern(9, ALLOC));
    // SAFETY: the stub keeps `dev` allocated.
    let buf = unsafe { lib.register(dev, ALLOC) }.unwrap();
    stub.set("pending", 1);
    // The GET moves the bytes into staging; the copy to the device never
    // finishes while the stub holds it.
    let e = buf
        .get(0, ALLOC, &mut PeerOps::get(&peer, "obj"))
        .unwrap_err();
    assert_eq!(e.op, OpError::RdmaError);
    assert!(e.message.contains("did not finish within 20 ms"), "{e}");
    let again = buf
        .get(0, ALLOC, &mut PeerOps::get(&peer, "obj"))
        .unwrap_err();
    assert_eq!(again.op, OpError::Busy);
    // The copy finishes: the buffer is usable again, with the bytes in.
    stub.call0(b"stubCompleteCopies\0");
    stub.set("pending", 0);
    assert_eq!(device_bytes(dev, ALLOC), pattern(9, ALLOC));
    buf.get(0, ALLOC, &mut PeerOps::get(&peer, "obj")).unwrap();
}

#[test]
fn hip_and_cuda_side_by_side_are_chosen_per_pointer() {
    let stub = Stub::new("mixed");
    let hip = Arc::new(FakeHip::new(&["0000:05:00.0"]));
    hip.dmabuf_export
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let gpus = Arc::new(GpuRuntimes::new(vec![hip.clone(), Arc::new(stub.cuda())]));
    assert_eq!(gpus.device_count().unwrap(), 3);
    assert_eq!(gpus.pci_bus_id(0).unwrap(), "0000:05:00.0");
    assert_eq!(
        gpus.pci_bus_id(2).unwrap(),
        "0000:c1:00.0",
        "CUDA's device 1"
    );
    assert_eq!(gpus.current_device().unwrap(), 0, "HIP's current device");
    let (stub_dev, hip_for_view) = (stub.is_device(), hip.clone());
    let either: IsDevice =
        Arc::new(move |a, l| stub_dev(a, l) || hip_for_view.is_device_range(a, l));
    let platform = Platform {
        hip: gpus.clone(),
        rdma: Arc::new(GpuView::over(soft(), either, true, false)),
        topology: Arc::new(soft_topology()),
    };
    let lib = Hipobj::with_platform(platform, Options::default(), &Config::default()).unwrap();
    stub.clear_log();

    let peer = peer();
    peer.put_object("obj", pattern(10, ALLOC));
    let cuda_mem = stub.alloc_device(ALLOC, 1);
    let hip_mem = hip.alloc_device(ALLOC, 0);
    let mut host = vec![0u8; ALLOC];
    let host_addr = host.as_mut_ptr() as usize;
    // SAFETY: both runtimes keep their memory; `host` outlives the buffers.
    let (c, h, m) = unsafe {
        (
            lib.register(cuda_mem, ALLOC).unwrap(),
            lib.register(hip_mem, ALLOC).unwrap(),
            lib.register(host_addr, ALLOC).unwrap(),
        )
    };
    let find = |a| lib.instance().buffers.find(a).unwrap();
    assert_eq!(find(cuda_mem).gpu().unwrap().name(), "CUDA");
    assert_eq!(find(hip_mem).gpu().unwrap().name(), "HIP");
    assert_eq!(find(host_addr).kind, Registration::Host);
    assert!(find(host_addr).gpu().is_none());
    assert_eq!(
        stub.log().matches("cuMemGetHandleForAddressRange").count(),
        2
    );
    assert_eq!(
        hip.log.exports.load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    for b in [&c, &h, &m] {
        b.get(0, ALLOC, &mut PeerOps::get(&peer, "obj")).unwrap();
    }
    assert_eq!(device_bytes(cuda_mem, ALLOC), pattern(10, ALLOC));
    assert_eq!(device_bytes(hip_mem, ALLOC), pattern(10, ALLOC));
    drop((c, h, m));
    assert_eq!(host, pattern(10, ALLOC));

    // Device memory the library allocates: gpuDevice 2 is CUDA's device 1;
    // reads and writes copy through CUDA.
    stub.clear_log();
    let owned = lib.register_device(2, 8192).unwrap();
    assert!(stub.log().contains("cuMemAlloc size=8192 dev=1"));
    owned.write(0, &pattern(11, 8192)).unwrap();
    assert_eq!(owned.to_vec().unwrap(), pattern(11, 8192));
    assert!(stub.log().contains("cuMemcpyHtoD dst=+0 n=8192"));
    assert!(stub.log().contains("cuMemcpyDtoH src=+0 n=8192"));
    owned.put(0, 8192, &mut PeerOps::put(&peer, "gpu")).unwrap();
    assert_eq!(*peer.object("gpu").unwrap(), pattern(11, 8192));
    drop(owned);
    assert!(stub.log().contains("cuMemFree size=8192 dev=1"));
    let e = lib.register_device(3, 8192).unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
}

#[test]
fn system_platform_with_and_without_cuda() {
    // No library, and a driver that finds no GPU: clean errors.
    let missing = Path::new("/nonexistent/libcuda.so.1");
    let e = SystemCuda::load_path(missing).unwrap_err();
    assert!(e.contains("libcuda.so.1"), "{e}");
    let stub = Stub::new("system");
    stub.set("init", cuda::CUDA_ERROR_NO_DEVICE);
    let e = SystemCuda::load_path(&stub.path).unwrap_err();
    assert!(e.contains("cuInit failed: CUDA error 100"), "{e}");
    stub.set("init", 0);

    // Neither HIP nor CUDA: init needs a NIC hint, and says so.
    std::env::set_var("HIPOBJ_PROVIDER", "soft");
    std::env::set_var(ENV_HIP_LIBRARY, "/nonexistent/libamdhip64.so");
    std::env::set_var(ENV_CUDA_LIBRARY, missing);
    let e = SystemCuda::load().unwrap_err();
    assert!(e.contains("libcuda.so.1"), "{e}");
    let e = Hipobj::new(&Config::default()).unwrap_err();
    assert_eq!(e.op, OpError::NicNotFound);
    assert!(e.message.contains("no GPU"), "{e}");
    Hipobj::new(&Config::with_nic("soft0")).unwrap();

    // CUDA on the system platform: the software provider moves bytes with
    // the CPU, so it refuses a plain MR over GPU memory and the buffer is
    // staged; a GET and a PUT through it move the bytes.
    std::env::set_var(ENV_CUDA_LIBRARY, &stub.path);
    let lib = Hipobj::new(&Config::with_nic("soft0")).unwrap();
    let dev = stub.alloc_device(ALLOC, 0);
    // SAFETY: the stub keeps `dev` allocated.
    let buf = unsafe { lib.register(dev, ALLOC) }.unwrap();
    assert_eq!(
        lib.instance().buffers.find(dev).unwrap().kind,
        Registration::Staged
    );
    let peer = peer();
    peer.put_object("obj", pattern(12, ALLOC));
    buf.get(0, ALLOC, &mut PeerOps::get(&peer, "obj")).unwrap();
    assert_eq!(device_bytes(dev, ALLOC), pattern(12, ALLOC));
    drop(buf);
    drop(lib);

    // The C ABI: hipObjBufRegister takes the CUDA pointer the same way.
    let nic = CString::new("soft0").unwrap();
    let config = hipobj::ffi::HipObjConfig {
        endpoint: std::ptr::null(),
        region: std::ptr::null(),
        access_key: std::ptr::null(),
        secret_key: std::ptr::null(),
        flags: 0,
        gpu_device: -1,
        nic_hint: nic.as_ptr(),
    };
    // SAFETY: a valid config whose strings outlive the call.
    let e = unsafe { hipobj::ffi::hipObjInit(&config) };
    assert_eq!(e.op_error, 0);
    stub.clear_log();
    let dev = stub.alloc_device(ALLOC, 1);
    // SAFETY: the stub keeps `dev` allocated.
    let e = unsafe { hipobj::ffi::hipObjBufRegister(dev as *mut _, ALLOC) };
    assert_eq!((e.op_error, e.hip_error), (0, 0));
    assert!(stub
        .log()
        .contains(&format!("cuMemHostAlloc size={ALLOC} flags=1")));
    let e = hipobj::ffi::hipObjBufDeregister(dev as *mut _);
    assert_eq!(e.op_error, 0);
    assert_eq!(hipobj::ffi::hipObjShutdown().op_error, 0);
}
