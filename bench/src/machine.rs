//! The machine a run was made on, for the report.

use std::process::Command;

/// What the report says about the machine.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// The CPU model.
    pub cpu_model: String,
    /// Total memory in GiB.
    pub mem_gib: f64,
    /// The kernel release.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The current 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Describes this machine.
pub fn describe() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_string(), |(_, v)| v.trim().to_string());
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_string(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        );
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        mem_gib: mem_kib as f64 / (1u64 << 20) as f64,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        rustc,
    }
}
