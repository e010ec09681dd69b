//! Shared set-up for the client's tests: platforms made of fakes and the
//! software provider, and callbacks that talk to an in-process server peer.
#![allow(dead_code, unused_imports)]

pub use hipobj::testing::platforms::{gpu_platform, host_platform, soft, soft_topology};
use hipobj::testing::{FakeHip, ServerPeer};
use hipobj::{Config, Hipobj, Options, S3Ops};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// A server peer on its own soft device.
pub fn peer() -> Arc<ServerPeer> {
    Arc::new(ServerPeer::new(soft().open_ip(Ipv4Addr::LOCALHOST)).unwrap())
}

/// A GPU-less library on soft0.
pub fn host_lib(options: Options) -> Hipobj {
    Hipobj::with_platform(host_platform(), options, &Config::with_nic("soft0")).unwrap()
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
