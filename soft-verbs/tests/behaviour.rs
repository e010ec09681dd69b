//! The fabric's provider-agnostic behaviour suite (`fabric/tests/behaviour`,
//! which also runs on the soft provider itself), on this project's
//! libibverbs provider (`hipobj_fabric::ibverbs`, the code a ConnectX, bnxt
//! or ionic deployment runs) loading soft-verbs as its libibverbs.

#![forbid(unsafe_code)]

#[path = "../../fabric/tests/behaviour/mod.rs"]
mod behaviour;

use hipobj_fabric::ibverbs::VerbsProvider;
use hipobj_fabric::seam::Provider;
use hipobj_soft_verbs::testing::library_path;

const DEVICE: &str = "hipobj_soft0";

fn on_soft_verbs(check: impl Fn(&dyn Provider, &str)) {
    let p = VerbsProvider::with_library(library_path().to_string_lossy().into_owned());
    let names = p.device_names().expect("soft-verbs lists its devices");
    assert!(names.iter().any(|n| n == DEVICE), "{names:?}");
    check(&p, DEVICE);
}

#[test]
fn write_then_read_is_byte_exact() {
    on_soft_verbs(|p, d| {
        for len in [1, 4093, 1 << 20] {
            behaviour::write_then_read_is_byte_exact(p, d, len);
        }
    });
}

#[test]
fn write_without_remote_write_is_a_remote_access_error() {
    on_soft_verbs(behaviour::write_without_remote_write_is_a_remote_access_error);
}

#[test]
fn unanswered_requests_exceed_the_retry_count() {
    on_soft_verbs(behaviour::unanswered_requests_exceed_the_retry_count);
}

#[test]
fn sends_and_immediates_complete_receives() {
    on_soft_verbs(behaviour::sends_and_immediates_complete_receives);
}

#[test]
fn a_send_without_a_receive_exhausts_the_rnr_retries() {
    on_soft_verbs(behaviour::a_send_without_a_receive_exhausts_the_rnr_retries);
}

#[test]
fn unsignalled_writes_complete_silently() {
    on_soft_verbs(behaviour::unsignalled_writes_complete_silently);
}

#[test]
fn illegal_transitions_are_refused() {
    on_soft_verbs(behaviour::illegal_transitions_are_refused);
}

/// The GID table the provider reads: one RoCE v2 entry, the device's
/// address IPv4-mapped, found without sysfs (soft-verbs has none).
#[test]
fn the_gid_table_is_one_ipv4_mapped_entry() {
    on_soft_verbs(|p, d| {
        let dev = hipobj_fabric::Device::open(p, d).expect("open");
        let table = dev.gid_table(1).expect("gid_table");
        assert_eq!(table.len(), 1, "{table:?}");
        assert_eq!(table[0].index, 0);
        assert!(table[0].gid.is_ipv4_mapped(), "{table:?}");
        assert_eq!(
            table[0].gid_type,
            hipobj_fabric::GidType::RoceV2,
            "{table:?}"
        );
    });
}
