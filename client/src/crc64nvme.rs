//! CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5, init and final
//! xor all ones), the checksum hipobj-rc-v2's FINAL carries for the bytes
//! a transfer moved.
//!
//! The library computes it itself rather than link `crc64fast-nvme` or
//! `crc-fast`, whose C exports would leak from libhipobj.so. Two
//! implementations, the same function:
//!
//! - **carry-less multiplication** (x86-64 with PCLMULQDQ, chosen at run
//!   time): the message is folded 128 bytes at a time in eight 128-bit
//!   lanes, as Intel's "Fast CRC Computation for Generic Polynomials Using
//!   PCLMULQDQ" describes, at memory speed rather than the table's few
//!   GB/s; a GET of 64 MiB verified its checksum in ~25 ms with the table,
//!   about as long as the copy itself;
//! - **the same folding on 512-bit registers** (x86-64 with AVX-512F and
//!   VPCLMULQDQ, chosen at run time, for 1 KiB and more): four registers
//!   of four lanes fold 256 bytes a step. Measured side by side (best of
//!   five passes over 256 MiB, one core): 67 against 23 GB/s on a 1 MiB
//!   buffer, 24 against 17 GB/s on 64 MiB, where memory bounds both;
//! - **the same on 256-bit registers** (VPCLMULQDQ with AVX2 but not
//!   AVX-512: Zen 3, for instance): eight registers of two lanes fold the
//!   same 256-byte blocks. On a Zen 3 VM (`cargo bench -p hipobj-client
//!   --bench crc64nvme`): 20.7 against 9.5 GB/s on 1 MiB, 13.3 against
//!   11.2 GB/s on 64 MiB (memcpy of it: 8.5);
//! - **slice-by-8 tables**, everywhere else and for what is left after the
//!   lanes.
//!
//! The folding constants are derived from the polynomial when first used
//! (`x^n mod P`), not written down, and the tests compare both
//! implementations on every length and alignment up to a few lanes.

use std::sync::OnceLock;

/// The polynomial, reflected (bit i is the coefficient of x^(63-i)).
const POLY_REFLECTED: u64 = 0x9a6c_9329_ac4b_c9b5;

/// `bytes`' CRC-64/NVME.
pub fn crc64nvme(bytes: &[u8]) -> u64 {
    !update(!0, bytes)
}

/// One implementation: the whole CRC-64/NVME of its input.
#[doc(hidden)]
pub type Implementation = fn(&[u8]) -> u64;

/// The implementations this CPU can run, each a whole CRC-64/NVME of
/// its input (at least 1 KiB for all but `tables`), fastest last: for the
/// benchmark that compares them (`cargo bench -p hipobj-client --bench
/// crc64nvme`).
#[doc(hidden)]
pub fn implementations() -> Vec<(&'static str, Implementation)> {
    let mut v: Vec<(&'static str, Implementation)> = vec![("tables", |b| !update_table(!0, b))];
    #[cfg(target_arch = "x86_64")]
    {
        if clmul::available() {
            // SAFETY: the CPU has PCLMULQDQ; the length is the caller's.
            v.push(("pclmulqdq, 128-bit", |b| unsafe { !clmul::update(!0, b) }));
        }
        if clmul::avx2_available() {
            // SAFETY: the CPU has AVX2, VPCLMULQDQ and PCLMULQDQ.
            v.push(("vpclmulqdq, 256-bit", |b| unsafe {
                !clmul::update_avx2(!0, b)
            }));
        }
        if clmul::wide_available() {
            // SAFETY: the CPU has AVX-512F, VPCLMULQDQ and PCLMULQDQ.
            v.push(("vpclmulqdq, 512-bit", |b| unsafe {
                !clmul::update_wide(!0, b)
            }));
        }
    }
    v
}

/// Continues the (reflected, un-inverted) register `crc` over `bytes`.
fn update(crc: u64, bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= clmul::WIDE_MIN_LEN && clmul::wide_available() {
        // SAFETY: the CPU has AVX-512F, VPCLMULQDQ and PCLMULQDQ, checked
        // at run time just above, and `bytes` is at least WIDE_MIN_LEN long.
        return unsafe { clmul::update_wide(crc, bytes) };
    }
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= clmul::WIDE_MIN_LEN && clmul::avx2_available() {
        // SAFETY: the CPU has AVX2, VPCLMULQDQ and PCLMULQDQ, checked at
        // run time just above, and `bytes` is at least WIDE_MIN_LEN long.
        return unsafe { clmul::update_avx2(crc, bytes) };
    }
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= clmul::MIN_LEN && clmul::available() {
        // SAFETY: the CPU has PCLMULQDQ (and SSE2, part of x86-64), checked
        // at run time just above.
        return unsafe { clmul::update(crc, bytes) };
    }
    update_table(crc, bytes)
}

/// The slice-by-8 tables: `t[0]` the byte-at-a-time table, `t[k]` the
/// contribution of a byte k positions further back.
fn tables() -> &'static [[u64; 256]; 8] {
    static TABLES: OnceLock<Box<[[u64; 256]; 8]>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = Box::new([[0u64; 256]; 8]);
        for i in 0..256 {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ POLY_REFLECTED
                } else {
                    c >> 1
                };
            }
            t[0][i] = c;
        }
        for i in 0..256 {
            for k in 1..8 {
                let prev = t[k - 1][i];
                t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            }
        }
        t
    })
}

