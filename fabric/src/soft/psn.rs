//! 24-bit packet sequence numbers, compared with wrap-around as the IB
//! transport does.

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// `a + n`, wrapped to 24 bits.
pub fn add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

/// `a - b` as a signed distance in the 24-bit ring (-2^23 .. 2^23).
pub fn diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & PSN_MASK;
    if d & 0x0080_0000 != 0 {
        // Sign-extend the 24-bit value.
        (d | 0xff00_0000) as i32
    } else {
        d as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert_eq!(add(PSN_MASK, 1), 0);
        assert_eq!(diff(0, PSN_MASK), 1);
        assert_eq!(diff(PSN_MASK, 0), -1);
        assert_eq!(diff(5, 3), 2);
        assert_eq!(diff(3, 5), -2);
    }
}
