//! Sampling another process's memory from `/proc/<pid>/status`: `VmRSS`
//! every period in a thread of its own, with the peak of the current
//! window, and the kernel's own peak (`VmHWM`); and its threads, with the
//! window's peak of those that are its own and those of the software RDMA
//! provider (named `soft-*`, which stand for a NIC's queues).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// `VmRSS` and `VmHWM` in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// Resident now.
    pub rss_kib: u64,
    /// The most resident since the process started.
    pub hwm_kib: u64,
}

/// Reads `/proc/<pid>/status`.
pub fn status(pid: u32) -> Option<Status> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some(Status {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// Threads of `pid`: (its own, the software provider's `soft-*`).
pub fn threads(pid: u32) -> Option<(u64, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let (mut own, mut soft) = (0, 0);
    for t in tasks.flatten() {
        match std::fs::read_to_string(t.path().join("comm")) {
            Ok(c) if c.starts_with("soft-") => soft += 1,
            Ok(_) => own += 1,
            Err(_) => {}
        }
    }
    Some((own, soft))
}

#[derive(Debug, Default)]
struct State {
    last: Status,
    window_start: u64,
    window_peak: u64,
    window_threads: (u64, u64),
    samples: u64,
}

/// A window's memory: resident at its start, at its peak (sampled), and
/// at its end, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// `VmRSS` when the window began.
    pub start_kib: u64,
    /// The largest `VmRSS` sampled in it (and at its ends).
    pub peak_kib: u64,
    /// `VmRSS` when it ended.
    pub end_kib: u64,
    /// `VmHWM` when it ended.
    pub hwm_kib: u64,
    /// The most threads of its own sampled in it.
    pub threads_own: u64,
    /// The most threads of the software provider sampled in it.
    pub threads_soft: u64,
}

/// The sampling thread; stopped on drop.
#[derive(Debug)]
pub struct Sampler {
    pid: u32,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Samples `pid` every `period`.
    pub fn start(pid: u32, period: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let (s, st) = (stop.clone(), state.clone());
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if let Some(now) = status(pid) {
                        let t = threads(pid);
                        let mut g = st.lock().unwrap_or_else(|e| e.into_inner());
                        g.last = now;
                        g.window_peak = g.window_peak.max(now.rss_kib);
                        if let Some((own, soft)) = t {
                            g.window_threads.0 = g.window_threads.0.max(own);
                            g.window_threads.1 = g.window_threads.1.max(soft);
                        }
                        g.samples += 1;
                    }
                    std::thread::sleep(period);
                }
            })
            .ok();
        Sampler {
            pid,
            stop,
            state,
            thread,
        }
    }

    fn now(&self) -> Status {
        status(self.pid).unwrap_or_else(|| self.lock().last)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a new window.
    pub fn begin(&self) {
        let now = self.now();
        let mut g = self.lock();
        g.window_start = now.rss_kib;
        g.window_peak = now.rss_kib;
        g.window_threads = threads(self.pid).unwrap_or_default();
    }

    /// The window so far.
    pub fn window(&self) -> Window {
        let now = self.now();
        let mut g = self.lock();
        g.window_peak = g.window_peak.max(now.rss_kib);
        Window {
            start_kib: g.window_start,
            peak_kib: g.window_peak,
            end_kib: now.rss_kib,
            hwm_kib: now.hwm_kib,
            threads_own: g.window_threads.0,
            threads_soft: g.window_threads.1,
        }
    }

    /// Resident memory now, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.now().rss_kib
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u64 {
        self.lock().samples
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let s = status(std::process::id()).expect("/proc/self/status");
        assert!(s.rss_kib > 0);
        assert!(s.hwm_kib >= s.rss_kib);
    }

    #[test]
    fn a_window_sees_growth() {
        let sampler = Sampler::start(std::process::id(), Duration::from_millis(5));
        sampler.begin();
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&mut v);
        let w = sampler.window();
        assert!(
            w.peak_kib >= w.start_kib + (60 << 10),
            "{w:?} after touching 64 MiB"
        );
        drop(v);
        let w2 = sampler.window();
        assert!(w2.peak_kib >= w.peak_kib, "a window's peak never falls");
    }
}

/// CPU time (user + system) a process has used so far, threads that
/// ended included, in seconds (0 when it cannot be read).
fn cpu_secs(pid: u32) -> f64 {
    hipobj_net::cpu::used(pid).map_or(0.0, |d| d.as_secs_f64())
}

/// CPU seconds of the store, the gateway and this process at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// The upstream store.
    pub store: f64,
    /// The gateway.
    pub gateway: f64,
    /// This process (the clients).
    pub client: f64,
}

impl Cpu {
    /// Now, for these processes (the store may be several).
    pub fn now(store: &[u32], gateway: u32) -> Cpu {
        Cpu {
            store: store.iter().map(|p| cpu_secs(*p)).sum(),
            gateway: cpu_secs(gateway),
            client: cpu_secs(std::process::id()),
        }
    }

    /// What was used since `earlier`, added to `self`.
    pub fn add_since(&mut self, earlier: Cpu, later: Cpu) {
        self.store += later.store - earlier.store;
        self.gateway += later.gateway - earlier.gateway;
        self.client += later.client - earlier.client;
    }
}
