//! A process's CPU time as the benchmark tools read it (`hipobj bench
//! --server-pid`, `hipobj-bench`): user plus system time from
//! `/proc/<pid>/stat`, which any process may read of any other, in the
//! kernel's clock ticks (`rustix::param::clock_ticks_per_second`, from
//! the auxiliary vector). It counts every thread, those that have ended
//! included.

use std::time::Duration;

/// The CPU time process `pid` has used so far; `None` when there is no
/// such process (or no `/proc`).
pub fn used(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ticks(&stat).map(|t| ticks_to_duration(t, rustix::param::clock_ticks_per_second()))
}

/// utime + stime of a `stat` line. The command name (field 2, in
/// parentheses) may hold spaces and parentheses, so the fields are counted
/// from its last `)`: state is field 3, utime 14 and stime 15.
fn ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    utime.checked_add(stime)
}

fn ticks_to_duration(ticks: u64, per_second: u64) -> Duration {
    let per_second = per_second.max(1);
    Duration::from_secs(ticks / per_second)
        + Duration::from_nanos((ticks % per_second) * 1_000_000_000 / per_second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_counts_its_work() {
        let me = std::process::id();
        let before = used(me).expect("/proc/self/stat");
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = used(me).expect("/proc/self/stat");
        assert!(
            after > before,
            "{before:?} then {after:?} after 100 ms of work"
        );
    }

    #[test]
    fn no_process_no_time() {
        assert_eq!(used(0), None);
        assert_eq!(used(u32::MAX), None);
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 0 0";
        assert_eq!(ticks(line), Some(325));
        assert_eq!(ticks("4242 (x) S 1"), None);
        assert_eq!(ticks_to_duration(325, 100), Duration::from_millis(3250));
        assert_eq!(ticks_to_duration(3, 1000), Duration::from_millis(3));
    }
}
