//! Sizes (`4KiB`, `64MiB`, `100MB`, `1000000`), durations (`10s`, `500ms`)
//! and their display.

use std::time::Duration;

/// Parses a byte count: a whole number with an optional unit, the IEC
/// ones (`KiB`, `MiB`, `GiB`, `TiB`) powers of 1024, the SI ones (`KB`,
/// `MB`, `GB`, `TB`) powers of 1000, `B` or nothing bytes; a bare `K`, `M`,
/// `G` is refused as ambiguous. The same parser as `hipobj-bench`'s
/// ([`hipobj_s3::size::parse_size`]).
pub use hipobj_s3::size::parse_size;

/// Parses a duration as `humantime` reads it, as the gateway does: `10s`,
/// `1.5s`, `500ms`, `2m`, `1h 30m`; more than zero and at most a week.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("{s:?} is not a duration ({e}); write it like 10s, 500ms or 2m"))?;
    if d.is_zero() || d > Duration::from_secs(7 * 86400) {
        return Err(format!("{s:?} is not a duration between 0 and a week"));
    }
    Ok(d)
}

/// `4 KiB`, `64 MiB`, `1.5 GiB`, `100 B`.
pub fn human_bytes(n: u64) -> String {
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

/// Bytes per second in MiB/s.
pub fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        0.0
    } else {
        bytes as f64 / (1u64 << 20) as f64 / secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        // A bare prefix was 1024 here and 1000 elsewhere: now refused.
        assert!(parse_size("4k").is_err());
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("7B"), Ok(7));
        for bad in ["", "KiB", "1.5MiB", "-1", "4XB", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_size("16777216TiB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1s 500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        // humantime wants a unit, as the gateway's flags do.
        for bad in ["", "s", "0", "0s", "10", "-1s", "8d", "1e9"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn display() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(mib_per_s(1 << 20, 0.5), 2.0);
    }
}
