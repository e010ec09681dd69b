//! The same-host path (cross-memory attach): it carries the payload between
//! two devices of one host, only when on, and a responder cannot aim the
//! requester's copies at another process. (Its own binary: the byte counter
//! it reads is the process's.)

#![forbid(unsafe_code)]

mod common;

use common::*;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::packet::{
    Hello, HelloAck, ReqOp, Request, Response, FLAG_CMA, HELLO_LEN, REQUEST_LEN,
};
use hipobj_fabric::{Gid, RemoteAddr, SendOp, SendWr, WcStatus};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;
use std::time::Duration;

/// The byte counter is the process's: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn the_same_host_path_carries_the_payload_only_when_on() {
    let _one = serial();
    let before = hipobj_fabric::soft::cma_bytes();
    with_path(false, || write_then_read(16 << 20));
    assert_eq!(
        hipobj_fabric::soft::cma_bytes(),
        before,
        "off: nothing moves by cross-memory attach"
    );
    with_path(true, || write_then_read(16 << 20));
    let moved = hipobj_fabric::soft::cma_bytes() - before;
    if moved == 0 {
        eprintln!("process_vm_writev/readv refused here: the TCP stream carried it all");
        return;
    }
    // The WRITE's first segment travels before the connection exists (by
    // the stream); the rest of it, and the whole READ, by the path.
    assert_eq!(moved, (16 << 20) - (1 << 20) + (16 << 20));
}

/// A fake responder that offers the same-host path naming `pid` (whoever
/// it likes), acknowledges the first WRITE segment it gets and returns the
/// second request's header.
fn second_request_to_a_responder_naming(pid: u32) -> Request {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake_qpn = (u32::from(port) << 8) | 1;
    let fake = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut h = [0u8; HELLO_LEN];
        c.read_exact(&mut h).unwrap();
        assert!(Hello::decode(&h).is_some());
        c.write_all(&HelloAck { cma: true, pid }.encode()).unwrap();
        let mut read_req = || {
            let mut b = [0u8; REQUEST_LEN];
            c.read_exact(&mut b).unwrap();
            let r = Request::decode(&b).unwrap();
            let mut payload = vec![0u8; r.seg_len as usize];
            c.read_exact(&mut payload).unwrap();
            r
        };
        let first = read_req();
        c.write_all(&Response::ack(first.psn).encode()).unwrap();
        let second = {
            let mut b = [0u8; REQUEST_LEN];
            c.read_exact(&mut b).unwrap();
            Request::decode(&b).unwrap()
        };
        // Gone: the requester's retries fail its second WRITE.
        drop(c);
        second
    });
    let p = fast_provider();
    let a = End::new(&p);
    let peer = RcPeer {
        qp_num: fake_qpn,
        gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
        lid: 0,
    };
    rc::to_init(&a.qp, 1, RW).unwrap();
    rc::connect(&a.qp, &peer, &RcParams::default()).unwrap();
    let src = a.buffer(256 << 10, RW);
    let remote = RemoteAddr {
        addr: 0x7f00_0000_0000,
        rkey: 0x42,
    };
    for id in [1, 2] {
        a.qp.post_send(&SendWr {
            wr_id: id,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 128 << 10).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap();
    }
    assert_eq!(a.wait().status, WcStatus::Success);
    fake.join().unwrap()
}

/// The requester uses the path only with the process holding the far end
/// of its connection: a responder naming another process (here process 1,
/// or this test's parent) gets its bytes over the stream, never a copy into
/// that process.
#[test]
fn a_responder_naming_another_process_is_never_copied_to() {
    let _one = serial();
    let other = std::os::unix::process::parent_id();
    for pid in [1, other] {
        let second = with_path_result(true, || second_request_to_a_responder_naming(pid));
        assert_eq!(second.op, ReqOp::Write);
        assert_eq!(second.flags & FLAG_CMA, 0, "pid {pid}: {second:?}");
        assert_eq!(second.seg_len, 128 << 10, "the payload came by the stream");
    }
    // The control: this process does hold the far end, and then the path
    // is used.
    let second = with_path_result(true, || {
        second_request_to_a_responder_naming(std::process::id())
    });
    assert_ne!(second.flags & FLAG_CMA, 0, "{second:?}");
    assert_eq!((second.seg_len, second.cma_len), (0, 128 << 10));
}

/// Small requests take the stream even where the path is open: the grant's
/// round trip would cost more than the copy saves.
#[test]
fn small_requests_take_the_stream() {
    let _one = serial();
    let before = hipobj_fabric::soft::cma_bytes();
    with_path(true, || write_then_read(32 << 10));
    assert_eq!(hipobj_fabric::soft::cma_bytes(), before);
}

fn with_path_result<R>(cma: bool, f: impl FnOnce() -> R) -> R {
    let mut out = None;
    with_path(cma, || out = Some(f()));
    out.unwrap()
}
