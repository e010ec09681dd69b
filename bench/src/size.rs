//! Sizes on the command line and in reports.

/// Byte counts: the parser (`4096`, `4KiB`, `64MiB`, `1GiB`; IEC units
/// powers of 1024, SI units such as `MB` powers of 1000, a bare `M`
/// refused) and the display (`4 KiB`, `1.5 GiB`) that the `hipobj` command
/// shares ([`hipobj_net::size`]).
pub use hipobj_net::size::{human, parse_size};

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
