//! Byte counts as the tools take them on their command lines and show
//! them (`hipobj`, `hipobj-bench`, and through `hipobj_s3::size` the S3
//! client's users): one meaning everywhere, read by the `parse-size` crate
//! ([`parse_size()`]) and written in IEC units ([`human`]).
//!
//! A whole number of bytes, optionally followed by a unit (case-insensitive,
//! a space allowed before it):
//!
//! - none or `B`: bytes;
//! - IEC units, powers of 1024: `KiB`, `MiB`, `GiB`, `TiB`, `PiB`, `EiB`
//!   (also without the `B`: `Ki`, `Mi`, ...);
//! - SI units, powers of 1000: `KB`, `MB`, `GB`, `TB`, `PB`, `EB`.
//!
//! A bare prefix (`64M`, `4k`, `10G`) is refused rather than guessed: tools
//! disagree on whether it means 1000 or 1024. So are fractions, signs,
//! exponents and digit separators.

/// Parses a byte count (see the [module](self) for the syntax).
///
/// ```
/// use hipobj_net::size::parse_size;
/// assert_eq!(parse_size("64MiB"), Ok(64 << 20));
/// assert_eq!(parse_size("100MB"), Ok(100_000_000));
/// assert_eq!(parse_size("4096"), Ok(4096));
/// assert!(parse_size("64M").is_err());
/// ```
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit = unit.trim_start();
    if digits.is_empty() || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!(
            "{s:?} is not a size: a whole number of bytes with an optional unit (4096, 4KiB, 64MiB, 1GiB, 100MB)"
        ));
    }
    if unit.len() == 1 && !unit.eq_ignore_ascii_case("b") {
        return Err(format!(
            "{s:?}: the unit {unit:?} is ambiguous; write {digits}{u}iB (powers of 1024) or {digits}{u}B (powers of 1000)",
            u = unit.to_ascii_uppercase()
        ));
    }
    parse_size::Config::new()
        .parse_size(t)
        .map_err(|e| match e {
            parse_size::Error::PosOverflow => format!("{s:?} does not fit 64 bits"),
            _ => format!("{s:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"),
        })
}

/// A byte count in the largest IEC unit it reaches, up to TiB: whole
/// numbers as they are, others to one decimal (`100 B`, `4 KiB`,
/// `64 MiB`, `1.5 GiB`).
///
/// ```
/// use hipobj_net::size::human;
/// assert_eq!(human(4096), "4 KiB");
/// assert_eq!(human(3 << 29), "1.5 GiB");
/// ```
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else if v.fract() == 0.0 {
        format!("{v} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iec_si_and_bytes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("7B"), Ok(7));
        assert_eq!(parse_size("7b"), Ok(7));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4kib"), Ok(4096));
        assert_eq!(parse_size("4Ki"), Ok(4096));
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size(" 1GiB "), Ok(1 << 30));
        assert_eq!(parse_size("10GiB"), Ok(10 << 30));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("1KB"), Ok(1_000));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1tb"), Ok(1_000_000_000_000));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn refused() {
        for bad in [
            "", "KiB", "B", "1.5MiB", "1.5GiB", "-1", "+1", "4XB", "1e9", "1_000", "1 000", "0x10",
            "64M", "4k", "10G", "1T", "2 m",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_size("99999999999999999999"),
            Err("\"99999999999999999999\" does not fit 64 bits".into())
        );
        assert!(parse_size("16777216TiB").is_err());
        assert!(parse_size("64M").unwrap_err().contains("64MiB"));
    }

    #[test]
    fn display() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(100), "100 B");
        assert_eq!(human(4096), "4 KiB");
        assert_eq!(human(64 << 20), "64 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(10 << 30), "10 GiB");
        assert_eq!(human(1 << 40), "1 TiB");
        assert_eq!(human(1 << 50), "1024 TiB");
    }
}
