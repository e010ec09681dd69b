//! The provider-agnostic DC checks of `tests/behaviour/dc.rs`, against the
//! soft provider always, and against libibverbs in the `verbs::` tests,
//! ignored unless asked for (`-- --ignored`: they need an RDMA device), on
//! the device `HIPOBJ_TEST_IBV_DEVICE` names when it has DC (a ConnectX,
//! e.g. `mlx5_0`, with `libmlx5.so.1`); on a device without DC they print
//! why and check nothing. `docs/hardware.md` has the steps.

#![forbid(unsafe_code)]

mod behaviour;

use behaviour::dc;
use hipobj_fabric::seam::Provider;

/// `check` on `device`, if it has DC (always so on the soft provider).
fn with_dc(p: &dyn Provider, device: &str, check: impl Fn(&dyn Provider, &str)) {
    if dc::has_dc(p, device) {
        check(p, device);
    }
}

on_both_providers! {
    dc_write_then_read_is_byte_exact => |p: &dyn Provider, d: &str| {
        with_dc(p, d, |p, d| {
            for len in [1, 4093, 1 << 20] {
                dc::dc_write_then_read_is_byte_exact(p, d, len);
            }
        })
    };
    dc_with_a_wrong_key_is_dropped => |p: &dyn Provider, d: &str| {
        with_dc(p, d, dc::dc_with_a_wrong_key_is_dropped)
    };
}
