//! Sizes (`4KiB`, `64MiB`, `100M`, `1000000`), durations (`10s`, `500ms`)
//! and their display.

use std::time::Duration;

/// Parses a byte count: a whole number with an optional unit. `K`, `KiB`,
/// `M`, `MiB`, `G`, `GiB`, `T`, `TiB` are powers of 1024; `KB`, `MB`, `GB`,
/// `TB` powers of 1000; `B` or nothing is bytes. Units are case-insensitive.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "{s:?} is not a size (e.g. 4096, 4KiB, 64MiB, 1GiB)"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} does not fit 64 bits"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} does not fit 64 bits"))
}

/// Parses a duration: a number with `ms`, `s`, `m` or `h` (seconds without
/// a unit), e.g. `10s`, `1.5s`, `500ms`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 7.0 * 86400.0 {
        return Err(format!("{s:?} is not a duration between 0 and a week"));
    }
    Ok(Duration::from_secs_f64(secs))
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
        assert_eq!(parse_size("4k"), Ok(4096));
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
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "0", "-1s", "1d", "1e9"] {
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
