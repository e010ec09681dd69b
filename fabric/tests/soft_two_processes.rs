//! Transfers between this process and a soft peer in another process,
//! over real sockets. The peer is this test binary run again with only
//! [`qp_peer_process`] (an ignored test) selected: one soft-RDMA QP and one
//! registered buffer, driven at the verbs level (no hipObject protocol, no
//! S3) by commands on its standard input.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{
    pattern, AccessFlags, QpCap, QpState, QpType, RemoteAddr, SendOp, SendWr, WcStatus,
};
use hipobj_wire::{Token, Transport};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Set in the peer's environment: `SIZE ACCESS`, ACCESS being any of `r`,
/// `w` (remote read, remote write).
const PEER_ARGS: &str = "HIPOBJ_TEST_QP_PEER";
/// What the peer prints before its token (the test harness may print on
/// the same line first).
const TOKEN_MARK: &str = "HIPOBJ-TEST-QP-PEER-TOKEN ";

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    token: Token,
}

impl Peer {
    fn spawn(size: usize, access: &str) -> Peer {
        let entry = concat!(module_path!(), "::qp_peer_process");
        // libtest names tests without the binary's crate.
        let entry = entry.split_once("::").map_or(entry, |(_, test)| test);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                entry,
                "--nocapture",
                "--ignored",
                "--test-threads=1",
            ])
            .env(PEER_ARGS, format!("{size} {access}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let token = loop {
            let mut line = String::new();
            assert_ne!(stdout.read_line(&mut line).unwrap(), 0, "the peer ended");
            if let Some((_, t)) = line.split_once(TOKEN_MARK) {
                break Token::decode(t.trim()).unwrap();
            }
        };
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

/// The peer process (see [`Peer::spawn`]); does nothing unless
/// [`PEER_ARGS`] is set.
///
/// It opens a soft device (on `HIPOBJ_SOFT_ADDRS`, default 127.0.0.1),
/// registers a buffer, and prints an 88-hex hipObject RC token that names
/// its QP and buffer. Then it reads commands on standard input, one a line,
/// and answers each with one line:
///
/// - `connect TOKEN`: connect the QP to the peer the token names (INIT,
///   RTR, RTS); answers `ok`.
/// - `fill SEED`: fill the buffer with the test pattern for SEED; `ok`.
/// - `check SEED LEN`: compare the first LEN bytes with the pattern;
///   `match` or `mismatch OFFSET`.
/// - `state`: the QP's state (`Init`, `Rts`, `Err`, ...).
/// - `quit`.
#[test]
#[ignore = "the peer process of this module's tests, started by them"]
fn qp_peer_process() {
    let Ok(args) = std::env::var(PEER_ARGS) else {
        return;
    };
    if let Err(e) = qp_peer(&args) {
        panic!("qp peer: {e}");
    }
}

fn qp_peer(args: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut args = args.split_whitespace();
    let size: usize = args.next().ok_or("no SIZE")?.parse()?;
    let access_arg = args.next().unwrap_or("rw");
    let mut access = AccessFlags::LOCAL_WRITE;
    if access_arg.contains('r') {
        access |= AccessFlags::REMOTE_READ;
    }
    if access_arg.contains('w') {
        access |= AccessFlags::REMOTE_WRITE;
    }
    let provider = SoftProvider::from_env()?;
    let name = provider
        .device_names()?
        .first()
        .cloned()
        .ok_or("no soft device")?;
    let dev = hipobj_fabric::Device::open(&provider, &name)?;
    let gid = dev.gid_table(1)?[0].gid;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(16)?;
    let qp = pd.create_qp(QpType::Rc, &cq, &cq, QpCap::default())?;
    rc::to_init(&qp, 1, AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE)?;
    let mut buf = pd.alloc_buffer(size, access)?;
    let token = Token {
        transport: Transport::Rc,
        qp_num: qp.qp_num(),
        gid,
        rkey: buf.mr().rkey(),
        addr: buf.mr().addr(),
        len: size as u64,
        port: 1,
        lid: 0,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{TOKEN_MARK}{}", token.encode())?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut w = line.split_whitespace();
        let reply = match (w.next(), w.next(), w.next()) {
            (Some("connect"), Some(t), None) => {
                let peer = Token::decode(t)?;
                let p = RcPeer {
                    qp_num: peer.qp_num,
                    gid: peer.gid,
                    lid: peer.lid,
                };
                rc::connect(&qp, &p, &RcParams::default())?;
                "ok".to_string()
            }
            (Some("fill"), Some(seed), None) => {
                pattern::fill_buffer(buf.buf_mut(), 0, size, seed.parse()?)?;
                "ok".to_string()
            }
            (Some("check"), Some(seed), Some(len)) => {
                match pattern::first_mismatch(buf.buf(), 0, len.parse()?, seed.parse()?)? {
                    None => "match".to_string(),
                    Some(at) => format!("mismatch {at}"),
                }
            }
            (Some("state"), None, None) => format!("{:?}", qp.state()?),
            (Some("quit"), None, None) => break,
            _ => format!("error: unknown command {line:?}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
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
