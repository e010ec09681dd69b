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

/// The first character of `s` that is not an ASCII hex digit, as its
/// position counted in characters and the character itself.
pub(crate) fn first_non_hex(s: &str) -> Option<(usize, char)> {
    s.chars().enumerate().find(|&(_, c)| !c.is_ascii_hexdigit())
}

/// Parses a field of ASCII hex digits (either case) into a `u64`; `None`
/// when the field is empty, longer than 16 digits, or holds anything else.
pub(crate) fn parse_u64(field: &str) -> Option<u64> {
    if field.is_empty() || field.len() > 16 {
        return None;
    }
    field.bytes().try_fold(0u64, |acc, c| {
        let n = nibble(c)?;
        acc.checked_mul(16)?.checked_add(u64::from(n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_u64_is_strict() {
        assert_eq!(parse_u64("ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_u64("0A"), Some(10));
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_u64("+1"), None);
        assert_eq!(parse_u64("10000000000000000"), None);
    }

    #[test]
    fn first_non_hex_counts_characters() {
        assert_eq!(first_non_hex("00g0"), Some((2, 'g')));
        assert_eq!(first_non_hex("é0z"), Some((0, 'é')));
        assert_eq!(first_non_hex("0aF9"), None);
    }
}
