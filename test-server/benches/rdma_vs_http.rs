//! 1 GiB GET and PUT through the test server by RDMA (software provider)
//! against the same through plain HTTP, in one run, and the server's peak
//! memory during a 4 GiB RDMA GET. Results go in docs/benchmarks.md.
//!
//! `cargo bench -p hipobj-test-server --bench rdma_vs_http`
//! (`BENCH_BYTES`, `BENCH_BIG_BYTES`, `BENCH_RUNS` change the sizes and runs).

#![forbid(unsafe_code)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use http::Method;
use std::time::{Duration, Instant};

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
    let plain_put = best(runs, || {
        let body = mem.clone();
        let t = Instant::now();
        let a = s3.send(Method::PUT, "/bench/plain", &[], body, true);
        assert!(a.status.is_success());
        t.elapsed()
    });
    let plain_get = best(runs, || {
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
        let put = best(runs, || {
            let t = Instant::now();
            buf.put(0, bytes, &mut RdmaOps::new(&s3, Method::PUT, "/bench/rdma"))
                .unwrap();
            t.elapsed()
        });
        let get = best(runs, || {
            let t = Instant::now();
            buf.get(0, bytes, &mut RdmaOps::new(&s3, Method::GET, "/bench/rdma"))
                .unwrap();
            t.elapsed()
        });
        (put, get)
    };
    drop(mem);

    println!();
    println!("| operation | plain HTTP (GiB/s) | RDMA (GiB/s) | RDMA / HTTP |");
    println!("|---|---|---|---|");
    for (op, http, rdma) in [("PUT", plain_put, rdma_put), ("GET", plain_get, rdma_get)] {
        println!(
            "| {op} {} MiB | {:.2} | {:.2} | {:.2} |",
            bytes >> 20,
            rate(bytes, http),
            rate(bytes, rdma),
            http.as_secs_f64() / rdma.as_secs_f64()
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
