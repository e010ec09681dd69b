//! GPU buffers through the fake GPU runtime: the three registration paths
//! in hipObject's order, staging copies, their deadline and the abandoned
//! copies that follow.

use crate::common;

use common::*;
use hipobj::buffer::Registration;
use hipobj::testing::CopyBehavior;
use hipobj::{Config, Hipobj, OpError, Options, SyncDirection};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn lib_with(
    hip: &std::sync::Arc<hipobj::testing::FakeHip>,
    dmabuf: bool,
    plain: bool,
    options: Options,
) -> Hipobj {
    Hipobj::with_platform(
        gpu_platform(hip, dmabuf, plain),
        options,
        &Config::default(),
    )
    .unwrap()
}

#[test]
fn init_picks_the_nic_closest_to_the_gpu() {
    let hip = fake_gpu();
    let lib = lib_with(&hip, true, true, Options::default());
    let chosen = &lib.instance().chosen;
    assert_eq!(
        (
            chosen.gpu,
            chosen.gpu_bus_id.as_deref(),
            chosen.nic.as_str()
        ),
        (Some(0), Some("0000:41:00.0"), "soft0")
    );
}

#[test]
fn dmabuf_first_and_transfers_synchronize_the_device() {
    let hip = fake_gpu();
    let lib = lib_with(&hip, true, true, Options::default());
    let peer = peer();
    let len = 3 << 20;
    peer.put_object("obj", pattern(1, len));
    let dev = hip.alloc_device(len, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let buf = unsafe { lib.register(dev, len) }.unwrap();
    let entry = lib.instance().buffers.find(dev).unwrap();
    assert_eq!(entry.kind, Registration::GpuDirect { dmabuf: true });
    drop(entry);
    assert_eq!(
        hip.log.exports.load(Ordering::Relaxed),
        2,
        "one export per direction's region"
    );
    buf.get(0, len, &mut PeerOps::get(&peer, "obj")).unwrap();
    let mut got = vec![0u8; len];
    hip.read(dev, &mut got);
    assert!(got == pattern(1, len));
    assert_eq!(hip.log.synchronizes.load(Ordering::Relaxed), 1);
    buf.put(0, len, &mut PeerOps::put(&peer, "back")).unwrap();
    assert!(*peer.object("back").unwrap() == pattern(1, len));
    assert_eq!(
        hip.log.copies.load(Ordering::Relaxed),
        0,
        "direct buffers need no staging copy"
    );
}

#[test]
fn plain_mr_when_dmabuf_is_off() {
    let hip = fake_gpu();
    let lib = lib_with(
        &hip,
        true,
        true,
        Options {
            dmabuf: false,
            ..Options::default()
        },
    );
    let dev = hip.alloc_device(4096, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let _buf = unsafe { lib.register(dev, 4096) }.unwrap();
    assert_eq!(
        lib.instance().buffers.find(dev).unwrap().kind,
        Registration::GpuDirect { dmabuf: false }
    );
    assert_eq!(hip.log.exports.load(Ordering::Relaxed), 0);
}

#[test]
fn staging_when_the_nic_cannot_reach_the_gpu() {
    let hip = fake_gpu();
    let lib = lib_with(&hip, false, false, Options::default());
    let peer = peer();
    let len = (1 << 20) + 3;
    peer.put_object("obj", pattern(2, len));
    let dev = hip.alloc_device(len, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let buf = unsafe { lib.register(dev, len) }.unwrap();
    let entry = lib.instance().buffers.find(dev).unwrap();
    assert_eq!(entry.kind, Registration::Staged);
    assert_ne!(
        entry.token_addr(),
        dev as u64,
        "tokens name the staging buffer"
    );
    drop(entry);
    buf.get(0, len, &mut PeerOps::get(&peer, "obj")).unwrap();
    let mut got = vec![0u8; len];
    hip.read(dev, &mut got);
    assert!(got == pattern(2, len), "staging to device after GET");
    hip.write(dev, &pattern(3, len));
    buf.put(0, len, &mut PeerOps::put(&peer, "up")).unwrap();
    assert!(
        *peer.object("up").unwrap() == pattern(3, len),
        "device to staging before PUT"
    );
    assert_eq!(hip.log.copies.load(Ordering::Relaxed), 2);
    assert_eq!(hip.log.synchronizes.load(Ordering::Relaxed), 0);
    drop(buf);
    assert_eq!(
        hip.log.pinned_live.load(Ordering::Relaxed),
        0,
        "the staging buffer is freed on deregistration"
    );
}

#[test]
fn require_gpu_direct_makes_staging_a_failure() {
    let hip = fake_gpu();
    let lib = lib_with(
        &hip,
        false,
        false,
        Options {
            require_gpu_direct: true,
            ..Options::default()
        },
    );
    let dev = hip.alloc_device(4096, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let e = unsafe { lib.register(dev, 4096) }.unwrap_err();
    assert_eq!(e.op, OpError::RdmaError);
    assert!(lib.instance().buffers.is_empty());
}

#[test]
fn staging_fails_when_pinned_memory_cannot_be_had() {
    let hip = fake_gpu();
    hip.pinned_alloc.store(false, Ordering::Relaxed);
    let lib = lib_with(&hip, false, false, Options::default());
    let dev = hip.alloc_device(4096, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let e = unsafe { lib.register(dev, 4096) }.unwrap_err();
    assert_eq!(
        (e.op, e.hip_error),
        (
            OpError::RdmaError,
            hipobj::platform::gpu::HIP_ERROR_OUT_OF_MEMORY
        )
    );
}

#[test]
fn a_range_past_the_hip_allocation_is_invalid() {
    let hip = fake_gpu();
    let lib = lib_with(&hip, true, true, Options::default());
    let dev = hip.alloc_device(4096, 0);
    // SAFETY: the registration is refused before anything is registered.
    let e = unsafe { lib.register(dev + 8, 4096) }.unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
}

#[test]
fn a_copy_past_its_deadline_is_abandoned_and_its_buffer_is_busy() {
    let hip = fake_gpu();
    let opts = Options {
        stage_timeout: Duration::from_millis(30),
        ..Options::default()
    };
    let lib = lib_with(&hip, false, false, opts);
    let peer = peer();
    let dev = hip.alloc_device(4096, 0);
    // SAFETY: fake device memory lives as long as `hip`.
    let buf = unsafe { lib.register(dev, 4096) }.unwrap();
    // The copy is held until the test releases it: it misses its 30 ms
    // deadline whatever the machine's load.
    hip.set_copies(CopyBehavior::Held);
    let e = buf.put(0, 4096, &mut PeerOps::put(&peer, "x")).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError);
    assert_eq!(lib.instance().abandoned_copies(), 1);
    // While it runs: transfers, syncs, tokens and deregistration are Busy.
    assert_eq!(
        buf.get(0, 4096, &mut PeerOps::get(&peer, "x"))
            .unwrap_err()
            .op,
        OpError::Busy
    );
    assert_eq!(
        buf.sync(SyncDirection::ToHost, 0, 4096).unwrap_err().op,
        OpError::Busy
    );
    assert_eq!(
        buf.token(hipobj::Direction::Put, 0, 4096).unwrap_err().op,
        OpError::Busy
    );
    // (Deregistration of a buffer an abandoned copy holds is Busy: a unit
    // test of `abandoned.rs`, as only the crate reaches the buffer map.)
    // Once it finishes, everything works again.
    assert_eq!(hip.release_held_copies(), 1);
    hip.set_copies(CopyBehavior::Immediate);
    hip.write(dev, &pattern(9, 4096));
    buf.put(0, 4096, &mut PeerOps::put(&peer, "x")).unwrap();
    assert!(*peer.object("x").unwrap() == pattern(9, 4096));
    assert!(lib.instance().abandoned_copies() == 0);
}

#[test]
fn a_copy_that_never_finishes_keeps_its_staging_buffer_and_leaks_it_at_teardown() {
    let hip = fake_gpu();
    let opts = Options {
        stage_timeout: Duration::from_millis(20),
        ..Options::default()
    };
    let lib = lib_with(&hip, false, false, opts);
    let dev = hip.alloc_device(4096, 0);
    {
        // SAFETY: fake device memory lives as long as `hip`.
        let buf = unsafe { lib.register(dev, 4096) }.unwrap();
        hip.set_copies(CopyBehavior::Never);
        assert_eq!(
            buf.sync(SyncDirection::ToHost, 0, 4096).unwrap_err().op,
            OpError::RdmaError
        );
    }
    // The handle is gone, the entry left the map, but the staging memory
    // is still allocated: the copy could still write it.
    assert!(lib.instance().buffers.is_empty());
    assert_eq!(lib.instance().abandoned_copies(), 1);
    assert_eq!(hip.log.pinned_live.load(Ordering::Relaxed), 1);
    drop(lib);
    assert_eq!(
        hip.log.pinned_live.load(Ordering::Relaxed),
        1,
        "leaked on purpose, never freed under a running copy"
    );
}
