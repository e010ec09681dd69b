//! CRC-64/NVME: each implementation this CPU runs, over a buffer of 1 MiB
//! (in cache) and one of 64 MiB (from memory), best of five passes, with
//! one thread's memcpy of the same buffer for scale. Results in
//! docs/benchmarks.md.

use std::hint::black_box;
use std::time::Instant;

fn best_gb_s(len: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    len as f64 / best / 1e9
}

fn main() {
    println!("| buffer | implementation | GB/s |");
    println!("|---|---|---|");
    for len in [1usize << 20, 64 << 20] {
        let src: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31)).collect();
        let mut dst = vec![1u8; len];
        let label = if len == 1 << 20 { "1 MiB" } else { "64 MiB" };
        let copy = best_gb_s(len, || {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        });
        println!("| {label} | memcpy, one thread | {copy:.1} |");
        let want = hipobj::crc64nvme::crc64nvme(&src);
        for (name, f) in hipobj::crc64nvme::implementations() {
            assert_eq!(f(&src), want, "{name}");
            let rate = best_gb_s(len, || {
                black_box(f(black_box(&src)));
            });
            println!("| {label} | {name} | {rate:.1} |");
        }
    }
}
