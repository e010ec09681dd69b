//! Several gateways in front of one store: a client given their list moves
//! objects by RDMA through the first, and when that one dies in the middle
//! of a transfer (SIGKILL) the transfer completes through the next. The
//! gateways are `hipobj-gateway` processes in front of one s3s-fs served
//! in this process, so every gateway sees the same objects and multipart
//! uploads.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use hipobj_s3::{ClientConfig, Path, RdmaProtocol};

/// The gateway's `/metrics` text; empty when it does not answer.
fn metrics(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The sum of the samples of `name` whose labels contain `label` (all
/// with `""`).
fn sum(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// RDMA requests the gateway served (either protocol): its
/// `hipobj_requests_total{path="rdma"}`.
fn rdma_requests(url: &str) -> u64 {
    sum(&metrics(url), "hipobj_requests_total", "path=\"rdma\"")
}

/// Whether an RDMA transfer is under way through the gateway: bytes of
/// `direction` moved by the handshake flow, or a hipobj-rc-v2 data phase.
fn busy(url: &str, direction: &str) -> bool {
    let m = metrics(url);
    sum(
        &m,
        "hipobj_rdma_bytes_total",
        &format!("direction=\"{direction}\""),
    ) > 0
        || sum(&m, "hipobj_rc_v2_transfers", "") > 0
}

/// Kills the process `pid` (a gateway this test started) with SIGKILL as
/// soon as its RDMA counter of `direction` moves (a transfer is under
/// way through it), from a thread of its own; the thread answers whether
/// it did within 60 s.
fn kill_when_busy(url: String, pid: u32, direction: &'static str) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if busy(&url, direction) {
                let killed = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                return killed;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    })
}

/// Waits until the process has exited.
fn wait_dead(p: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!p.alive(), "the gateway {} is still running", p.url);
}

fn contents(reg: &hipobj::Registered<'_, '_>, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    reg.read(off, &mut v).unwrap();
    v
}

fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i}");
    }
}

fn config(
    endpoints: &[&str],
    lib: &std::sync::Arc<hipobj::Hipobj>,
    p: RdmaProtocol,
) -> ClientConfig {
    let mut cfg = auto_config(&endpoints.join(","), lib);
    cfg.rdma_protocol = p;
    cfg.require_rdma = true;
    cfg.part_size = 5 << 20;
    cfg.concurrency = 2;
    cfg.attempts = 3;
    cfg
}

