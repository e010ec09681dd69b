//! End-to-end harness: the test server as a process, a signing HTTP client,
//! and the client library's callbacks over real S3 requests. All of it is
//! `hipobj-testkit`'s; this module names this package's binary.
#![allow(dead_code, unused_imports)]

use std::ops::{Deref, DerefMut};
use std::path::Path;

pub use hipobj_testkit::{
    assert_absent, assert_error, assert_object, client, crc64nvme_b64, free_port, handshake,
    pattern, spawn_child, stop_child, wait_ready, xml_field, Answer, RdmaOps, ServerProc, AK,
    CHILD_READY, CHILD_ROLE, REGION, S3, SK,
};

/// `hipobj-test-server PORT` in its own process (a [`ServerProc`]: `url`,
/// `port`, `pid()`, `peak_rss()`, `alive()`, `healthy()`, `stop()`;
/// stopped on drop, its store's directory removed).
#[derive(Debug)]
pub struct Server(ServerProc);

impl Server {
    /// Starts the test server on `port` (0: any free one) and waits until
    /// it has said where it listens.
    pub fn start(port: u16) -> Server {
        Server(hipobj_testkit::test_server(
            Path::new(env!("CARGO_BIN_EXE_hipobj-test-server")),
            &[&port.to_string()],
        ))
    }
}

impl Deref for Server {
    type Target = ServerProc;

    fn deref(&self) -> &ServerProc {
        &self.0
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut ServerProc {
        &mut self.0
    }
}
