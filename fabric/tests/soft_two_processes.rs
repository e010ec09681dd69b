//! Transfers between this process and a soft peer in another process,
//! over real sockets.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{pattern, QpState, RemoteAddr, SendOp, SendWr, WcStatus};
use hipobj_wire::{Token, Transport};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    token: Token,
}

impl Peer {
    fn spawn(size: usize, access: &str) -> Peer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hipobj-soft-qp-peer"))
            .args([size.to_string(), access.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let token = Token::decode(line.trim()).unwrap();
        Peer {
            child,
            stdin,
            stdout,
            token,
        }
    }

    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.wait();
    }
}

fn token_of(end: &End) -> String {
    let me = end.peer();
    Token {
        transport: Transport::Rc,
        qp_num: me.qp_num,
        gid: me.gid,
        rkey: 0,
        addr: 0,
        len: 0,
        port: 1,
        lid: 0,
    }
    .encode()
}

#[test]
fn write_and_read_across_processes_byte_exact() {
    let sizes = [1usize, 4096, 1 << 20, 256 << 20];
    let max = *sizes.iter().max().unwrap();
    let mut peer = Peer::spawn(max, "rw");
    let p = SoftProvider::default();
    let me = End::new(&p);
    let peer_qp = RcPeer {
        qp_num: peer.token.qp_num,
        gid: peer.token.gid,
        lid: 0,
    };
    assert_eq!(peer.ask(&format!("connect {}", token_of(&me))), "ok");
    rc::connect(&me.qp, &peer_qp, &RcParams::default()).unwrap();
    let mut src = me.buffer(max, RW);
    let back = me.buffer(max, RW);
    let remote = RemoteAddr {
        addr: peer.token.addr,
        rkey: peer.token.rkey,
    };
    for (i, &len) in sizes.iter().enumerate() {
        let seed = 1000 + i as u64;
        pattern::fill_buffer(src.buf_mut(), 0, len, seed).unwrap();
        me.qp
            .post_send(&SendWr {
                wr_id: 1,
                op: SendOp::RdmaWrite(remote),
                sg_list: vec![src.sge(0, len as u32).unwrap()],
                signaled: true,
                dc: None,
            })
            .unwrap();
        assert_eq!(me.wait().status, WcStatus::Success, "write of {len}");
        assert_eq!(
            peer.ask(&format!("check {seed} {len}")),
            "match",
            "write of {len}"
        );

        assert_eq!(peer.ask(&format!("fill {}", seed + 1)), "ok");
        me.qp
            .post_send(&SendWr {
                wr_id: 2,
                op: SendOp::RdmaRead(remote),
                sg_list: vec![back.sge(0, len as u32).unwrap()],
                signaled: true,
                dc: None,
            })
            .unwrap();
        assert_eq!(me.wait().status, WcStatus::Success, "read of {len}");
        assert_eq!(
            pattern::first_mismatch(back.buf(), 0, len, seed + 1).unwrap(),
            None,
            "read of {len}"
        );
    }
}

#[test]
fn peer_process_left_in_init_fails_the_requester_with_retry_exceeded() {
    let mut peer = Peer::spawn(4096, "rw");
    let p = fast_provider();
    let me = End::new(&p);
    rc::connect(
        &me.qp,
        &RcPeer {
            qp_num: peer.token.qp_num,
            gid: peer.token.gid,
            lid: 0,
        },
        &RcParams::default(),
    )
    .unwrap();
    let mut src = me.buffer(4096, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 5).unwrap();
    let remote = RemoteAddr {
        addr: peer.token.addr,
        rkey: peer.token.rkey,
    };
    me.qp
        .post_send(&SendWr {
            wr_id: 1,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 4096).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap();
    assert_eq!(me.wait().status, WcStatus::RetryExcErr);
    assert_eq!(me.qp.state().unwrap(), QpState::Err);
    assert_eq!(peer.ask("state"), "Init");
    assert_eq!(peer.ask("check 0 0"), "match");
    assert_ne!(
        peer.ask("check 5 4096"),
        "match",
        "a QP in INIT accepted data"
    );
}

#[test]
fn peer_process_refuses_a_bad_rkey_and_both_qps_go_to_error() {
    let mut peer = Peer::spawn(4096, "r");
    let p = fast_provider();
    let me = End::new(&p);
    assert_eq!(peer.ask(&format!("connect {}", token_of(&me))), "ok");
    rc::connect(
        &me.qp,
        &RcPeer {
            qp_num: peer.token.qp_num,
            gid: peer.token.gid,
            lid: 0,
        },
        &RcParams::default(),
    )
    .unwrap();
    let src = me.buffer(4096, RW);
    // The peer's region allows remote reads only.
    let remote = RemoteAddr {
        addr: peer.token.addr,
        rkey: peer.token.rkey,
    };
    me.qp
        .post_send(&SendWr {
            wr_id: 1,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 4096).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap();
    assert_eq!(me.wait().status, WcStatus::RemAccessErr);
    assert_eq!(peer.ask("state"), "Err");
}
