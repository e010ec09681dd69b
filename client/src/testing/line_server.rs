//! A [`ServerPeer`] driven by a line protocol on TCP in place of S3, for
//! the C programs of `tests/c/` (which speak it) and other clients: the
//! hipObject RDMA protocol's server side, in the test's own process, over
//! the soft provider on 127.0.0.1.
//!
//! Not an S3 server (that is `hipobj-test-server`, the reference server).
//! Each connection sends lines:
//!
//! - `GET <key> <token>`, `PUT <key> <token>`, `HEAD <key> <token>`: one
//!   S3 request carrying `x-amz-rdma-token`; the answer is the
//!   `x-amz-rdma-reply` value.
//! - `SEED <key> <seed> <len>`: store an object of `len` bytes of the test
//!   pattern for `seed`; answers `ok`.
//! - `CHECK <key> <seed> <len>`: `match`, `mismatch <offset>`, or `missing`.
//! - `FORGET`: forget every connected pair (as a restart would); `ok`.
//! - `DECLINE 0|1`: answer every request with 501 or not; `ok`.

use super::ServerPeer;
use hipobj_fabric::pattern;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::{SoftConfig, SoftProvider};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Starts a line server on a soft device on 127.0.0.1 (the soft provider's
/// timing from the environment, as `SoftProvider::from_env` reads it), on
/// threads that serve until the process ends; returns its TCP port.
pub fn start() -> io::Result<u16> {
    let provider = SoftProvider::new(vec![Ipv4Addr::LOCALHOST], SoftConfig::from_env());
    let name = provider
        .device_names()
        .map_err(io::Error::other)?
        .first()
        .cloned()
        .ok_or_else(|| io::Error::other("no soft device"))?;
    let device = hipobj_fabric::Device::open(&provider, &name).map_err(io::Error::other)?;
    let peer = Arc::new(ServerPeer::new(device).map_err(io::Error::other)?);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let conn = match conn {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("line server: accept: {e}");
                    return;
                }
            };
            let peer = peer.clone();
            std::thread::spawn(move || {
                if let Err(e) = serve(&peer, conn) {
                    eprintln!("line server: connection: {e}");
                }
            });
        }
    });
    Ok(port)
}

fn serve(peer: &ServerPeer, conn: TcpStream) -> io::Result<()> {
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
