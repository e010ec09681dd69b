//! The same-host path (cross-memory attach): it carries the payload between
//! two devices of one host, only when on, a responder cannot aim the
//! requester's copies at another process, and a requester that never says
//! done cannot hold a region for longer than the done timeout. (Its own
//! binary: the byte counter it reads is the process's.)

#![forbid(unsafe_code)]

mod common;

use common::*;
use hipobj_fabric::soft::packet::{
    Hello, HelloAck, ReqOp, Request, Response, FLAG_CMA, HELLO_LEN, REQUEST_LEN,
};
use hipobj_fabric::soft::testing::Gate;
use hipobj_fabric::{pattern, QpState, RemoteAddr, SendOp, SendWr, WcStatus};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    // All of it, the WRITE's first segment too: the connection, and with
    // it the responder's offer of the path, is opened before the first
    // packet is made (until 2026-12-07 that segment went by the stream).
    assert_eq!(moved, (16 << 20) + (16 << 20));
}

/// Whom a fake responder names in its hello answer.
#[derive(Clone, Copy, Debug)]
enum Named {
    /// This process id.
    Pid(u32),
    /// This process, but descriptor `.0` instead of the one that holds
    /// the far end.
    OwnFd(u32),
    /// A child process to which the responder handed its end of the
    /// connection (as the child's standard input), so that it holds the
    /// far end: of another user (uid 65534; it is not the requester's
    /// user) or, with `None`, of this one.
    HandedTo(Option<u32>),
}

/// A fake responder that offers the same-host path naming `who` (whoever
/// it likes), acknowledges the first WRITE segment it gets and returns the
/// second request's header.
fn second_request_to_a_responder_naming(who: Named) -> Request {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake_qpn = (u32::from(port) << 8) | 1;
    let fake = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut h = [0u8; HELLO_LEN];
        c.read_exact(&mut h).unwrap();
        assert!(Hello::decode(&h).is_some());
        let mut child = None;
        // The descriptor named with the process: the fake's own for a
        // named process (which does not hold it, unless it is this one),
        // the child's standard input for one it was handed to.
        let own_fd = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&c)).unwrap();
        let (pid, fd) = match who {
            Named::Pid(pid) => (pid, own_fd),
            Named::OwnFd(fd) => (std::process::id(), fd),
            Named::HandedTo(uid) => {
                use std::os::unix::process::CommandExt as _;
                let end = std::os::fd::OwnedFd::from(c.try_clone().unwrap());
                let mut cmd = std::process::Command::new("sleep");
                cmd.arg("30").stdin(std::process::Stdio::from(end));
                if let Some(uid) = uid {
                    cmd.uid(uid);
                }
                let ch = cmd
                    .spawn()
                    .expect("a child process (as uid 65534: the test runs as root)");
                let pid = ch.id();
                child = Some(ch);
                (pid, 0)
            }
        };
        c.write_all(&HelloAck { cma: true, pid, fd }.encode())
            .unwrap();
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
        if let Some(mut ch) = child {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        second
    });
    let p = fast_provider();
    let a = End::new(&p);
    connect_to_local_qpn(&a, fake_qpn);
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
        let second = with_path_result(true, || {
            second_request_to_a_responder_naming(Named::Pid(pid))
        });
        assert_eq!(second.op, ReqOp::Write);
        assert_eq!(second.flags & FLAG_CMA, 0, "pid {pid}: {second:?}");
        assert_eq!(second.seg_len, 128 << 10, "the payload came by the stream");
    }
    // This process, which does hold the far end, but naming another of
    // its descriptors (standard output, one that is not open): the stream.
    for fd in [1, 1 << 20] {
        let second = with_path_result(true, || {
            second_request_to_a_responder_naming(Named::OwnFd(fd))
        });
        assert_eq!(second.flags & FLAG_CMA, 0, "fd {fd}: {second:?}");
        assert_eq!(second.seg_len, 128 << 10, "the payload came by the stream");
    }
    // The control: this process does hold the far end, and then the path
    // is used.
    let second = with_path_result(true, || {
        second_request_to_a_responder_naming(Named::Pid(std::process::id()))
    });
    assert_ne!(second.flags & FLAG_CMA, 0, "{second:?}");
    assert_eq!((second.seg_len, second.cma_len), (0, 128 << 10));
}

