//! Init and its failures, buffer-map rules, and the connection pool under
//! contention and re-entrancy.

mod common;

use common::*;
use hipobj::platform::gpu::NoHip;
use hipobj::platform::system::SystemProvider;
use hipobj::platform::Platform;
use hipobj::testing::FakeTopology;
use hipobj::{Config, Hipobj, OpError, Options, S3Ops};
use std::sync::Arc;

fn build(platform: Platform, config: Config) -> Result<Hipobj, hipobj::Error> {
    Hipobj::with_platform(platform, Options::default(), &config)
}

#[test]
fn init_needs_a_gpu_or_a_nic_hint() {
    let e = build(host_platform(), Config::default()).unwrap_err();
    assert_eq!(e.op, OpError::NicNotFound);
    assert!(e.message.contains("nicHint"), "{e}");
}

#[test]
fn init_checks_its_configuration() {
    let e = build(
        host_platform(),
        Config {
            flags: 1,
            ..Config::with_nic("soft0")
        },
    )
    .unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
    let e = build(
        host_platform(),
        Config {
            gpu_device: -2,
            ..Config::with_nic("soft0")
        },
    )
    .unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
    let hip = fake_gpu();
    let e = build(
        gpu_platform(&hip, true, true),
        Config {
            gpu_device: 1,
            ..Config::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
}

#[test]
fn a_hardware_nic_hint_never_falls_back_to_the_software_provider() {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SystemProvider::new(hipobj::options::ProviderChoice::Auto).unwrap()),
        topology: Arc::new(FakeTopology::default()),
    };
    let e = build(platform, Config::with_nic("mlx5_0")).unwrap_err();
    assert_eq!(e.op, OpError::NicNotFound);
    assert!(e.message.contains("mlx5_0"), "{e}");
}

#[test]
fn the_pool_has_max_transfers_connections() {
    let lib = Hipobj::with_platform(
        host_platform(),
        Options {
            max_transfers: 5,
            ..Options::default()
        },
        &Config::with_nic("soft0"),
    )
    .unwrap();
    assert_eq!(
        (lib.instance().pool_live(), lib.instance().pool_free()),
        (5, 5)
    );
}

// `buffer_rules` and `deregistration_is_busy_while_a_call_holds_the_buffer`
// deregister through the instance's buffer map, which only the crate can
// reach: they are unit tests in `src/handle.rs`.

#[test]
fn many_threads_share_a_small_pool() {
    let lib = host_lib(Options {
        max_transfers: 2,
        ..Options::default()
    });
    let peer = peer();
    peer.put_object("obj", pattern(7, 100_000));
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (lib, peer) = (&lib, &peer);
            s.spawn(move || {
                let mut mem = vec![0u8; 100_000];
                {
                    let buf = lib.register_host(&mut mem).unwrap();
                    for i in 0..5 {
                        buf.get(0, 100_000, &mut PeerOps::get(peer, "obj")).unwrap();
                        let key = format!("t{t}-{i}");
                        buf.put(0, 100_000, &mut PeerOps::put(peer, &key)).unwrap();
                    }
                }
                assert!(mem == pattern(7, 100_000));
            });
        }
    });
    assert_eq!(lib.instance().pool_live(), 2);
    assert!(
        peer.stats
            .handshakes
            .load(std::sync::atomic::Ordering::Relaxed)
            <= 2
    );
}

/// Callbacks that start a second transfer from inside the first.
struct Reentrant<'a> {
    inner: PeerOps<'a>,
    buf: &'a hipobj::Registered<'a, 'a>,
    nested: Option<hipobj::Error>,
}

impl S3Ops for Reentrant<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        if self.nested.is_none() {
            let peer = self.inner.peer;
            self.nested = Some(
                self.buf
                    .get(0, 16, &mut PeerOps::get(peer, "obj"))
                    .unwrap_err(),
            );
        }
        self.inner.send_request(token)
    }
    fn recv_reply(&mut self, reply: &mut [u8]) -> Result<usize, i32> {
        self.inner.recv_reply(reply)
    }
}

#[test]
fn a_callback_waiting_for_its_own_connection_gets_busy() {
    let lib = host_lib(Options {
        max_transfers: 1,
        ..Options::default()
    });
    let peer = peer();
    peer.put_object("obj", pattern(8, 16));
    let mut mem = vec![0u8; 16];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = Reentrant {
            inner: PeerOps::get(&peer, "obj"),
            buf: &buf,
            nested: None,
        };
        buf.get(0, 16, &mut ops).unwrap();
        assert_eq!(ops.nested.unwrap().op, OpError::Busy);
    }
    assert_eq!(mem, pattern(8, 16));
}