/// The register after eight bytes whose value (little-endian) xor the
/// register is `v`: `v * x^64 mod P`, reflected.
fn step8(t: &[[u64; 256]; 8], v: u64) -> u64 {
    t[7][(v & 0xff) as usize]
        ^ t[6][((v >> 8) & 0xff) as usize]
        ^ t[5][((v >> 16) & 0xff) as usize]
        ^ t[4][((v >> 24) & 0xff) as usize]
        ^ t[3][((v >> 32) & 0xff) as usize]
        ^ t[2][((v >> 40) & 0xff) as usize]
        ^ t[1][((v >> 48) & 0xff) as usize]
        ^ t[0][(v >> 56) as usize]
}

fn update_table(mut crc: u64, bytes: &[u8]) -> u64 {
    let t = tables();
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        crc = step8(t, crc ^ u64::from_le_bytes(w));
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u64::from(b)) & 0xff) as usize];
    }
    crc
}

/// `x^n mod P`, reflected (bit i is the coefficient of x^(63-i)).
fn x_pow_mod(n: u32) -> u64 {
    let p = POLY_REFLECTED.reverse_bits(); // normal form, x^64 implied
    let mut r: u64 = 1; // x^0, normal form
    for _ in 0..n {
        let carry = r >> 63;
        r <<= 1;
        if carry == 1 {
            r ^= p;
        }
    }
    r.reverse_bits()
}

/// The two constants that move a 128-bit lane `bits` further on: for its
/// first (higher) half `x^(bits+63) mod P`, for its second
/// `x^(bits-1) mod P`. (A reflected carry-less product of two 64-bit
/// values, read as 128 reflected bits, is the product times x; the `-1`
/// takes that back.)
fn fold_constants(bits: u32) -> (u64, u64) {
    (x_pow_mod(bits + 63), x_pow_mod(bits - 1))
}

#[cfg(target_arch = "x86_64")]
mod clmul {
    use crate::crc64nvme::{fold_constants, step8, tables, update_table};
    use std::arch::x86_64::{
        __m128i, __m256i, __m512i, _mm256_broadcastsi128_si256, _mm256_clmulepi64_epi128,
        _mm256_loadu_si256, _mm256_set_epi64x, _mm256_xor_si256, _mm512_broadcast_i32x4,
        _mm512_clmulepi64_epi128, _mm512_loadu_si512, _mm512_set_epi64, _mm512_xor_si512,
        _mm_clmulepi64_si128, _mm_loadu_si128, _mm_set_epi64x, _mm_xor_si128,
    };
    use std::sync::OnceLock;

    /// Below this the tables are as fast.
    pub(super) const MIN_LEN: usize = 256;
    /// Lanes folded in parallel.
    const LANES: usize = 8;
    const BLOCK: usize = LANES * 16;

