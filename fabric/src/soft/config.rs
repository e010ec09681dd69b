//! The provider's settings and process-wide counters: a leaf that every
//! other module of the soft provider may read.

/// Environment variable: comma-separated IPv4 addresses, one soft device each.
pub const ENV_ADDRS: &str = "HIPOBJ_SOFT_ADDRS";
/// Environment variable: multiplies the transport timers (1.0 = hardware timing).
pub const ENV_TIMEOUT_SCALE: &str = "HIPOBJ_SOFT_TIMEOUT_SCALE";
/// Environment variable: `0` (or `off`, `false`, `no`) turns the same-host
/// path off; `privileged` lets it be used also while this process is root
/// or holds `CAP_SYS_PTRACE` (off by default: see `cma`).
pub const ENV_CMA: &str = "HIPOBJ_SOFT_CMA";
/// Environment variable: how long, in microseconds, a thread waiting on a
/// CQ polls it before it sleeps ([`SoftConfig::cq_spin`]); 0 turns it off.
pub const ENV_CQ_SPIN_US: &str = "HIPOBJ_SOFT_CQ_SPIN_US";

/// How long, by default, a thread waiting on a CQ polls it before it
/// sleeps ([`SoftConfig::cq_spin`]).
pub const CQ_SPIN: std::time::Duration = std::time::Duration::from_micros(100);

/// How long, by default, a same-host grant keeps its region registered
/// waiting for the requester's done: far more than the copy of the largest
/// message (2 GiB) between two processes takes, even on a loaded host.
/// After it the responder closes the connection and lets the region go.
pub const CMA_DONE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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
    /// Whether the same-host path may be used while this process is root
    /// or holds `CAP_SYS_PTRACE` (the kernel then checks the requester's
    /// privilege, not its client's: see `cma`). Off by default.
    pub cma_privileged: bool,
    /// How long a same-host grant this device gives keeps its region
    /// registered waiting for the requester's done ([`CMA_DONE_TIMEOUT`]
    /// by default). Not scaled by `timeout_scale`: it bounds how long a
    /// peer may hold a deregistration, and shortening it with the other
    /// timers would cut off slow but honest copies. Tests of the timeout
    /// itself shorten it.
    pub cma_done_timeout: std::time::Duration,
    /// How long a thread waiting on one of this device's CQs
    /// (`CompletionQueue::wait_one` and the like) keeps polling it,
    /// yielding the CPU between polls, before it sleeps on the CQ: a
    /// completion that comes meanwhile is taken without a wake-up, which
    /// on a VM costs tens of microseconds when the waiter's vCPU has gone
    /// idle. [`CQ_SPIN`] by default; zero, or a machine with one CPU,
    /// sleeps at once. Not scaled by `timeout_scale`.
    pub cq_spin: std::time::Duration,
}

impl Default for SoftConfig {
    fn default() -> SoftConfig {
        SoftConfig {
            timeout_scale: 1.0,
            cma: true,
            cma_privileged: false,
            cma_done_timeout: CMA_DONE_TIMEOUT,
            cq_spin: CQ_SPIN,
        }
    }
}

impl SoftConfig {
    /// Defaults, with `HIPOBJ_SOFT_TIMEOUT_SCALE` applied when it is a
    /// positive number, `HIPOBJ_SOFT_CQ_SPIN_US` when it is a whole number
    /// (at most 10 ms), and `HIPOBJ_SOFT_CMA` (anything else is ignored).
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
        if let Some(us) = std::env::var(ENV_CQ_SPIN_US)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            c.cq_spin = std::time::Duration::from_micros(us.min(10_000));
        }
        if let Ok(v) = std::env::var(ENV_CMA) {
            match v.trim().to_ascii_lowercase().as_str() {
                "0" | "off" | "false" | "no" => c.cma = false,
                "privileged" => c.cma_privileged = true,
                _ => {}
            }
        }
        c
    }
}
