//! 1 GiB GET and PUT through the test server by RDMA (software provider)
//! against the same through plain HTTP and against a plain TCP loopback
//! copy of the same bytes, in one run, with the server's CPU seconds per
//! GiB, and the server's peak memory during a 4 GiB RDMA GET. Results go in
//! docs/benchmarks.md.
//!
//! `cargo bench -p hipobj-test-server --bench rdma_vs_http`
//! (`BENCH_BYTES`, `BENCH_BIG_BYTES`, `BENCH_RUNS` change the sizes and runs).

#![forbid(unsafe_code)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use http::Method;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Plain TCP: one thread sends the buffer in 1 MiB writes, another reads
/// it into a second buffer; timed until the last byte is in.
fn tcp_copy(src: &[u8]) -> Duration {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut dst = vec![0u8; src.len()];
    let d = std::thread::scope(|s| {
        s.spawn(|| {
            let (mut conn, _) = listener.accept().unwrap();
            conn.read_exact(&mut dst).unwrap();
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let start = Instant::now();
        for chunk in src.chunks(1 << 20) {
            c.write_all(chunk).unwrap();
        }
        drop(c);
        start
    });
    let elapsed = d.elapsed();
    assert!(dst == src, "TCP copy corrupted data");
    elapsed
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_secs(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rfind(')').map_or("", |i| &s[i + 1..]);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime, in clock ticks (100 per second on Linux).
    (t(11) + t(12)) / 100.0
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rate(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / f64::from(1u32 << 30)
}

fn best(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

fn main() {
    let bytes = env("BENCH_BYTES", 1 << 30);
    let big = env("BENCH_BIG_BYTES", 4 << 30);
    let runs = env("BENCH_RUNS", 3);
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bench");
    let lib = client();
    println!(
        "through hipobj-test-server at {}: {bytes} bytes, best of {runs}",
        server.url
    );

    let mut mem = vec![0u8; bytes];
    hipobj_fabric::pattern::fill(1, 0, &mut mem);
    let tcp = best(runs, || tcp_copy(&mem));
    let pid = server.pid();
    let mut cpu = std::collections::HashMap::new();
    let mut timed = |name: &'static str, f: &mut dyn FnMut() -> Duration| {
        let c0 = cpu_secs(pid);
        let d = best(runs, f);
        cpu.insert(
            name,
            (cpu_secs(pid) - c0) / (runs as f64 * bytes as f64 / f64::from(1u32 << 30)),
        );
        d
    };
    let plain_put = timed("http put", &mut || {
        let body = mem.clone();
        let t = Instant::now();
        let a = s3.send(Method::PUT, "/bench/plain", &[], body, true);
        assert!(a.status.is_success());
        t.elapsed()
    });
    let plain_get = timed("http get", &mut || {
        let t = Instant::now();
        let a = s3.get_plain("/bench/plain");
        assert_eq!(a.body.len(), bytes);
        t.elapsed()
    });
    let (rdma_put, rdma_get) = {
        let buf = lib.register_host(&mut mem).unwrap();
        // Connect once so both sides' pairs are warm, as an application's would be.
        buf.get(
            0,
            bytes,
            &mut RdmaOps::new(&s3, Method::GET, "/bench/plain"),
        )
        .unwrap();
        let put = timed("rdma put", &mut || {
            let t = Instant::now();
            buf.put(0, bytes, &mut RdmaOps::new(&s3, Method::PUT, "/bench/rdma"))
                .unwrap();
            t.elapsed()
        });
        let get = timed("rdma get", &mut || {
            let t = Instant::now();
            buf.get(0, bytes, &mut RdmaOps::new(&s3, Method::GET, "/bench/rdma"))
                .unwrap();
            t.elapsed()
        });
        (put, get)
    };
    drop(mem);

    println!();
    println!(
        "plain TCP loopback copy of the same bytes: {:.2} GiB/s",
        rate(bytes, tcp)
    );
    println!();
    println!("| operation | TCP copy (GiB/s) | plain HTTP (GiB/s) | HTTP / TCP | RDMA (GiB/s) | RDMA / HTTP | server CPU s/GiB, HTTP | server CPU s/GiB, RDMA |");
    println!("|---|---|---|---|---|---|---|---|");
    for (op, http, rdma) in [("PUT", plain_put, rdma_put), ("GET", plain_get, rdma_get)] {
        let lower = op.to_ascii_lowercase();
        println!(
            "| {op} {} MiB | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            bytes >> 20,
            rate(bytes, tcp),
            rate(bytes, http),
            tcp.as_secs_f64() / http.as_secs_f64(),
            rate(bytes, rdma),
            http.as_secs_f64() / rdma.as_secs_f64(),
            cpu.get(format!("http {lower}").as_str())
                .copied()
                .unwrap_or(0.0),
            cpu.get(format!("rdma {lower}").as_str())
                .copied()
                .unwrap_or(0.0),
        );
    }

    // The server's memory during a large RDMA GET stays within its staging
    // pool plus a constant.
    let before = server.peak_rss().unwrap_or(0);
    let mut mem = vec![0u8; big];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        buf.put(0, big, &mut RdmaOps::new(&s3, Method::PUT, "/bench/big"))
            .unwrap();
        let after_put = server.peak_rss().unwrap_or(0);
        let t = Instant::now();
        buf.get(0, big, &mut RdmaOps::new(&s3, Method::GET, "/bench/big"))
            .unwrap();
        let d = t.elapsed();
        let after_get = server.peak_rss().unwrap_or(0);
        println!();
        println!("| server peak RSS | MiB |");
        println!("|---|---|");
        println!("| after 1 GiB transfers | {} |", before >> 20);
        println!(
            "| after a {} GiB RDMA PUT | {} |",
            big >> 30,
            after_put >> 20
        );
        println!(
            "| after a {} GiB RDMA GET ({:.2} GiB/s) | {} |",
            big >> 30,
            rate(big, d),
            after_get >> 20
        );
    }
}
