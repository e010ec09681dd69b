//! A server peer in its own process, for tests of the C API and of other
//! clients: it plays the server's part of the RDMA protocol over the soft
//! provider (see `hipobj::testing::ServerPeer`), driven by a line protocol
//! on TCP in place of S3.
//!
//! Not an S3 server (that is `hipobj-test-server`, the reference server)
//! and not a bare verbs peer (`hipobj-soft-qp-peer`): the hipObject RDMA
//! protocol's server side with a line protocol for the requests. Built only
//! with the `testing` feature, as the crate's tests build it.
//!
//! It listens on 127.0.0.1 (port from the first argument, or any) and
//! prints `PORT <n>` on its first line. Each connection sends lines:
//!
//! - `GET <key> <token>`, `PUT <key> <token>`, `HEAD <key> <token>`: one
//!   S3 request carrying `x-amz-rdma-token`; the answer is the
//!   `x-amz-rdma-reply` value.
//! - `SEED <key> <seed> <len>`: store an object of `len` bytes of the test
//!   pattern for `seed`; answers `ok`.
//! - `CHECK <key> <seed> <len>`: `match`, `mismatch <offset>`, or `missing`.
//! - `FORGET`: forget every connected pair (as a restart would); `ok`.
//! - `DECLINE 0|1`: answer every request with 501 or not; `ok`.

#![forbid(unsafe_code)]

use hipobj::testing::ServerPeer;
use hipobj_fabric::pattern;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn main() {
    if let Err(e) = run() {
        eprintln!("hipobj-line-server: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = std::env::args()
        .nth(1)
        .map(|p| p.parse())
        .transpose()?
        .unwrap_or(0);
    let provider = SoftProvider::from_env()?;
    let name = provider
        .device_names()?
        .first()
        .cloned()
        .ok_or("no soft device")?;
    let peer = Arc::new(ServerPeer::new(hipobj_fabric::Device::open(
        &provider, &name,
    )?)?);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    println!("PORT {}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        let conn = conn?;
        let peer = peer.clone();
        std::thread::spawn(move || {
            if let Err(e) = serve(&peer, conn) {
                eprintln!("hipobj-line-server: connection: {e}");
            }
        });
    }
    Ok(())
}

fn serve(peer: &ServerPeer, conn: TcpStream) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    for line in BufReader::new(conn).lines() {
        let line = line?;
        let w: Vec<&str> = line.split_whitespace().collect();
        let answer = match w.as_slice() {
            [m @ ("GET" | "PUT" | "HEAD"), key, token] => peer.serve(m, key, token),
            ["SEED", key, seed, len] => match (seed.parse::<u64>(), len.parse::<usize>()) {
                (Ok(seed), Ok(len)) if len <= 1 << 30 => {
                    let mut v = vec![0u8; len];
                    pattern::fill(seed, 0, &mut v);
                    peer.put_object(key, v);
                    "ok".into()
                }
                _ => "error: bad SEED".into(),
            },
            ["CHECK", key, seed, len] => {
                match (peer.object(key), seed.parse::<u64>(), len.parse::<usize>()) {
                    (None, _, _) => "missing".into(),
                    (Some(obj), Ok(seed), Ok(len)) => {
                        let mut want = vec![0u8; len];
                        pattern::fill(seed, 0, &mut want);
                        if obj.len() < len {
                            format!("mismatch {}", obj.len())
                        } else {
                            match want.iter().zip(obj.iter()).position(|(a, b)| a != b) {
                                None => "match".into(),
                                Some(i) => format!("mismatch {i}"),
                            }
                        }
                    }
                    _ => "error: bad CHECK".into(),
                }
            }
            ["FORGET"] => {
                peer.forget_pairs();
                "ok".into()
            }
            ["DECLINE", v] => {
                peer.decline.store(*v == "1", Ordering::Relaxed);
                "ok".into()
            }
            _ => format!("error: unknown command {:?}", w.first().unwrap_or(&"")),
        };
        writeln!(out, "{answer}")?;
    }
    Ok(())
}