/// The safety issue's finding 3, played: a client that hands its end of
/// the connection to a process of another user (a setuid program, by
/// fork+exec or SCM_RIGHTS) and names it is never copied to, though that
/// process does hold the far end: the process must run as the
/// requester's user. (Needs root to start a process as another user.)
#[test]
fn a_responder_handing_its_end_to_another_user_is_never_copied_to() {
    let _one = serial();
    if std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout != b"0\n")
        .unwrap_or(true)
    {
        eprintln!("skipped: starting a process as another user needs root");
        return;
    }
    let second = with_path_result(true, || {
        second_request_to_a_responder_naming(Named::HandedTo(Some(65534)))
    });
    assert_eq!(second.flags & FLAG_CMA, 0, "{second:?}");
    assert_eq!(second.seg_len, 128 << 10, "the payload came by the stream");
}

/// A requester that is root or holds CAP_SYS_PTRACE does not copy into
/// another process by default (the kernel would check its privilege, not
/// its client's): the bytes go by the stream; `HIPOBJ_SOFT_CMA=privileged`
/// (`cma_privileged`) lets it. The responder here is a child of the
/// requester's own user that holds the far end.
#[test]
fn a_privileged_requester_does_not_use_the_path_by_default() {
    let _one = serial();
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let mut second = None;
    with_default_privilege_rule(|| {
        second = Some(with_path_result(true, || {
            second_request_to_a_responder_naming(Named::HandedTo(None))
        }));
    });
    let second = second.unwrap();
    if root {
        assert_eq!(second.flags & FLAG_CMA, 0, "a root requester: {second:?}");
        assert_eq!(second.seg_len, 128 << 10, "the payload came by the stream");
    } else {
        assert_ne!(second.flags & FLAG_CMA, 0, "{second:?}");
    }
    // Allowed by the configuration: the path is used.
    let second = with_path_result(true, || {
        second_request_to_a_responder_naming(Named::HandedTo(None))
    });
    assert_ne!(second.flags & FLAG_CMA, 0, "{second:?}");
}

/// A WRITE with immediate takes the path too (as hipobj-rc-v2's PUT and
/// the last piece of its GET are sent): every byte by the path, the
/// receive completed with the immediate and the message's length once the
/// last byte has landed. Without a receive posted the responder answers
/// RNR before any byte lands, and the WRITE goes through once one is.
#[test]
fn a_write_with_immediate_takes_the_path_and_completes_its_receive() {
    let _one = serial();
    with_path(true, || {
        let p = default_provider();
        let (a, b) = (End::new(&p), End::new(&p));
        connect(&a, &b);
        let len = 16usize << 20;
        let mut src = a.buffer(len, RW);
        let mut remote = b.buffer(len, RW);
        pattern::fill_buffer(src.buf_mut(), 0, len, 9).unwrap();
        // A small WRITE first opens the connection (and takes the stream).
        a.qp.post_send(&write_wr(1, src.sge(0, 8).unwrap(), &remote, 0))
            .unwrap();
        assert_eq!(a.wait().status, WcStatus::Success);
        // Whether the kernel allows the copies here: a plain WRITE says.
        let before = hipobj_fabric::soft::cma_bytes();
        a.qp.post_send(&write_wr(2, src.sge(0, 1 << 20).unwrap(), &remote, 0))
            .unwrap();
        assert_eq!(a.wait().status, WcStatus::Success);
        let path_open = hipobj_fabric::soft::cma_bytes() - before == 1 << 20;
        remote.buf_mut().fill(0);
        let before = hipobj_fabric::soft::cma_bytes();
        let grants = b.stats().now().grants;
        let write_imm = write_imm_wr(3, src.sge(0, len as u32).unwrap(), &remote, 0, 0x1234_5678);
        // No receive yet: refused (RNR, retried) before any byte lands.
        a.qp.post_send(&write_imm).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(a.cq.wait_one(Duration::ZERO).unwrap().is_none());
        assert!(b.cq.wait_one(Duration::ZERO).unwrap().is_none());
        assert!(
            remote.buf().slice(0, len).unwrap().iter().all(|&x| x == 0),
            "bytes landed before a receive was posted"
        );
        assert_eq!(
            b.stats().now().grants,
            grants,
            "no range granted without a receive"
        );
        b.qp.post_recv(&hipobj_fabric::RecvWr {
            wr_id: 7,
            sg_list: Vec::new(),
        })
        .unwrap();
        let wc = a.wait();
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (3, WcStatus::Success, hipobj_fabric::WcOpcode::RdmaWrite)
        );
        let rc = b.wait();
        assert_eq!(
            (
                rc.wr_id,
                rc.status,
                rc.opcode,
                rc.imm_data,
                rc.byte_len as usize
            ),
            (
                7,
                WcStatus::Success,
                hipobj_fabric::WcOpcode::RecvRdmaWithImm,
                Some(0x1234_5678),
                len
            )
        );
        assert_eq!(
            pattern::first_mismatch(remote.buf(), 0, len, 9).unwrap(),
            None
        );
        let moved = hipobj_fabric::soft::cma_bytes() - before;
        if !path_open {
            eprintln!("process_vm_writev refused here: the TCP stream carried it all");
            return;
        }
        assert_eq!(moved, len as u64, "every byte by the path");
    });
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

