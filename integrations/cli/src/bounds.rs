//! What bounds the demo's transfers on this machine, measured in the same
//! run so that its ratios hold whatever the machine (docs/benchmarks.md):
//! a PUT cannot be faster than one core computes the MD5 the store's ETag
//! needs (both paths pay it), and a GET that copies once cannot be faster
//! than one thread's memcpy of the same size.

use std::hint::black_box;
use std::time::Instant;

use md5::Digest;

/// The two rates, in MiB/s, each the best of [`ROUNDS`].
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// One core's MD5 over the object's size.
    pub md5_mib_s: f64,
    /// One thread's copy of the object's size between two buffers already
    /// in memory.
    pub memcpy_mib_s: f64,
}

/// Rounds of each measurement; the best counts (the least disturbed).
const ROUNDS: usize = 3;

/// Both bounds for `len` bytes.
pub fn measure(len: usize) -> Bounds {
    let src: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31)).collect();
    // Touched before the clock starts: the first write to fresh pages
    // would time the page faults, not the copy.
    let mut dst = vec![1u8; len];
    let mut best_md5 = f64::INFINITY;
    let mut best_copy = f64::INFINITY;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        black_box(md5::Md5::digest(black_box(&src[..])));
        best_md5 = best_md5.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src[..]));
        black_box(&mut dst);
        best_copy = best_copy.min(t.elapsed().as_secs_f64());
    }
    let mib = len as f64 / (1u64 << 20) as f64;
    Bounds {
        md5_mib_s: mib / best_md5.max(1e-9),
        memcpy_mib_s: mib / best_copy.max(1e-9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rates_are_measured() {
        let b = measure(1 << 20);
        assert!(b.md5_mib_s.is_finite() && b.md5_mib_s > 0.0, "{b:?}");
        assert!(b.memcpy_mib_s.is_finite() && b.memcpy_mib_s > 0.0, "{b:?}");
    }
}
