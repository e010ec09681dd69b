//! A soft RDMA peer in its own process, for cross-process tests and for
//! other implementations to test against: one soft-RDMA QP and one
//! registered buffer, driven at the verbs level (no hipObject protocol, no
//! S3; those are `hipobj-line-server` and `hipobj-test-server`).
//!
//! It opens a soft device (on `HIPOBJ_SOFT_ADDRS`, default 127.0.0.1),
//! registers a buffer, and prints an 88-hex hipObject RC token that names
//! its QP and buffer. Then it reads commands on standard input, one a line,
//! and answers each with one line:
//!
//! - `connect TOKEN`: connect the QP to the peer the token names (INIT,
//!   RTR, RTS); answers `ok`.
//! - `fill SEED`: fill the buffer with the test pattern for SEED; `ok`.
//! - `check SEED LEN`: compare the first LEN bytes with the pattern;
//!   `match` or `mismatch OFFSET`.
//! - `state`: the QP's state (`Init`, `Rts`, `Err`, ...).
//! - `quit`.
//!
//! Usage: `hipobj-soft-qp-peer SIZE [ACCESS]`, ACCESS being any of `r`, `w`
//! (remote read, remote write; default `rw`).

#![forbid(unsafe_code)]

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{pattern, AccessFlags, QpCap, QpType};
use hipobj_wire::{Token, Transport};
use std::io::{BufRead, Write};

fn main() {
    if let Err(e) = run() {
        eprintln!("hipobj-soft-qp-peer: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let size: usize = args
        .next()
        .ok_or("usage: hipobj-soft-qp-peer SIZE [ACCESS]")?
        .parse()?;
    let access_arg = args.next().unwrap_or_else(|| "rw".into());
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
    writeln!(out, "{}", token.encode())?;
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
