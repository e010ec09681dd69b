//! Many clients stall in the middle of their transfers at once: the
//! gateway must not spend a thread on each waiting transfer (a thread per
//! stalled client is a cheap way to exhaust a server). Waiting transfers
//! are awaited on their CQ's completion channel, on the event loop.
//!
//! Played against the real gateway binary (embedded store, software
//! provider on 127.0.0.1) by fake clients that answer the connection hello
//! and then read nothing (hostile_common).

use crate::hostile_common;

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::pattern;
use hipobj_testkit::s3::S3;
use hipobj_wire::Transport;
use hostile_common::*;
use http::Method;
use std::time::Duration;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}
const MIB: usize = 1 << 20;
const STALLED: usize = 16;

/// Threads of `pid` by name, leaving out the software provider's own
/// (`soft-*`: they stand for the NIC's queues, one set per QP, and a real
/// NIC has none); the rest are the gateway's.
fn gateway_threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| !c.starts_with("soft-"))
        .collect()
}

#[test]
fn stalled_transfers_in_flight_hold_no_thread_each() {
    let gw = gateway_with(
        bin(),
        &[
            // Long enough that the stalled transfers stay in flight for the
            // whole test.
            // Through staging (not from the mapped file): the pool's
            // buffers are what is counted here.
            "--no-store-mapping",
            "--rdma-progress-timeout",
            "120s",
            "--staging-buffers",
            "64",
            "--max-pairs-per-key",
            "64",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("stall");
    let obj = pattern(0x5, 16 * MIB);
    assert!(s3.put_plain("/stall/obj", obj).status.is_success());
    let pid = gw.pid();

    let peers: Vec<FakePeer> = (0..STALLED).map(|_| FakePeer::start(true)).collect();
    for p in &peers {
        let hs = rdma(&s3, Method::HEAD, "/stall/obj", &p.handshake_token());
        assert_eq!(hs.status, 200, "handshake: {}", hs.text());
    }
    let idle = gateway_threads(pid);
    eprintln!(
        "before the transfers: {} gateway threads {idle:?}",
        idle.len()
    );

    let url = gw.url.clone();
    let gets: Vec<_> = peers
        .iter()
        .map(|p| {
            let token = p.token(Transport::Rc, 0x7f00_0000_0000, 16 * MIB as u64, 0x1234);
            let url = url.clone();
            std::thread::spawn(move || rdma(&S3::new(&url), Method::GET, "/stall/obj", &token))
        })
        .collect();

    // Every transfer has work requests posted that cannot complete.
    assert!(
        eventually(Duration::from_secs(60), || {
            metric(&gw.url, "hipobj_staging_buffers_in_use") >= STALLED as f64
        }),
        "all {STALLED} transfers are in flight"
    );
    // Threads the store's reads used go idle and exit (tokio's blocking
    // pool keeps an idle thread 10 s); what stays must not grow with the
    // transfers waiting.
    let limit = idle.len() + 4;
    let mut now = Vec::new();
    let settled = eventually(Duration::from_secs(40), || {
        now = gateway_threads(pid);
        now.len() <= limit
    });
    assert!(
        settled,
        "with {STALLED} transfers waiting: {} gateway threads (at most {limit}): {now:?}",
        now.len()
    );
    // ... while they are still all waiting.
    assert!(metric(&gw.url, "hipobj_staging_buffers_in_use") >= STALLED as f64);
    assert_eq!(metric(&gw.url, "hipobj_rdma_pairs"), STALLED as f64);
    eprintln!(
        "while {STALLED} transfers wait: {} gateway threads",
        now.len()
    );

    // Released: the clients go away, the gateway fails the transfers and
    // takes its buffers back with their flushes.
    drop(peers);
    for g in gets {
        let a = g.join().unwrap();
        assert_eq!(a.status, 500, "a stalled GET fails: {}", a.text());
    }
    assert!(eventually(Duration::from_secs(60), || {
        metric(&gw.url, "hipobj_staging_buffers_in_use") == 0.0
    }));
    assert_eq!(
        metric(&gw.url, "hipobj_staging_buffers_quarantined_total"),
        0.0
    );
}