/// A requester that takes a same-host grant and never says done (stopped
/// by a gate with the grant in hand): the responder keeps the region
/// registered (its deregistration waits) until the done timeout, then
/// closes the connection and lets the deregistration finish. The requester
/// finds its connection closed, copies nothing, and its WRITE, sent again,
/// meets the dead key: REM_ACCESS_ERR. Nothing is written after the
/// deregistration returned.
#[test]
fn a_requester_that_never_says_done_holds_the_region_only_until_the_done_timeout() {
    let _one = serial();
    with_path(true, || {
        // The responder's done timeout is 0.3 s instead of 30 s.
        let timeout = Duration::from_millis(300);
        let (pa, pb) = (default_provider(), provider_with_done_timeout(timeout));
        let (a, b) = (End::new(&pa), End::new(&pb));
        connect(&a, &b);
        let len = 4 << 20;
        let mut src = a.buffer(len, RW);
        pattern::fill_buffer(src.buf_mut(), 0, len, 3).unwrap();
        let remote = b.buffer(len, RW);
        let gate = Gate::requester_grant(src.mr().addr(), 1);
        let posted = Instant::now();
        a.qp.post_send(&write_wr(1, src.sge(0, len as u32).unwrap(), &remote, 0))
            .unwrap();
        // The connection opens first, so the whole WRITE is granted.
        let held = gate
            .reached(LONG)
            .expect("the requester never took a grant");
        assert_eq!((held.offset, held.len), (0, 4 << 20));
        let c = b.stats().now();
        assert_eq!((c.grants, c.grants_outstanding), (1, 1), "{c:?}");

        let (mr, mem) = remote.into_parts();
        let returned = std::thread::scope(|s| {
            let deregistration = s.spawn(move || {
                drop(mr);
                Instant::now()
            });
            b.stats()
                .wait_for(LONG, |c| c.deregistrations_waiting == 1)
                .unwrap_or_else(|c| panic!("the deregistration never waited: {c:?}"));
            deregistration.join().unwrap()
        });
        // The grant was given after `posted`, and held its region for the
        // whole done timeout from then.
        assert!(
            returned - posted >= timeout,
            "deregistration returned {:?} after the post, before the done timeout ({timeout:?})",
            returned - posted
        );
        let c = b.stats().now();
        assert_eq!(
            (
                c.grants,
                c.grants_outstanding,
                c.grants_expired,
                c.grants_failed
            ),
            (1, 0, 1, 0),
            "{c:?}"
        );
        assert_eq!(
            (c.accesses_in_flight, c.deregistrations_waiting),
            (0, 0),
            "{c:?}"
        );
        // The responder closed the connection: the requester has seen it.
        a.stats()
            .wait_for(LONG, |c| c.requester_connections_lost == 1)
            .unwrap_or_else(|c| panic!("the requester never saw its connection close: {c:?}"));
        let snapshot = mem.to_vec();

        // The requester wakes up with its stale grant.
        gate.open();
        let wc = a.wait();
        assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RemAccessErr), "{wc:?}");
        assert_eq!(a.qp.state().unwrap(), QpState::Err);
        assert_eq!(b.qp.state().unwrap(), QpState::Err);
        assert!(
            mem.to_vec() == snapshot,
            "memory changed after deregistration returned"
        );
        // Nothing ever landed: the whole WRITE was the one grant.
        assert!(snapshot.iter().all(|&x| x == 0));
    });
}

fn with_path_result<R>(cma: bool, f: impl FnOnce() -> R) -> R {
    let mut out = None;
    with_path(cma, || out = Some(f()));
    out.unwrap()
}
