//! The provider-agnostic behaviour checks of `tests/behaviour`, against
//! the soft provider always, and against libibverbs on the device
//! `HIPOBJ_TEST_IBV_DEVICE` names (`rxe0` for Soft-RoCE, or a real NIC such
//! as `mlx5_0`, `bnxt_re0`, `ionic_0`) in the `verbs::` tests, ignored
//! unless asked for (`-- --ignored`): they need an RDMA device.

#![forbid(unsafe_code)]

mod behaviour;

use hipobj_fabric::seam::Provider;

on_both_providers! {
    write_then_read_is_byte_exact => |p: &dyn Provider, d: &str| {
        for len in [1, 4093, 1 << 20] {
            behaviour::write_then_read_is_byte_exact(p, d, len);
        }
    };
    write_without_remote_write_is_a_remote_access_error =>
        behaviour::write_without_remote_write_is_a_remote_access_error;
    unanswered_requests_exceed_the_retry_count =>
        behaviour::unanswered_requests_exceed_the_retry_count;
    sends_and_immediates_complete_receives => behaviour::sends_and_immediates_complete_receives;
    a_send_without_a_receive_exhausts_the_rnr_retries =>
        behaviour::a_send_without_a_receive_exhausts_the_rnr_retries;
    unsignalled_writes_complete_silently => behaviour::unsignalled_writes_complete_silently;
    illegal_transitions_are_refused => behaviour::illegal_transitions_are_refused;
}
