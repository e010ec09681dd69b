//! Shared set-up for the client's tests: platforms made of fakes and the
//! software provider, and callbacks that talk to an in-process server peer.
#![allow(dead_code)]

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::{NicInfo, PortInfo};
use hipobj::platform::Platform;
use hipobj::testing::FakeHip;
use hipobj::testing::FakeTopology;
use hipobj::testing::{GpuView, ServerPeer};
use hipobj::{Config, Hipobj, Options, S3Ops};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::{SoftConfig, SoftProvider};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The software provider with timers 10x faster than hardware.
pub fn soft() -> Arc<SoftProvider> {
    Arc::new(SoftProvider::new(
        vec![Ipv4Addr::LOCALHOST],
        SoftConfig {
            timeout_scale: 0.1,
            ..SoftConfig::from_env()
        },
    ))
}

/// A server peer on its own soft device.
pub fn peer() -> Arc<ServerPeer> {
    Arc::new(ServerPeer::new(soft().open_ip(Ipv4Addr::LOCALHOST)).unwrap())
}

/// A GPU-less platform: no HIP runtime, no topology; init needs the hint.
pub fn host_platform() -> Platform {
    Platform {
        hip: Arc::new(NoHip),
        rdma: soft(),
        topology: Arc::new(FakeTopology::default()),
    }
}

/// A GPU-less library on soft0.
pub fn host_lib(options: Options) -> Hipobj {
    Hipobj::with_platform(host_platform(), options, &Config::with_nic("soft0")).unwrap()
}

/// A topology with soft0 next to the fake GPU's bus.
pub fn soft_topology() -> FakeTopology {
    FakeTopology {
        nics: vec![NicInfo {
            name: "soft0".into(),
            pci_bus_id: Some("0000:42:00.0".into()),
            numa_node: Some(0),
            vendor_id: Some(0),
            ports: vec![PortInfo {
                port: 1,
                active: true,
                link_layer: Some("Ethernet".into()),
            }],
        }],
        ..FakeTopology::default()
    }
}

/// A platform with a fake GPU whose memory the NIC reaches by dma-buf
/// and/or a plain MR, as told.
pub fn gpu_platform(hip: &Arc<FakeHip>, dmabuf: bool, plain_device_mr: bool) -> Platform {
    let rdma: Arc<dyn Provider> = soft();
    Platform {
        hip: hip.clone(),
        rdma: Arc::new(GpuView::new(rdma, hip.clone(), dmabuf, plain_device_mr)),
        topology: Arc::new(soft_topology()),
    }
}

pub fn fake_gpu() -> Arc<FakeHip> {
    Arc::new(FakeHip::new(&["0000:41:00.0"]))
}

/// The application's S3 side, talking to an in-process peer.
pub struct PeerOps<'a> {
    pub peer: &'a ServerPeer,
    pub method: &'static str,
    pub key: String,
    pub reply: Option<String>,
    pub tokens: Vec<String>,
}

impl<'a> PeerOps<'a> {
    pub fn get(peer: &'a ServerPeer, key: &str) -> PeerOps<'a> {
        PeerOps {
            peer,
            method: "GET",
            key: key.into(),
            reply: None,
            tokens: Vec::new(),
        }
    }
    pub fn put(peer: &'a ServerPeer, key: &str) -> PeerOps<'a> {
        PeerOps {
            peer,
            method: "PUT",
            key: key.into(),
            reply: None,
            tokens: Vec::new(),
        }
    }
}

impl S3Ops for PeerOps<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        self.tokens.push(token.to_string());
        self.reply = Some(self.peer.serve(self.method, &self.key, token));
        Ok(())
    }
    fn recv_reply(&mut self, reply: &mut [u8]) -> Result<usize, i32> {
        let r = self.reply.take().ok_or(-1)?;
        reply[..r.len()].copy_from_slice(r.as_bytes());
        Ok(r.len())
    }
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    hipobj_fabric::pattern::fill(seed, 0, &mut v);
    v
}

/// Waits until `done()` holds, checking it every millisecond; panics
/// naming `what` if it does not within 60 s (a hang, not a timing check:
/// the state is what the test waits for).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
