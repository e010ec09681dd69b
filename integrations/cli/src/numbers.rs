//! Integer arguments in decimal or `0x`-prefixed hex.

/// Parses a decimal number, or hex after `0x`/`0X`, into any unsigned type
/// up to `u64`: no sign, no spaces, no separators.
pub fn parse_number<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(format!("{s:?} is not a decimal or 0x-prefixed hex number"));
    }
    let n =
        u64::from_str_radix(digits, radix).map_err(|_| format!("{s:?} does not fit 64 bits"))?;
    T::try_from(n).map_err(|_| format!("{s:?} is too large (at most {})", max_of::<T>()))
}

/// The largest `u64` that converts to `T`.
fn max_of<T: TryFrom<u64>>() -> u64 {
    [u8::MAX.into(), u16::MAX.into(), u32::MAX.into(), u64::MAX]
        .into_iter()
        .find(|&m| {
            T::try_from(m).is_ok() && m.checked_add(1).is_none_or(|n| T::try_from(n).is_err())
        })
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_hex() {
        assert_eq!(parse_number::<u32>("42"), Ok(42));
        assert_eq!(parse_number::<u32>("0x2a"), Ok(42));
        assert_eq!(parse_number::<u32>("0X2A"), Ok(42));
        assert_eq!(parse_number::<u64>("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_number::<u8>("255"), Ok(255));
    }

    #[test]
    fn rejects() {
        for s in [
            "", "0x", "+1", "-1", " 1", "1 ", "1_000", "0x+1", "ff", "1e3",
        ] {
            assert!(parse_number::<u64>(s).is_err(), "{s:?}");
        }
        assert_eq!(
            parse_number::<u8>("256"),
            Err("\"256\" is too large (at most 255)".to_string())
        );
        assert!(parse_number::<u64>("18446744073709551616").is_err());
    }
}
