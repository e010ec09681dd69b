//! Strict hex helpers: exactly two ASCII hex digits per byte, nothing else.

const LOWER: &[u8; 16] = b"0123456789abcdef";

/// The value of one ASCII hex digit, in either case.
pub(crate) fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn encode_lower(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(LOWER[usize::from(b >> 4)] as char);
        s.push(LOWER[usize::from(b & 0xf)] as char);
    }
    s
}

/// Decodes `src` into `out`; true only when `src` is exactly
/// `2 * out.len()` hex digits.
pub(crate) fn decode_into(src: &[u8], out: &mut [u8]) -> bool {
    if src.len() != out.len() * 2 {
        return false;
    }
    for (o, pair) in out.iter_mut().zip(src.chunks_exact(2)) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(h), Some(l)) => *o = (h << 4) | l,
            _ => return false,
        }
    }
    true
}
