//! The HIP runtime through the real loader path: absent on this machine
//! (init then needs a NIC hint, as the seed says), and present as a stub
//! library compiled here, which exercises every call hipObject makes.
//!
//! One test function: it sets process-wide environment variables.

mod common;

use common::*;
use hipobj::platform::gpu::{HipRuntime, MemoryType};
use hipobj::platform::hip::{SystemHip, ENV_HIP_LIBRARY, ENV_HSA_LIBRARY};
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, OpError, Options};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

fn build_stub() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hip-stub");
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("libamdhip64.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/hip_stub.c");
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(st.success());
    so
}

#[test]
fn hip_runtime_through_the_loader() {
    // No ROCm here: loading fails with a message naming the library, and a
    // library on the system platform without a hint finds no GPU.
    std::env::set_var(ENV_HIP_LIBRARY, "/nonexistent/libamdhip64.so");
    let e = SystemHip::load().unwrap_err();
    assert!(e.contains("libamdhip64"), "{e}");
    std::env::set_var("HIPOBJ_PROVIDER", "soft");
    let e = Hipobj::new(&Config::default()).unwrap_err();
    assert_eq!(e.op, OpError::NicNotFound);
    assert!(e.message.contains("no GPU"), "{e}");
    // With a hint, the GPU-less host opens the NIC directly.
    Hipobj::new(&Config::with_nic("soft0")).unwrap();

    // The stub: every call, as hipObject makes it.
    let so = build_stub();
    std::env::set_var(ENV_HIP_LIBRARY, &so);
    std::env::set_var(ENV_HSA_LIBRARY, "/nonexistent/libhsa-runtime64.so");
    let hip = SystemHip::load().unwrap();
    assert!(!hip.has_dmabuf_export());
    assert_eq!(hip.device_count().unwrap(), 2);
    assert_eq!(hip.current_device().unwrap(), 1);
    assert_eq!(hip.pci_bus_id(1).unwrap(), "0000:c1:00.0");
    assert_eq!(hip.pci_bus_id(7).unwrap_err(), 101);
    // SAFETY: the stub library stays loaded (`hip` holds it, and dlopen
    // of the same path returns the same handle); the symbol has this type.
    let lib = unsafe { libloading::Library::new(&so) }.unwrap();
    // SAFETY: as above.
    let alloc: libloading::Symbol<unsafe extern "C" fn(usize) -> usize> =
        unsafe { lib.get(b"stubAllocDevice\0") }.unwrap();
    // SAFETY: as above.
    let syncs: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { lib.get(b"stubSyncCount\0") }.unwrap();
    // SAFETY: as above.
    let copies: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { lib.get(b"stubCopyCount\0") }.unwrap();
    // SAFETY: the stub allocates and keeps the memory for the process's life.
    let dev = unsafe { alloc(8192) };
    let a = hip.pointer_attributes(dev + 100).unwrap();
    assert_eq!(
        (a.memory_type, a.device, a.base, a.size),
        (MemoryType::Device, 1, dev, 8192)
    );
    let host = [0u8; 16];
    assert!(
        hip.pointer_attributes(host.as_ptr() as usize).is_err(),
        "malloc memory is not HIP's"
    );
    let pinned = hip.host_alloc(4096).unwrap();
    let ev = hip.copy_async(pinned, dev, 4096).unwrap();
    assert!(ev.done().unwrap());
    drop(ev);
    hip.host_free(pinned);
    hip.device_synchronize().unwrap();
    // SAFETY: stub counters.
    assert_eq!(unsafe { (syncs(), copies()) }, (1, 1));

    // End to end: the stub's GPU memory registered directly (the soft
    // provider reaches it: it is host memory) and a GET into it.
    let peer = peer();
    peer.put_object("obj", pattern(4, 8192));
    let platform = Platform {
        hip: Arc::new(hip),
        rdma: soft(),
        topology: Arc::new(soft_topology_at("0000:c1:00.0")),
    };
    let lib = Hipobj::with_platform(platform, Options::default(), &Config::default()).unwrap();
    assert_eq!(
        lib.instance().chosen.gpu_bus_id.as_deref(),
        Some("0000:c1:00.0")
    );
    {
        // SAFETY: the stub keeps `dev` allocated.
        let buf = unsafe { lib.register(dev, 8192) }.unwrap();
        buf.get(0, 8192, &mut PeerOps::get(&peer, "obj")).unwrap();
    }
    let mut got = vec![0u8; 8192];
    // SAFETY: `dev` is 8192 bytes of stub memory.
    unsafe { std::ptr::copy_nonoverlapping(dev as *const u8, got.as_mut_ptr(), 8192) };
    assert_eq!(got, pattern(4, 8192));
    // SAFETY: stub counter.
    let n = unsafe { syncs() };
    assert_eq!(n, 2, "a GPU-direct GET synchronizes the device");
}

fn soft_topology_at(bus: &str) -> hipobj::testing::FakeTopology {
    let mut t = soft_topology();
    t.nics[0].pci_bus_id = Some(bus.to_string());
    t
}
