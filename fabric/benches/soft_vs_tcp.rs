//! Soft RDMA WRITE and READ of 1 GiB against a plain TCP loopback copy of
//! the same bytes, in one run; then the round trip of a small WRITE (post
//! to completion) against a TCP ping-pong of the same size.
//! `cargo bench -p hipobj-fabric --bench soft_vs_tcp` (set `BENCH_BYTES` to
//! change the size, `BENCH_RUNS` the repetitions, `BENCH_SMALL_BYTES` and
//! `BENCH_SMALL_COUNT` the round trips). Results go in docs/benchmarks.md.

#![forbid(unsafe_code)]

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::{SoftConfig, SoftProvider};
use hipobj_fabric::{
    pattern, AccessFlags, CompletionQueue, QpCap, QpType, QueuePair, RemoteAddr, SendOp, SendWr,
    WcStatus,
};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn gib_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / (1u64 << 30) as f64
}

/// Plain TCP: one thread sends the whole buffer, another receives it into
/// a second buffer; timed until the last byte is in.
fn tcp_copy(src: &[u8], dst: &mut [u8]) -> Duration {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_nodelay(true).unwrap();
            let start = Instant::now();
            conn.read_exact(dst).unwrap();
            start
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        let start = Instant::now();
        for chunk in src.chunks(1 << 20) {
            c.write_all(chunk).unwrap();
        }
        let _ = t.join().unwrap();
        start.elapsed()
    })
}

/// Plain TCP round trips: `size` bytes one way, a 1-byte answer back
/// (what a WRITE and its ACK carry), between two threads; each timed.
fn tcp_ping_pong(size: usize, count: usize) -> Vec<Duration> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_nodelay(true).unwrap();
            let mut buf = vec![0u8; size];
            for _ in 0..count {
                conn.read_exact(&mut buf).unwrap();
                conn.write_all(&[1]).unwrap();
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        let msg = vec![7u8; size];
        let mut ack = [0u8; 1];
        (0..count)
            .map(|_| {
                let start = Instant::now();
                c.write_all(&msg).unwrap();
                c.read_exact(&mut ack).unwrap();
                start.elapsed()
            })
            .collect()
    })
}

/// The `q`-quantile of `v` (sorted here), in microseconds.
fn quantile_us(v: &mut [Duration], q: f64) -> f64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i].as_secs_f64() * 1e6
}

struct Side {
    cq: CompletionQueue,
    qp: QueuePair,
    peer: RcPeer,
}

fn side(dev: &hipobj_fabric::Device, pd: &hipobj_fabric::ProtectionDomain) -> Side {
    let cq = dev.create_cq(16).unwrap();
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq, QpCap::default())
        .unwrap();
    rc::to_init(&qp, 1, AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE).unwrap();
    let peer = RcPeer {
        qp_num: qp.qp_num(),
        gid: dev.gid_table(1).unwrap()[0].gid,
        lid: 0,
    };
    Side { cq, qp, peer }
}

/// WRITE and READ times of `bytes` between two soft devices, with the
/// same-host path on (`cma`) or off; the time of a WRITE whose destination
/// is 16 bytes off its source's alignment (a heap `Vec` of a megabyte or
/// more starts 16 bytes into its page; registered buffers here start on
/// one); and then the times of `small_count` WRITEs of `small` bytes, one
/// at a time.
fn soft(
    bytes: usize,
    runs: usize,
    cma: bool,
    small: usize,
    small_count: usize,
) -> (Duration, Duration, Duration, Vec<Duration>) {
    let p = SoftProvider::new(
        vec![Ipv4Addr::LOCALHOST],
        SoftConfig {
            cma,
            ..SoftConfig::from_env()
        },
    );
    let dev_a = p.open_ip(Ipv4Addr::LOCALHOST);
    let dev_b = p.open_ip(Ipv4Addr::LOCALHOST);
    let (pd_a, pd_b) = (dev_a.alloc_pd().unwrap(), dev_b.alloc_pd().unwrap());
    let (a, b) = (side(&dev_a, &pd_a), side(&dev_b, &pd_b));
    rc::connect(&a.qp, &b.peer, &RcParams::default()).unwrap();
    rc::connect(&b.qp, &a.peer, &RcParams::default()).unwrap();
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let mut local = pd_a.alloc_buffer(bytes, rw).unwrap();
    let mut remote = pd_b.alloc_buffer(bytes, rw).unwrap();
    pattern::fill_buffer(local.buf_mut(), 0, bytes, 2).unwrap();
    let target = RemoteAddr {
        addr: remote.mr().addr(),
        rkey: remote.mr().rkey(),
    };
    let run_len = |op: SendOp, len: usize| {
        let wr = SendWr {
            wr_id: 1,
            op,
            sg_list: vec![local.sge(0, len as u32).unwrap()],
            signaled: true,
            dc: None,
        };
        let start = Instant::now();
        a.qp.post_send(&wr).unwrap();
        let wc = a.cq.wait_one(Duration::from_secs(600)).unwrap().unwrap();
        assert_eq!(wc.status, WcStatus::Success);
        start.elapsed()
    };
    let run = |op: SendOp| run_len(op, bytes);
    let skewed = (0..runs)
        .map(|_| {
            let to = RemoteAddr {
                addr: target.addr + 16,
                rkey: target.rkey,
            };
            run_len(SendOp::RdmaWrite(to), bytes - 64)
        })
        .min()
        .unwrap();
    let write = (0..runs)
        .map(|_| run(SendOp::RdmaWrite(target)))
        .min()
        .unwrap();
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, bytes, 2).unwrap(),
        None
    );
    pattern::fill_buffer(remote.buf_mut(), 0, bytes, 3).unwrap();
    let read = (0..runs)
        .map(|_| run(SendOp::RdmaRead(target)))
        .min()
        .unwrap();
    assert_eq!(
        pattern::first_mismatch(local.buf(), 0, bytes, 3).unwrap(),
        None
    );
    let small_times = (0..small_count)
        .map(|_| run_len(SendOp::RdmaWrite(target), small.min(bytes)))
        .collect();
    drop(b);
    (write, read, skewed, small_times)
}

