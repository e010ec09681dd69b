//! The provider-agnostic behaviour checks of `tests/behaviour`, against
//! the soft provider always, and against libibverbs when
//! `HIPOBJ_TEST_IBV_DEVICE` names a device (`rxe0` for Soft-RoCE, or a real
//! NIC such as `mlx5_0`, `bnxt_re0`, `ionic_0`). Without the variable the
//! libibverbs runs print that they were skipped.

#![forbid(unsafe_code)]

mod behaviour;

use hipobj_fabric::ibverbs::VerbsProvider;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;

/// Names the libibverbs device the behaviour tests run on.
const ENV_DEVICE: &str = "HIPOBJ_TEST_IBV_DEVICE";

fn soft() -> SoftProvider {
    SoftProvider::default()
}

/// The libibverbs provider and the device to use, when asked for.
fn verbs() -> Option<(VerbsProvider, String)> {
    match std::env::var(ENV_DEVICE) {
        Ok(d) if !d.trim().is_empty() => Some((VerbsProvider::new(), d.trim().to_string())),
        _ => {
            println!("SKIPPED the libibverbs run: set {ENV_DEVICE} (e.g. rxe0) to run it");
            None
        }
    }
}

fn run_both(check: impl Fn(&dyn Provider, &str)) {
    check(&soft(), "soft0");
    if let Some((p, dev)) = verbs() {
        check(&p, &dev);
    }
}

#[test]
fn write_then_read_is_byte_exact() {
    run_both(|p, d| {
        for len in [1, 4093, 1 << 20] {
            behaviour::write_then_read_is_byte_exact(p, d, len);
        }
    });
}

#[test]
fn write_without_remote_write_is_a_remote_access_error() {
    run_both(behaviour::write_without_remote_write_is_a_remote_access_error);
}

#[test]
fn unanswered_requests_exceed_the_retry_count() {
    run_both(behaviour::unanswered_requests_exceed_the_retry_count);
}

#[test]
fn sends_and_immediates_complete_receives() {
    run_both(behaviour::sends_and_immediates_complete_receives);
}

#[test]
fn a_send_without_a_receive_exhausts_the_rnr_retries() {
    run_both(behaviour::a_send_without_a_receive_exhausts_the_rnr_retries);
}

#[test]
fn unsignalled_writes_complete_silently() {
    run_both(behaviour::unsignalled_writes_complete_silently);
}

#[test]
fn illegal_transitions_are_refused() {
    run_both(behaviour::illegal_transitions_are_refused);
}
