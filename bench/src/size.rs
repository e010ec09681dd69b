//! Sizes on the command line and in reports.

/// Parses `4096`, `4KiB`, `64MiB`, `1GiB`, `10GiB` (IEC units powers of
/// 1024, SI units such as `MB` powers of 1000, a bare `M` refused): the
/// same parser as the `hipobj` command's ([`hipobj_s3::size::parse_size`]).
pub use hipobj_s3::size::parse_size;

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
        assert_eq!(parse_size("10GiB"), Ok(10 << 30));
        // "10G" was 10 GiB here and "10GB" 10 GiB too; now a bare prefix is
        // refused and SI units are powers of 1000, as in `hipobj`.
        assert!(parse_size("10G").is_err());
        assert_eq!(parse_size("10GB"), Ok(10_000_000_000));
        assert!(parse_size("1.5GiB").is_err());
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(human(4096), "4 KiB");
        assert_eq!(human(10 << 30), "10 GiB");
        assert_eq!(human(1536 << 20), "1.5 GiB");
        assert_eq!(human(12), "12 B");
    }
}
