//! Deterministic byte patterns for tests, benchmarks and the soft peer:
//! both sides of a transfer can generate the expected bytes from a seed
//! instead of shipping them.

use crate::verbs::HostBuffer;

/// Writes the pattern for `seed` into `out`, as if `out` started at byte
/// `offset` of the stream.
pub fn fill(seed: u64, offset: u64, out: &mut [u8]) {
    let mut i = 0usize;
    // Unaligned head, byte by byte.
    while i < out.len() && !(offset + i as u64).is_multiple_of(8) {
        out[i] = byte_at(seed, offset + i as u64);
        i += 1;
    }
    // Whole words.
    let mut chunks = out[i..].chunks_exact_mut(8);
    let mut word = (offset + i as u64) / 8;
    for c in &mut chunks {
        c.copy_from_slice(&word_at(seed, word).to_le_bytes());
        word += 1;
    }
    let tail = chunks.into_remainder();
    let base = word * 8;
    for (j, b) in tail.iter_mut().enumerate() {
        *b = byte_at(seed, base + j as u64);
    }
}

/// Word `w` of the pattern for `seed` (splitmix64 of the word index).
fn word_at(seed: u64, w: u64) -> u64 {
    let mut z = seed ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Byte `i` of the pattern for `seed`.
pub fn byte_at(seed: u64, i: u64) -> u8 {
    word_at(seed, i / 8).to_le_bytes()[(i % 8) as usize]
}

const CHUNK: usize = 1 << 20;

/// Fills `len` bytes of `buf` at `at` with the pattern for `seed`.
pub fn fill_buffer(buf: &mut HostBuffer, at: usize, len: usize, seed: u64) -> crate::Result<()> {
    let mut chunk = vec![0u8; CHUNK.min(len)];
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done);
        fill(seed, done as u64, &mut chunk[..n]);
        buf.write_at(at + done, &chunk[..n])?;
        done += n;
    }
    Ok(())
}

/// The first offset (relative to `at`) where `buf` differs from the
/// pattern for `seed`, or `None` when all `len` bytes match.
pub fn first_mismatch(
    buf: &HostBuffer,
    at: usize,
    len: usize,
    seed: u64,
) -> crate::Result<Option<usize>> {
    let mut want = vec![0u8; CHUNK.min(len)];
    let mut got = vec![0u8; CHUNK.min(len)];
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done);
        fill(seed, done as u64, &mut want[..n]);
        buf.read_at(at + done, &mut got[..n])?;
        if let Some(i) = want[..n].iter().zip(&got[..n]).position(|(a, b)| a != b) {
            return Ok(Some(done + i));
        }
        done += n;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_matches_byte_at_at_any_offset() {
        for off in [0u64, 1, 7, 8, 13] {
            let mut v = vec![0u8; 37];
            fill(5, off, &mut v);
            for (i, b) in v.iter().enumerate() {
                assert_eq!(*b, byte_at(5, off + i as u64));
            }
        }
    }
}
