//! Settings read from the environment once, at init.
//!
//! An unset or invalid value leaves the default, as in hipObject.

use std::time::Duration;

/// The whole-transfer deadline of a hipobj-rc-v2 transfer when none is set
/// (hipObject's 60 s).
pub const DEFAULT_TRANSFER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// `HIPOBJ_MAX_TRANSFERS`: connections in the pool (1 to 1024, default 16).
pub const ENV_MAX_TRANSFERS: &str = "HIPOBJ_MAX_TRANSFERS";
/// `HIPOBJ_STAGE_TIMEOUT_MS`: how long a staging copy may take (default
/// 30000, at most 24 hours).
pub const ENV_STAGE_TIMEOUT_MS: &str = "HIPOBJ_STAGE_TIMEOUT_MS";
/// `HIPOBJ_DMABUF`: values starting `0`, `n` or `N` turn dma-buf registration off.
pub const ENV_DMABUF: &str = "HIPOBJ_DMABUF";
/// `HIPOBJ_REQUIRE_GPU_DIRECT`: any value but one starting `0`, `n` or `N`
/// makes the staging fallback a failure.
pub const ENV_REQUIRE_GPU_DIRECT: &str = "HIPOBJ_REQUIRE_GPU_DIRECT";
/// `HIPOBJ_RDMA_DEBUG`: any value not starting `0` reports failed dma-buf exports.
pub const ENV_RDMA_DEBUG: &str = "HIPOBJ_RDMA_DEBUG";
/// `HIPOBJ_TRANSFER_TIMEOUT_MS`: the whole-transfer deadline of a
/// hipobj-rc-v2 transfer (default 60000, at most 24 hours).
pub const ENV_TRANSFER_TIMEOUT_MS: &str = "HIPOBJ_TRANSFER_TIMEOUT_MS";
/// `HIPOBJ_PROVIDER`: `soft` (the software provider), `verbs` (libibverbs),
/// or `auto` (default: libibverbs when it lists a device, else soft).
pub const ENV_PROVIDER: &str = "HIPOBJ_PROVIDER";

/// Which RDMA provider init uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderChoice {
    /// libibverbs if it has a device, else the software provider; a NIC hint
    /// naming a hardware device never falls back.
    Auto,
    /// The software provider (`HIPOBJ_SOFT_ADDRS` says which addresses).
    Soft,
    /// libibverbs.
    Verbs,
}

/// The settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Connections in the pool.
    pub max_transfers: usize,
    /// Deadline of a staging copy.
    pub stage_timeout: Duration,
    /// Whether dma-buf registration is tried.
    pub dmabuf: bool,
    /// Whether the staging fallback is a failure.
    pub require_gpu_direct: bool,
    /// Whether failed dma-buf exports are reported.
    pub rdma_debug: bool,
    /// The provider.
    pub provider: ProviderChoice,
    /// A hipobj-rc-v2 transfer's deadline: every control request and every
    /// wait for a completion fits in it.
    pub transfer_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_transfers: 16,
            stage_timeout: Duration::from_millis(30_000),
            dmabuf: true,
            require_gpu_direct: false,
            rdma_debug: false,
            provider: ProviderChoice::Auto,
            transfer_timeout: DEFAULT_TRANSFER_DEADLINE,
        }
    }
}

fn starts_with_no(v: &str) -> bool {
    matches!(v.as_bytes().first(), Some(b'0' | b'n' | b'N'))
}

/// A decimal integer with nothing around it, within `lo..=hi`.
fn parse_range(v: &str, lo: u64, hi: u64) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>().ok().filter(|n| (lo..=hi).contains(n))
}

impl Options {
    /// Reads the environment.
    pub fn from_env() -> Options {
        Options::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Options {
        let mut o = Options::default();
        if let Some(n) = get(ENV_MAX_TRANSFERS).and_then(|v| parse_range(&v, 1, 1024)) {
            o.max_transfers = n as usize;
        }
        if let Some(n) =
            get(ENV_STAGE_TIMEOUT_MS).and_then(|v| parse_range(&v, 1, 24 * 3600 * 1000))
        {
            o.stage_timeout = Duration::from_millis(n);
        }
        if let Some(n) =
            get(ENV_TRANSFER_TIMEOUT_MS).and_then(|v| parse_range(&v, 1, 24 * 3600 * 1000))
        {
            o.transfer_timeout = Duration::from_millis(n);
        }
        if let Some(v) = get(ENV_DMABUF) {
            o.dmabuf = !starts_with_no(&v);
        }
        if let Some(v) = get(ENV_REQUIRE_GPU_DIRECT) {
            o.require_gpu_direct = !starts_with_no(&v);
        }
        if let Some(v) = get(ENV_RDMA_DEBUG) {
            o.rdma_debug = !v.starts_with('0');
        }
        o.provider = match get(ENV_PROVIDER).as_deref().map(str::trim) {
            Some("soft") => ProviderChoice::Soft,
            Some("verbs") => ProviderChoice::Verbs,
            _ => ProviderChoice::Auto,
        };
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Options {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Options::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        assert_eq!(with(&[]), Options::default());
        let d = Options::default();
        assert_eq!(
            (
                d.max_transfers,
                d.stage_timeout.as_millis(),
                d.dmabuf,
                d.require_gpu_direct,
                d.rdma_debug
            ),
            (16, 30_000, true, false, false)
        );
    }

    #[test]
    fn ranges_and_invalid_values_keep_defaults() {
        assert_eq!(with(&[(ENV_MAX_TRANSFERS, "1024")]).max_transfers, 1024);
        assert_eq!(with(&[(ENV_MAX_TRANSFERS, "1")]).max_transfers, 1);
        for bad in [
            "0",
            "1025",
            "-1",
            "+4",
            " 4",
            "4 ",
            "x",
            "",
            "99999999999999999999999",
        ] {
            assert_eq!(
                with(&[(ENV_MAX_TRANSFERS, bad)]).max_transfers,
                16,
                "{bad:?}"
            );
        }
        assert_eq!(
            with(&[(ENV_STAGE_TIMEOUT_MS, "86400000")])
                .stage_timeout
                .as_millis(),
            86_400_000
        );
        assert_eq!(
            with(&[(ENV_STAGE_TIMEOUT_MS, "86400001")])
                .stage_timeout
                .as_millis(),
            30_000
        );
        assert_eq!(
            with(&[(ENV_STAGE_TIMEOUT_MS, "0")])
                .stage_timeout
                .as_millis(),
            30_000
        );
    }

    #[test]
    fn flags_follow_the_first_character() {
        for (v, on) in [
            ("0", false),
            ("no", false),
            ("N", false),
            ("1", true),
            ("yes", true),
            ("", true),
            ("off", true),
        ] {
            assert_eq!(with(&[(ENV_DMABUF, v)]).dmabuf, on, "{v:?}");
            assert_eq!(
                with(&[(ENV_REQUIRE_GPU_DIRECT, v)]).require_gpu_direct,
                on,
                "{v:?}"
            );
        }
        assert!(with(&[(ENV_RDMA_DEBUG, "n")]).rdma_debug);
        assert!(!with(&[(ENV_RDMA_DEBUG, "0")]).rdma_debug);
        assert_eq!(
            with(&[(ENV_PROVIDER, "soft")]).provider,
            ProviderChoice::Soft
        );
        assert_eq!(
            with(&[(ENV_PROVIDER, "bogus")]).provider,
            ProviderChoice::Auto
        );
    }
}
