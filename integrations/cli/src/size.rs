//! Sizes (`4KiB`, `64MiB`, `100MB`, `1000000`), durations (`10s`, `500ms`)
//! and their display.

use std::time::Duration;

/// Byte counts: the parser (a whole number with an optional unit, the
/// IEC ones powers of 1024, the SI ones powers of 1000, a bare `K`, `M`,
/// `G` refused as ambiguous) and the display (`4 KiB`, `1.5 GiB`) that
/// `hipobj-bench` shares ([`hipobj_net::size`]).
pub use hipobj_net::size::{human, parse_size};

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
        assert_eq!(human(4096), "4 KiB");
        assert_eq!(mib_per_s(1 << 20, 0.5), 2.0);
    }
}
