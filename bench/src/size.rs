//! Sizes on the command line and in reports.

/// Parses `4096`, `4KiB`, `64MiB`, `1GiB`, `10GiB` (also `K`, `M`, `G`,
/// `KB`, `MB`, `GB` as powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4KiB, 64MiB, 1GiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// `4 KiB`, `64 MiB`, `1 GiB`, `1.5 GiB`.
pub fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if n >= u {
            return if n.is_multiple_of(u) {
                format!("{} {name}", n / u)
            } else {
                format!("{:.1} {name}", n as f64 / u as f64)
            };
        }
    }
    format!("{n} B")
}

/// GiB/s of `bytes` in `secs`.
pub fn gib_s(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 / secs / (1u64 << 30) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert!(parse_size("1.5GiB").is_err());
        assert!(parse_size("1TiB").is_err());
        assert_eq!(human(4096), "4 KiB");
        assert_eq!(human(10 << 30), "10 GiB");
        assert_eq!(human(1536 << 20), "1.5 GiB");
        assert_eq!(human(12), "12 B");
    }
}
