//! The provider-agnostic DC checks of `tests/behaviour/dc.rs`, against the
//! soft provider always, and against libibverbs when
//! `HIPOBJ_TEST_IBV_DEVICE` names a device that has DC (a ConnectX, e.g.
//! `mlx5_0`, with `libmlx5.so.1`); on a device without DC the libibverbs
//! run prints why and is skipped. `docs/hardware.md` has the steps.

#![forbid(unsafe_code)]

mod behaviour;

use behaviour::dc;
use hipobj_fabric::ibverbs::VerbsProvider;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;

const ENV_DEVICE: &str = "HIPOBJ_TEST_IBV_DEVICE";

fn run_both(check: impl Fn(&dyn Provider, &str)) {
    check(&SoftProvider::default(), "soft0");
    match std::env::var(ENV_DEVICE) {
        Ok(d) if !d.trim().is_empty() => {
            let p = VerbsProvider::new();
            if dc::has_dc(&p, d.trim()) {
                check(&p, d.trim());
            }
        }
        _ => println!("SKIPPED the libibverbs run: set {ENV_DEVICE} (e.g. mlx5_0) to run it"),
    }
}

#[test]
fn dc_write_then_read_is_byte_exact() {
    run_both(|p, d| {
        for len in [1, 4093, 1 << 20] {
            dc::dc_write_then_read_is_byte_exact(p, d, len);
        }
    });
}

#[test]
fn dc_with_a_wrong_key_is_dropped() {
    run_both(dc::dc_with_a_wrong_key_is_dropped);
}