/// Two gateways in front of one store; the one the client uses is killed
/// during a multipart PUT by RDMA, then (with a third gateway first in a
/// second client's list) another during parallel ranged GETs by RDMA; the
/// transfers complete through the gateway left, the bytes match the
/// store's, and plain HTTP keeps working with dead gateways first in the
/// list.
async fn one_gateway_dies_mid_transfer(protocol: RdmaProtocol, name: &str) {
    let plain = PlainS3::start();
    let mut a = gateway(&plain.url);
    let b = gateway(&plain.url);
    let mut c = gateway(&plain.url);
    let lib = lib();

    let s3 = client(config(&[&a.url, &b.url], &lib, protocol));
    assert_eq!(s3.endpoints(), [a.url.as_str(), b.url.as_str()]);
    assert_eq!(s3.endpoint(), a.url);
    let bk = bucket(&format!("failover-{name}"));
    s3.create_bucket(&bk).await.unwrap();

    // PUT: 40 MiB in 9 parts, two at a time; A dies once it has read some.
    let len = (40 << 20) + 4321;
    let data = pattern(31, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let b_before = rdma_requests(&b.url);
    let killer = kill_when_busy(a.url.clone(), a.pid(), "read");
    let put = s3.put_object(&bk, "big", &src, 0, len).await;
    assert!(
        killer.join().unwrap(),
        "gateway A was never busy: not killed"
    );
    wait_dead(&mut a);
    let put = put.unwrap_or_else(|e| panic!("the PUT did not survive A's death: {e}"));
    assert_eq!(
        (put.path, put.parts, put.bytes),
        (Path::Rdma, 9, len as u64),
        "{put:?}"
    );
    assert!(put.attempts >= 2, "no part was tried again: {put:?}");
    assert!(
        rdma_requests(&b.url) > b_before,
        "gateway B served no RDMA request: {}",
        metrics(&b.url)
    );
    assert_eq!(s3.endpoint(), b.url, "the client moved on to B");
    let stored = std::fs::read(plain.object_file(&bk, "big")).unwrap();
    assert_same("the object in the store after the PUT", &stored, &data);

    // GET: a second client with C first; C dies during ranged GETs (9 of
    // at most 5 MiB, two at a time) by RDMA.
    let s3c = client(config(&[&c.url, &b.url], &lib, protocol));
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let b_before = rdma_requests(&b.url);
    let killer = kill_when_busy(c.url.clone(), c.pid(), "write");
    let step = 5 << 20;
    let ranges: Vec<(usize, usize)> = (0..len)
        .step_by(step)
        .map(|first| (first, (first + step).min(len) - 1))
        .collect();
    let results: Vec<_> = futures::stream::iter(ranges.iter().copied())
        .map(|(first, last)| {
            let (s3c, bk, dst) = (&s3c, &bk, &dst);
            async move {
                s3c.get_object(bk, "big", dst, first, Some((first as u64, last as u64)))
                    .await
            }
        })
        .buffer_unordered(2)
        .collect()
        .await;
    assert!(
        killer.join().unwrap(),
        "gateway C was never busy: not killed"
    );
    wait_dead(&mut c);
    let mut retried = 0;
    for r in results {
        let got = r.unwrap_or_else(|e| panic!("a ranged GET did not survive C's death: {e}"));
        assert_eq!(got.path, Path::Rdma, "{got:?}");
        retried += u32::from(got.attempts > 1);
    }
    assert!(retried > 0, "no ranged GET was tried again");
    assert!(
        rdma_requests(&b.url) > b_before,
        "gateway B served no RDMA request: {}",
        metrics(&b.url)
    );
    assert_eq!(s3c.endpoint(), b.url, "the second client moved on to B");
    if protocol == RdmaProtocol::Handshake {
        // The library's pairs made with C (or A) were useless at B: B
        // answered 421 and the library connected again.
        let m = metrics(&b.url);
        assert!(
            sum(&m, "hipobj_rdma_fallbacks_total", "reconnect") > 0,
            "B never answered 421: {m}"
        );
    }
    assert_same(
        "the GETs against the store",
        &contents(&dst, 0, len),
        &stored,
    );
    // A whole-object GET by RDMA through what is left.
    let whole = s3c.get_object(&bk, "big", &dst, 0, None).await.unwrap();
    assert_eq!((whole.path, whole.bytes), (Path::Rdma, len as u64));
    assert!(whole.checksum_verified || whole.checksum_crc64nvme.is_none());

    // Plain HTTP with both dead gateways first in the list: each request
    // moves on, and the dead ones cool down.
    let mut cfg = ClientConfig::new(format!("{},{},{}", a.url, c.url, b.url), AK, SK);
    cfg.attempts = 3;
    let http = client(cfg);
    let info = http.head_object(&bk, "big").await.unwrap();
    assert_eq!(info.size, len as u64);
    assert_eq!(http.endpoint(), b.url);
    let small = bytes::Bytes::from(pattern(32, 100_000));
    let put = http
        .put_object_http(&bk, "small", small.clone())
        .await
        .unwrap();
    assert_eq!(put.path, Path::Http);
    let mut back = Vec::new();
    http.get_object_http(&bk, "small", hipobj_s3::Selection::Whole, &mut back)
        .await
        .unwrap();
    assert_same("a plain GET", &back, &small);
    // And on the RDMA client too.
    assert_eq!(s3.head_object(&bk, "small").await.unwrap().size, 100_000);
    s3.close().await;
    s3c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_flow_moves_on_when_a_gateway_dies() {
    one_gateway_dies_mid_transfer(RdmaProtocol::Handshake, "handshake").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rc_v2_moves_on_when_a_gateway_dies() {
    one_gateway_dies_mid_transfer(RdmaProtocol::V2, "v2").await;
}

/// A dead first endpoint: a new client's first request moves on at once
/// (connection refused), RDMA included, with no gateway killed mid-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_endpoint_is_passed_over() {
    let plain = PlainS3::start();
    let b = gateway(&plain.url);
    let dead = format!("http://127.0.0.1:{}", free_port());
    let lib = lib();
    let s3 = client(config(&[&dead, &b.url], &lib, RdmaProtocol::Auto));
    let bk = bucket("failover-dead-first");
    s3.create_bucket(&bk).await.unwrap();
    assert_eq!(s3.endpoint(), b.url);
    let len = (1 << 20) + 5;
    let data = pattern(33, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&bk, "k", &src, 0, len).await.unwrap();
    assert_eq!(put.path, Path::Rdma);
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&bk, "k", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, len as u64));
    assert_same("GET", &contents(&dst, 0, len), &data);
    // One endpoint and it dead: the error is the transport's, as before.
    let mut cfg = ClientConfig::new(dead.clone(), AK, SK);
    cfg.attempts = 2;
    let e = client(cfg).head_object(&bk, "k").await.unwrap_err();
    assert!(matches!(e, hipobj_s3::Error::Transport(_)), "{e}");
}
