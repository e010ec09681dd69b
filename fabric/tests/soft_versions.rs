//! Peers of another soft wire version (another hipobj release) are told
//! apart from peers that are not soft devices at all: each side answers or
//! reports in terms of both versions, and no request is served.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::rc;
use hipobj_fabric::soft::packet::{
    self, Hello, HelloAck, HELLO_ACK_LEN, HELLO_LEN, REQUEST_LEN, VERSION,
};
use hipobj_fabric::{Gid, WcStatus};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The responder answers a hello of another version with its own answer
/// (which names its version) and closes, before any request.
#[test]
fn a_responder_answers_another_versions_hello_with_its_own_and_closes() {
    let p = fast_provider();
    let b = End::new(&p);
    rc::to_init(&b.qp, 1, RW).unwrap();
    // The responder's device listens on the port in its QP number's upper
    // bits, on the device's address.
    let port = (b.qp.qp_num() >> 8) as u16;
    let mut c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = Hello {
        dst_qpn: b.qp.qp_num(),
        src_qpn: 0x77,
        src_gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
    }
    .encode();
    hello[2] = VERSION.wrapping_sub(1);
    assert_eq!(packet::foreign_version(&hello), Some(VERSION - 1));
    c.write_all(&hello).unwrap();
    let mut ack = [0u8; HELLO_ACK_LEN];
    c.read_exact(&mut ack).unwrap();
    assert_eq!(HelloAck::decode(&ack), Some(HelloAck::PLAIN));
    assert_eq!(ack[2], VERSION);
    // Nothing more: the connection is closed, whatever is sent.
    let _ = c.write_all(&[0u8; REQUEST_LEN]);
    let mut rest = Vec::new();
    let n = c.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "bytes after the answer: {rest:?}");
}

/// A requester whose responder answers in another version sends it no
/// request: its WRITE ends as one to a silent peer, RETRY_EXC_ERR.
#[test]
fn a_requester_answered_in_another_version_sends_no_request() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let fake = std::thread::spawn(move || {
        let mut requests = 0usize;
        // Every connection the requester opens (it retries) gets a hello
        // answer of version VERSION + 1; what follows is counted.
        accept_until(&listener, &stopped, |mut c| {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut h = [0u8; HELLO_LEN];
            if c.read_exact(&mut h).is_err() {
                return;
            }
            assert!(Hello::decode(&h).is_some());
            let mut ack = HelloAck::PLAIN.encode();
            ack[2] = VERSION.wrapping_add(1);
            c.write_all(&ack).unwrap();
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            requests += rest.len();
        });
        requests
    });
    assert_eq!(write_4k_to_local_port(port).status, WcStatus::RetryExcErr);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        fake.join().unwrap(),
        0,
        "request bytes sent after the answer"
    );
}