fn main() {
    let bytes = env_usize("BENCH_BYTES", 1 << 30);
    let runs = env_usize("BENCH_RUNS", 3);
    println!(
        "soft RDMA vs plain TCP loopback: {bytes} bytes, best of {runs} runs; CQ waiters poll for {:?} first",
        SoftConfig::from_env().cq_spin
    );

    let src = vec![0u8; bytes].into_boxed_slice();
    let mut src = src;
    pattern::fill(1, 0, &mut src);
    let mut dst = vec![0u8; bytes].into_boxed_slice();
    let tcp = (0..runs).map(|_| tcp_copy(&src, &mut dst)).min().unwrap();
    assert!(src == dst, "TCP copy corrupted data");
    drop((src, dst));

    let small = env_usize("BENCH_SMALL_BYTES", 4096);
    let small_count = env_usize("BENCH_SMALL_COUNT", 2000);
    let mut ping = tcp_ping_pong(small, small_count);
    let (write_tcp, read_tcp, skewed_tcp, mut small_tcp) =
        soft(bytes, runs, false, small, small_count);
    let (write, read, skewed, mut small_cma) = soft(bytes, runs, true, small, small_count);
    let cma = hipobj_fabric::soft::cma_bytes() > 0;

    println!();
    println!("| path | time (s) | GiB/s | ratio to TCP |");
    println!("|---|---|---|---|");
    for (name, d) in [
        ("plain TCP loopback copy", tcp),
        ("soft RDMA WRITE, TCP stream", write_tcp),
        ("soft RDMA READ, TCP stream", read_tcp),
        (
            "soft RDMA WRITE, TCP stream, destination 16 bytes off",
            skewed_tcp,
        ),
        ("soft RDMA WRITE, same-host path", write),
        ("soft RDMA READ, same-host path", read),
        (
            "soft RDMA WRITE, same-host path, destination 16 bytes off",
            skewed,
        ),
    ] {
        println!(
            "| {name} | {:.3} | {:.2} | {:.2} |",
            d.as_secs_f64(),
            gib_per_s(bytes, d),
            tcp.as_secs_f64() / d.as_secs_f64()
        );
    }
    println!();
    println!("{small_count} round trips of {small} bytes, one at a time:");
    println!();
    println!("| path | p50 (µs) | p99 (µs) | p50 ratio to TCP |");
    println!("|---|---|---|---|");
    let ping_p50 = quantile_us(&mut ping, 0.5);
    for (name, v) in [
        ("TCP ping-pong (the bytes, a 1-byte answer)", &mut ping),
        ("soft RDMA WRITE to completion, TCP stream", &mut small_tcp),
        (
            "soft RDMA WRITE to completion, same-host path on",
            &mut small_cma,
        ),
    ] {
        let p50 = quantile_us(v, 0.5);
        println!(
            "| {name} | {p50:.1} | {:.1} | {:.2} |",
            quantile_us(v, 0.99),
            p50 / ping_p50
        );
    }
    if !cma {
        println!("(the kernel refused cross-memory attach here: the same-host rows ran on the TCP stream)");
    }
}
