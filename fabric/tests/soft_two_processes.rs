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
        Peer::spawn_as(size, access, None)
    }

    /// A peer run as user and group `uid` (this process must be root to
    /// give it another), or as this process's own.
    fn spawn_as(size: usize, access: &str, uid: Option<u32>) -> Peer {
        let entry = concat!(module_path!(), "::qp_peer_process");
        // libtest names tests without the binary's crate.
        let entry = entry.split_once("::").map_or(entry, |(_, test)| test);
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            entry,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env(PEER_ARGS, format!("{size} {access}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt as _;
            cmd.uid(uid).gid(uid);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting the peer process (as {uid:?}): {e}"));
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
/// - `write TOKEN LEN`, `read TOKEN LEN`: an RDMA WRITE of the buffer's
///   first LEN bytes to the buffer the token names (a READ of its first LEN
///   bytes into this buffer), on the connected QP; answers the completion's
///   status (`Success`, ...).
/// - `cma`: the bytes this process moved by the same-host path so far.
/// - `uid`: the user the process runs as.
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
            (Some(op @ ("write" | "read")), Some(t), Some(len)) => {
                let peer = Token::decode(t)?;
                let remote = RemoteAddr {
                    addr: peer.addr,
                    rkey: peer.rkey,
                };
                let len: u32 = len.parse()?;
                qp.post_send(&SendWr {
                    wr_id: 9,
                    op: if op == "write" {
                        SendOp::RdmaWrite(remote)
                    } else {
                        SendOp::RdmaRead(remote)
                    },
                    sg_list: vec![buf.sge(0, len)?],
                    signaled: true,
                    dc: None,
                })?;
                let wc = cq
                    .wait_one(std::time::Duration::from_secs(60))?
                    .ok_or("no completion within 60 s")?;
                format!("{:?}", wc.status)
            }
            (Some("cma"), None, None) => hipobj_fabric::soft::cma_bytes().to_string(),
            (Some("uid"), None, None) => my_uid().to_string(),
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

/// The user id of this process (of `/proc/self`: the effective one).
fn my_uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// Whether the kernel lets one process of a user copy into another of the
/// same user's (no Yama restriction) and offers what the same-host check
/// uses without privilege (`pidfd_getfd`, `SO_NETNS_COOKIE`: Linux 5.14).
fn same_host_path_possible() -> bool {
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim() == "0")
        .unwrap_or(true);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    yama && (major, minor) >= (5, 14)
}

/// Two processes of one ordinary user (`nobody` where the test runs as
/// root, which would keep the path closed): a WRITE and a READ of 1 MiB
/// between them go by the same-host path, and the bytes arrive. The path
/// once never opened between such processes (its namespace check needed
/// `CAP_NET_ADMIN`), and every test ran as root or in one process.
#[test]
fn two_processes_of_an_ordinary_user_move_bytes_by_the_same_host_path() {
    const LEN: usize = 1 << 20;
    let uid = (my_uid() == 0).then_some(65534);
    let mut a = Peer::spawn_as(LEN, "rw", uid);
    let mut b = Peer::spawn_as(LEN, "rw", uid);
    let user = uid.unwrap_or_else(my_uid).to_string();
    assert_eq!((a.ask("uid"), b.ask("uid")), (user.clone(), user));
    let (ta, tb) = (a.token.encode(), b.token.encode());
    assert_eq!(a.ask(&format!("connect {tb}")), "ok");
    assert_eq!(b.ask(&format!("connect {ta}")), "ok");

    assert_eq!(a.ask("fill 11"), "ok");
    assert_eq!(a.ask(&format!("write {tb} {LEN}")), "Success");
    assert_eq!(b.ask(&format!("check 11 {LEN}")), "match");
    let after_write: u64 = a.ask("cma").parse().unwrap();

    assert_eq!(b.ask("fill 12"), "ok");
    assert_eq!(a.ask(&format!("read {tb} {LEN}")), "Success");
    assert_eq!(a.ask(&format!("check 12 {LEN}")), "match");
    let after_read: u64 = a.ask("cma").parse().unwrap();

    if same_host_path_possible() {
        assert_eq!(after_write, LEN as u64, "the WRITE went by the stream");
        assert_eq!(after_read, 2 * LEN as u64, "the READ went by the stream");
    } else {
        eprintln!("this kernel keeps the same-host path closed; the stream carried the bytes");
        assert_eq!(after_read, 0);
    }
}
