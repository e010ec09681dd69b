//! The GPU check on a real GPU (`scripts/gpu-check-cuda.sh` runs it):
//! device memory allocated through the real runtime (CUDA's
//! `libcuda.so.1`, or HIP), its dma-buf export tried, the buffer
//! registered by the path the library chooses for the software provider
//! (which moves bytes with the CPU, so GPU memory is staged), and a GET
//! and a PUT through it with the bytes checked in GPU memory.
//!
//! Ignored unless asked for (`-- --ignored`): it needs a GPU.
//! `HIPOBJ_TEST_GPU` names the runtime (`cuda`, `hip`, or `any`, the
//! default); the device is `HIPOBJ_TEST_GPU_DEVICE`, default 0.

mod common;

use common::*;
use hipobj::buffer::Registration;
use hipobj::options::ProviderChoice;
use hipobj::platform::gpu::MemoryType;
use hipobj::platform::system::{system_hip, SystemProvider};
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options};
use std::sync::Arc;

#[test]
#[ignore = "needs a GPU"]
fn get_and_put_through_gpu_memory() {
    let want = std::env::var("HIPOBJ_TEST_GPU").unwrap_or_else(|_| "any".into());
    let device: i32 = std::env::var("HIPOBJ_TEST_GPU_DEVICE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let gpus = system_hip();
    let count = gpus.device_count().expect("a GPU runtime with a device");
    let bus = gpus.pci_bus_id(device).expect("the device's PCI bus id");
    println!(
        "GPU runtime {} with {count} devices; device {device} at {bus}",
        gpus.name()
    );

    // The runtime's own calls first.
    let size = 4 << 20;
    let raw = gpus.device_alloc(device, size).expect("device memory");
    let owner = gpus.owner(raw).unwrap_or_else(|| gpus.clone());
    println!(
        "allocated {size} bytes at {raw:#x} through {}",
        owner.name()
    );
    if want != "any" {
        assert_eq!(
            owner.name().to_ascii_lowercase(),
            want,
            "the runtime asked for"
        );
    }
    let a = owner.pointer_attributes(raw + 4093).unwrap();
    assert_eq!(
        (a.memory_type, a.base, a.size),
        (MemoryType::Device, raw, size)
    );
    match owner.export_dmabuf(raw + 4093, 65536) {
        Ok((fd, offset)) => println!("dma-buf export: fd {fd:?}, offset {offset}"),
        Err(e) => println!(
            "dma-buf export failed with error {e} (documented fallback: plain MR, then staging)"
        ),
    }
    owner.device_free(raw);

    // The library over the software provider, next to the GPU.
    let mut topology = soft_topology();
    topology.nics[0].pci_bus_id = Some(bus);
    let platform = Platform {
        hip: gpus.clone(),
        rdma: Arc::new(SystemProvider::with_gpus(ProviderChoice::Soft, gpus.clone()).unwrap()),
        topology: Arc::new(topology),
    };
    let config = Config {
        gpu_device: device,
        ..Config::default()
    };
    let lib = Hipobj::with_platform(platform, Options::from_env(), &config).unwrap();
    let buf = lib.register_device(device, size).unwrap();
    let kind = lib.instance().buffers.find(buf.addr()).unwrap().kind;
    println!("registered {size} bytes of device memory as {kind:?}");
    assert_eq!(
        kind,
        Registration::Staged,
        "the software provider cannot reach GPU memory: staging"
    );

    // GET into GPU memory (whole, then an unaligned part), bytes checked
    // by copying the device memory back.
    let peer = peer();
    peer.put_object("obj", pattern(21, size));
    buf.get(0, size, &mut PeerOps::get(&peer, "obj")).unwrap();
    assert!(
        buf.to_vec().unwrap() == pattern(21, size),
        "GET bytes on the GPU"
    );
    peer.put_object("part", pattern(22, 100_000));
    buf.get(4093, 100_000, &mut PeerOps::get(&peer, "part"))
        .unwrap();
    let mut part = vec![0u8; 100_000];
    buf.read(4093, &mut part).unwrap();
    assert!(part == pattern(22, 100_000), "ranged GET bytes on the GPU");

    // PUT out of GPU memory.
    buf.write(0, &pattern(23, size)).unwrap();
    buf.put(0, size, &mut PeerOps::put(&peer, "up")).unwrap();
    assert!(
        *peer.object("up").unwrap() == pattern(23, size),
        "PUT bytes"
    );
    buf.put(4093, 100_000, &mut PeerOps::put(&peer, "up-part"))
        .unwrap();
    assert!(
        peer.object("up-part").unwrap()[..] == pattern(23, size)[4093..4093 + 100_000],
        "ranged PUT bytes"
    );
    println!("GPU check: ok ({kind:?}, {})", owner.name());
}
