//! The provider's settings and process-wide counters: a leaf that every
//! other module of the soft provider may read.

/// Environment variable: comma-separated IPv4 addresses, one soft device each.
pub const ENV_ADDRS: &str = "HIPOBJ_SOFT_ADDRS";
/// Environment variable: multiplies the transport timers (1.0 = hardware timing).
pub const ENV_TIMEOUT_SCALE: &str = "HIPOBJ_SOFT_TIMEOUT_SCALE";
/// Environment variable: `0` (or `off`, `false`, `no`) turns the same-host
/// path off.
pub const ENV_CMA: &str = "HIPOBJ_SOFT_CMA";

static CMA_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Payload bytes this process's soft requesters moved by the same-host
/// path, since it started (for tests and benchmarks).
pub fn cma_bytes() -> u64 {
    CMA_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn count_cma_bytes(n: usize) {
    CMA_BYTES.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
}

/// Settings of the software provider.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftConfig {
    /// Multiplies the local ACK timeout and the RNR delay; 1.0 is hardware
    /// timing (timeout 14 with 7 retries fails after about 0.5 s). Tests
    /// that wait for RETRY_EXC_ERR may lower it.
    pub timeout_scale: f64,
    /// Whether this device offers and uses the same-host path
    /// (cross-memory attach) with devices on its host.
    pub cma: bool,
}

impl Default for SoftConfig {
    fn default() -> SoftConfig {
        SoftConfig {
            timeout_scale: 1.0,
            cma: true,
        }
    }
}

impl SoftConfig {
    /// Defaults, with `HIPOBJ_SOFT_TIMEOUT_SCALE` applied when it is a
    /// positive number (anything else is ignored).
    pub fn from_env() -> SoftConfig {
        let mut c = SoftConfig::default();
        if let Some(s) = std::env::var(ENV_TIMEOUT_SCALE)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
        {
            if s.is_finite() && s > 0.0 {
                c.timeout_scale = s;
            }
        }
        if let Ok(v) = std::env::var(ENV_CMA) {
            if matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "off" | "false" | "no"
            ) {
                c.cma = false;
            }
        }
        c
    }
}