    pub(super) fn available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("pclmulqdq"))
    }

    /// Below this the 128-bit lanes are as fast (the wide path's last
    /// block takes fifteen folds to come down to one lane).
    pub(super) const WIDE_MIN_LEN: usize = 1024;
    /// 512-bit registers folded in parallel, each four 128-bit lanes.
    const WIDE: usize = 4;
    const WIDE_BLOCK: usize = WIDE * 64;
    /// 128-bit lanes in a wide block.
    const WIDE_LANES: usize = WIDE_BLOCK / 16;

    /// Whether the CPU has the 512-bit carry-less multiplication
    /// (VPCLMULQDQ with AVX-512F: Ice Lake and later, Zen 4 and later).
    pub(super) fn wide_available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
        })
    }

    /// Whether the CPU has the 256-bit carry-less multiplication
    /// (VPCLMULQDQ with AVX2, without AVX-512: Zen 3, Alder Lake's cores).
    pub(super) fn avx2_available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
        })
    }

    /// 256-bit registers folded in parallel by the AVX2 form, each two
    /// 128-bit lanes: the same sixteen lanes, and so the same block and
    /// constants, as the 512-bit form's.
    const AVX2_REGS: usize = WIDE_LANES / 2;

    /// The constants, packed as the folds use them: `(first half's, second
    /// half's)` for a fold over `bits`.
    struct Constants {
        /// Over one block (each lane to its place in the next block).
        block: (u64, u64),
        /// Lane i of the last block onto the last lane: over
        /// `(LANES - 1 - i) * 128` bits.
        onto_last: [(u64, u64); LANES - 1],
        /// Over one lane.
        lane: (u64, u64),
        /// Over one wide block (each 128-bit lane of a 512-bit register
        /// to its place in the next wide block).
        wide_block: (u64, u64),
        /// Lane i of the last wide block onto its last lane: over
        /// `(WIDE_LANES - 1 - i) * 128` bits.
        wide_onto_last: [(u64, u64); WIDE_LANES - 1],
    }

    fn constants() -> &'static Constants {
        static C: OnceLock<Constants> = OnceLock::new();
        C.get_or_init(|| Constants {
            block: fold_constants((BLOCK * 8) as u32),
            onto_last: std::array::from_fn(|i| fold_constants(((LANES - 1 - i) * 128) as u32)),
            lane: fold_constants(128),
            wide_block: fold_constants((WIDE_BLOCK * 8) as u32),
            wide_onto_last: std::array::from_fn(|i| {
                fold_constants(((WIDE_LANES - 1 - i) * 128) as u32)
            }),
        })
    }

    #[target_feature(enable = "pclmulqdq")]
    fn pack(k: (u64, u64)) -> __m128i {
        // The first half's constant in the low quadword, as the lane's
        // first eight bytes are.
        _mm_set_epi64x(k.1 as i64, k.0 as i64)
    }

    /// The 16 bytes of `bytes` at `at` (the slice index panics past its end).
    fn load(bytes: &[u8], at: usize) -> __m128i {
        let lane = &bytes[at..at + 16];
        // SAFETY: `lane` is 16 readable bytes; the load is unaligned and
        // SSE2, which every x86_64 CPU has.
        unsafe { _mm_loadu_si128(lane.as_ptr().cast()) }
    }

    /// `v` moved over the distance whose constants are `k`.
    #[target_feature(enable = "pclmulqdq")]
    fn fold(v: __m128i, k: __m128i) -> __m128i {
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(v, k),
            _mm_clmulepi64_si128::<0x11>(v, k),
        )
    }

    /// The last block's lanes folded onto its last one: lane i moved over
    /// the distance whose constants are `k[i]` (one fewer than the lanes).
    #[target_feature(enable = "pclmulqdq")]
    fn onto_last(lanes: &[__m128i], k: &[(u64, u64)]) -> __m128i {
        let (last, rest) = lanes.split_last().expect("a block has lanes");
        rest.iter().zip(k).fold(*last, |acc, (lane, &k)| {
            _mm_xor_si128(acc, fold(*lane, pack(k)))
        })
    }

    /// # Safety
    ///
    /// The CPU must have PCLMULQDQ; `bytes` must hold at least
    /// [`MIN_LEN`] bytes.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn update(crc: u64, bytes: &[u8]) -> u64 {
        let c = constants();
        let mut lanes: [__m128i; LANES] = std::array::from_fn(|i| load(bytes, i * 16));
        // The register enters as an xor into the first eight bytes.
        lanes[0] = _mm_xor_si128(lanes[0], _mm_set_epi64x(0, crc as i64));
        let mut at = BLOCK;
        let k = pack(c.block);
        while at + BLOCK <= bytes.len() {
            for (i, lane) in lanes.iter_mut().enumerate() {
                *lane = _mm_xor_si128(fold(*lane, k), load(bytes, at + i * 16));
            }
            at += BLOCK;
        }
        let acc = onto_last(&lanes, &c.onto_last);
        // SAFETY: the CPU has PCLMULQDQ (this function's own contract).
        unsafe { finish(acc, bytes, at) }
    }

    /// The register after `bytes[..at]`, given `acc`, the last 16 bytes
    /// before `at` with everything earlier folded into them; on over the
    /// rest of `bytes`.
    ///
    /// # Safety
    ///
    /// The CPU must have PCLMULQDQ; `at` is at most `bytes.len()`.
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn finish(mut acc: __m128i, bytes: &[u8], mut at: usize) -> u64 {
        let k = pack(constants().lane);
        while at + 16 <= bytes.len() {
            acc = _mm_xor_si128(fold(acc, k), load(bytes, at));
            at += 16;
        }
        // The 128 bits left, A x^64 + B: the register is (A x^64 + B) x^64
        // mod P = (A x^128 mod P) x^0 ... folded once more over 64 bits of
        // B's place, then eight bytes' step of the tables.
        // SAFETY: __m128i and u128 have the same size; any bits are valid.
        let v: u128 = unsafe { std::mem::transmute::<__m128i, u128>(acc) };
        let (a, b) = (v as u64, (v >> 64) as u64);
        // The register over the lane's 16 bytes: the first eight (a) as a
        // step, then the second eight (b).
        let t = tables();
        let r = step8(t, step8(t, a) ^ b);
        update_table(r, &bytes[at..])
    }

    /// The 512-bit form of [`update`]: four registers of four 128-bit
    /// lanes each fold 256 bytes a step (VPCLMULQDQ multiplies the four
    /// lanes of a register at once), then the sixteen lanes of the last
    /// block are folded onto one and [`finish`] goes on as the narrow
    /// form does.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX-512F, VPCLMULQDQ and PCLMULQDQ; `bytes` must
    /// hold at least [`WIDE_MIN_LEN`] bytes.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq")]
    pub(super) unsafe fn update_wide(crc: u64, bytes: &[u8]) -> u64 {
        let c = constants();
        let load512 = |at: usize| -> __m512i {
            let block = &bytes[at..at + 64];
            // SAFETY: `block` is 64 readable bytes; the load is unaligned.
            unsafe { _mm512_loadu_si512(block.as_ptr().cast()) }
        };
        let mut regs: [__m512i; WIDE] = std::array::from_fn(|i| load512(i * 64));
        // The register enters as an xor into the first eight bytes (the
        // last argument is the lowest quadword).
        regs[0] = _mm512_xor_si512(regs[0], _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, crc as i64));
        let k = _mm512_broadcast_i32x4(pack(c.wide_block));
        let mut at = WIDE_BLOCK;
        while at + WIDE_BLOCK <= bytes.len() {
            for (i, reg) in regs.iter_mut().enumerate() {
                let folded = _mm512_xor_si512(
                    _mm512_clmulepi64_epi128::<0x00>(*reg, k),
                    _mm512_clmulepi64_epi128::<0x11>(*reg, k),
                );
                *reg = _mm512_xor_si512(folded, load512(at + i * 64));
            }
            at += WIDE_BLOCK;
        }
        // SAFETY: __m512i and [__m128i; 4] have the same size and any bits
        // are valid for both; lane 0 is the register's low 128 bits, the
        // first 16 of the 64 bytes it was loaded from.
        let lanes: [[__m128i; 4]; WIDE] =
            regs.map(|r| unsafe { std::mem::transmute::<__m512i, [__m128i; 4]>(r) });
        let acc = onto_last(lanes.as_flattened(), &c.wide_onto_last);
        // SAFETY: the CPU has PCLMULQDQ (this function's own contract).
        unsafe { finish(acc, bytes, at) }
    }

    /// The 256-bit form of [`update_wide`], for CPUs with VPCLMULQDQ but
    /// not AVX-512: eight registers of two 128-bit lanes each fold the
    /// same 256-byte blocks.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2, VPCLMULQDQ and PCLMULQDQ; `bytes` must hold
    /// at least [`WIDE_MIN_LEN`] bytes.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
    pub(super) unsafe fn update_avx2(crc: u64, bytes: &[u8]) -> u64 {
        let c = constants();
        let load256 = |at: usize| -> __m256i {
            let block = &bytes[at..at + 32];
            // SAFETY: `block` is 32 readable bytes; the load is unaligned.
            unsafe { _mm256_loadu_si256(block.as_ptr().cast()) }
        };
        let mut regs: [__m256i; AVX2_REGS] = std::array::from_fn(|i| load256(i * 32));
        // The register enters as an xor into the first eight bytes (the
        // last argument is the lowest quadword).
        regs[0] = _mm256_xor_si256(regs[0], _mm256_set_epi64x(0, 0, 0, crc as i64));
        let k = _mm256_broadcastsi128_si256(pack(c.wide_block));
        let mut at = WIDE_BLOCK;
        while at + WIDE_BLOCK <= bytes.len() {
            for (i, reg) in regs.iter_mut().enumerate() {
                let folded = _mm256_xor_si256(
                    _mm256_clmulepi64_epi128::<0x00>(*reg, k),
                    _mm256_clmulepi64_epi128::<0x11>(*reg, k),
                );
                *reg = _mm256_xor_si256(folded, load256(at + i * 32));
            }
            at += WIDE_BLOCK;
        }
        // SAFETY: __m256i and [__m128i; 2] have the same size and any bits
        // are valid for both; lane 0 is the register's low 128 bits, the
        // first 16 of the 32 bytes it was loaded from.
        let lanes: [[__m128i; 2]; AVX2_REGS] =
            regs.map(|r| unsafe { std::mem::transmute::<__m256i, [__m128i; 2]>(r) });
        let acc = onto_last(lanes.as_flattened(), &c.wide_onto_last);
        // SAFETY: the CPU has PCLMULQDQ (this function's own contract).
        unsafe { finish(acc, bytes, at) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        assert_eq!(crc64nvme(b"123456789"), 0xae8b_1486_0a79_9888);
        assert_eq!(crc64nvme(b""), 0);
    }

    /// Both implementations agree on every length and alignment around
    /// the lanes' and blocks' edges, and on long random input.
    #[test]
    fn carry_less_and_tables_agree() {
        let mut data = vec![0u8; 1 << 16];
        getrandom::fill(&mut data).unwrap();
        let table = |b: &[u8]| !update_table(!0, b);
        for off in 0..17 {
            // Every length to 1400 covers the 512-bit form's edges (from
            // 1024, blocks of 256 bytes) as well as the narrow one's.
            for len in (0..1400).chain([4095, 4096, 4097, 65_000]) {
                if off + len > data.len() {
                    continue;
                }
                let b = &data[off..off + len];
                assert_eq!(crc64nvme(b), table(b), "off {off} len {len}");
                #[cfg(target_arch = "x86_64")]
                if len >= clmul::MIN_LEN && clmul::available() {
                    // SAFETY: checked just above.
                    let c = unsafe { !clmul::update(!0, b) };
                    assert_eq!(c, table(b), "carry-less: off {off} len {len}");
                }
                #[cfg(target_arch = "x86_64")]
                if len >= clmul::WIDE_MIN_LEN && clmul::wide_available() {
                    // SAFETY: checked just above.
                    let c = unsafe { !clmul::update_wide(!0, b) };
                    assert_eq!(c, table(b), "512-bit: off {off} len {len}");
                }
                #[cfg(target_arch = "x86_64")]
                if len >= clmul::WIDE_MIN_LEN && clmul::avx2_available() {
                    // SAFETY: checked just above.
                    let c = unsafe { !clmul::update_avx2(!0, b) };
                    assert_eq!(c, table(b), "256-bit: off {off} len {len}");
                }
            }
        }
        // Continuing a register: the same as one pass.
        let (x, y) = data.split_at(1000);
        assert_eq!(!update(update(!0, x), y), table(&data));
    }

    #[test]
    fn constants_are_powers_of_x() {
        // x^64 mod P is the polynomial without its x^64 term; x^0 is 1.
        assert_eq!(x_pow_mod(64), POLY_REFLECTED);
        assert_eq!(x_pow_mod(0), 1u64 << 63);
        assert_eq!(x_pow_mod(63), 1);
    }
}
