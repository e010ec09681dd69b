//! NIC and GID selection rules.

#![forbid(unsafe_code)]

use hipobj::platform::topology::{NicInfo, PortInfo};
use hipobj::select::{
    bus_distance, choose_nic, closest_nic, hint_names, pick_best_gid, NicChoice, SelectError,
    Vendor, VENDOR_BROADCOM, VENDOR_MELLANOX, VENDOR_PENSANDO,
};
use hipobj::testing::FakeTopology;
use hipobj_fabric::{Gid, GidEntry, GidType};
use std::net::Ipv4Addr;

fn nic(name: &str, bus: Option<&str>, active: bool) -> NicInfo {
    NicInfo {
        name: name.into(),
        pci_bus_id: bus.map(Into::into),
        numa_node: None,
        vendor_id: Some(VENDOR_BROADCOM),
        ports: vec![PortInfo {
            port: 1,
            active,
            link_layer: Some("Ethernet".into()),
        }],
    }
}

fn topo(nics: Vec<NicInfo>) -> FakeTopology {
    FakeTopology {
        nics,
        ..FakeTopology::default()
    }
}

fn name_of(n: Option<&NicInfo>) -> Option<&str> {
    n.map(|n| n.name.as_str())
}

fn not_found(r: Result<NicChoice, SelectError>) -> String {
    match r {
        Err(SelectError::NicNotFound { reason }) => reason,
        other => panic!("expected NicNotFound, got {other:?}"),
    }
}

// ---------------------------------------------------------------- distance

#[test]
fn bus_distance_examples() {
    let gpu = "0000:43:00.0";
    assert_eq!(bus_distance(gpu, "0000:43:00.0"), 0);
    // The PCI function is ignored.
    assert_eq!(bus_distance(gpu, "0000:43:00.1"), 0);
    assert_eq!(bus_distance(gpu, "0000:43:00.7"), 0);
    // Common prefix "0000:4", then "1:00" / "3:00" remain.
    assert_eq!(bus_distance(gpu, "0000:41:00.0"), 4);
    assert_eq!(bus_distance(gpu, "0000:c1:00.0"), 5);
    assert_eq!(bus_distance(gpu, "0001:43:00.0"), 7);
    assert_eq!(bus_distance(gpu, "0000:43:01.0"), 1);
    // Case and surrounding whitespace don't matter.
    assert_eq!(bus_distance("0000:C1:00.0", "0000:c1:00.1\n"), 0);
    // Symmetric; the longer id's length counts.
    assert_eq!(bus_distance("0000:43:00", "10000:43:00.0"), 11);
    assert_eq!(bus_distance("10000:43:00.0", "0000:43:00"), 11);
    assert_eq!(bus_distance("0000:43:00.0", "0000:43:00:00.0"), 3);
    // Degenerate input is just text.
    assert_eq!(bus_distance("", ""), 0);
    assert_eq!(bus_distance("", "0000:43:00.0"), 10);
    assert_eq!(bus_distance(".", "."), 0);
    assert_eq!(bus_distance("é.1", "é.2"), 0);
    assert_eq!(bus_distance("aé", "aè"), 1);
}

// ---------------------------------------------------------------- closest

#[test]
fn closest_nic_wins() {
    let nics = [
        nic("far", Some("0000:c1:00.0"), true),
        nic("near", Some("0000:41:00.0"), true),
        nic("same", Some("0000:43:00.1"), true),
    ];
    assert_eq!(
        name_of(closest_nic("0000:43:00.0", &nics, None)),
        Some("same")
    );
    assert_eq!(
        name_of(closest_nic("0000:c2:00.0", &nics, None)),
        Some("far")
    );
    assert_eq!(closest_nic("0000:43:00.0", &[], None), None);
}

#[test]
fn first_of_equally_close_nics_wins() {
    let nics = [
        nic("a", Some("0000:c1:00.0"), true),
        nic("b", Some("0000:41:00.0"), true),
        nic("c", Some("0000:41:00.1"), true),
    ];
    assert_eq!(name_of(closest_nic("0000:43:00.0", &nics, None)), Some("b"));
    let nics = [
        nic("c", Some("0000:41:00.1"), true),
        nic("b", Some("0000:41:00.0"), true),
    ];
    assert_eq!(name_of(closest_nic("0000:43:00.0", &nics, None)), Some("c"));
}

#[test]
fn inactive_and_unlocated_nics_are_skipped() {
    let mut no_ports = nic("noports", Some("0000:43:00.0"), true);
    no_ports.ports.clear();
    let nics = [
        nic("down", Some("0000:43:00.0"), false),
        no_ports,
        nic("nobus", None, true),
        nic("up", Some("0000:c1:00.0"), true),
    ];
    assert_eq!(
        name_of(closest_nic("0000:43:00.0", &nics, None)),
        Some("up")
    );
    assert_eq!(closest_nic("0000:43:00.0", &nics[..3], None), None);

    // A NIC whose second port is the active one counts.
    let mut second = nic("second", Some("0000:43:00.0"), false);
    second.ports.push(PortInfo {
        port: 2,
        active: true,
        link_layer: None,
    });
    let nics = [nics[3].clone(), second];
    assert_eq!(
        name_of(closest_nic("0000:43:00.0", &nics, None)),
        Some("second")
    );
}

#[test]
fn hint_is_an_allow_list() {
    let nics = [
        nic("mlx5_0", Some("0000:43:00.0"), true),
        nic("bnxt_re0", Some("0000:41:00.0"), true),
        nic("bnxt_re1", Some("0000:c1:00.0"), true),
    ];
    let gpu = "0000:43:00.0";
    assert_eq!(
        name_of(closest_nic(gpu, &nics, Some("bnxt_re1"))),
        Some("bnxt_re1")
    );
    assert_eq!(
        name_of(closest_nic(gpu, &nics, Some(" bnxt_re1 , bnxt_re0 "))),
        Some("bnxt_re0")
    );
    assert_eq!(
        name_of(closest_nic(gpu, &nics, Some(",,bnxt_re1,"))),
        Some("bnxt_re1")
    );
    // Names match exactly.
    assert_eq!(closest_nic(gpu, &nics, Some("bnxt_re")), None);
    assert_eq!(closest_nic(gpu, &nics, Some("BNXT_RE0")), None);
    assert_eq!(closest_nic(gpu, &nics, Some("ionic_0")), None);
    // A hint with no names restricts nothing.
    assert_eq!(name_of(closest_nic(gpu, &nics, Some(""))), Some("mlx5_0"));
    assert_eq!(
        name_of(closest_nic(gpu, &nics, Some(" , "))),
        Some("mlx5_0")
    );
    // The allow-list doesn't bring back inactive NICs.
    let nics = [nic("down", Some("0000:43:00.0"), false)];
    assert_eq!(closest_nic(gpu, &nics, Some("down")), None);
}

#[test]
fn hint_names_parsing() {
    assert!(hint_names(None).is_empty());
    assert!(hint_names(Some("")).is_empty());
    assert!(hint_names(Some(" ,\t, ")).is_empty());
    assert_eq!(hint_names(Some("a")), ["a"]);
    assert_eq!(hint_names(Some(" a ,, b,c ")), ["a", "b", "c"]);
}

// ---------------------------------------------------------------- choose

#[test]
fn choose_closest_with_a_gpu() {
    let t = topo(vec![
        nic("bnxt_re0", Some("0000:c1:00.0"), true),
        nic("bnxt_re1", Some("0000:41:00.0"), true),
    ]);
    let c = choose_nic(Some("0000:43:00.0"), &t, None).unwrap();
    assert_eq!(
        c,
        NicChoice::Topology {
            name: "bnxt_re1".into()
        }
    );
    assert_eq!(c.name(), "bnxt_re1");
    // The hint filters, and topology still decides among what it allows.
    let c = choose_nic(Some("0000:43:00.0"), &t, Some("bnxt_re0,ionic_0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Topology {
            name: "bnxt_re0".into()
        }
    );
}

#[test]
fn gpu_less_host_falls_back_to_the_hint() {
    let t = topo(vec![nic("bnxt_re0", Some("0000:41:00.0"), true)]);
    let c = choose_nic(None, &t, Some("soft0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Hint {
            name: "soft0".into()
        }
    );
    // A list: its first name.
    let c = choose_nic(None, &t, Some(" , rxe0 , soft0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Hint {
            name: "rxe0".into()
        }
    );
    assert_eq!(c.name(), "rxe0");
    // An empty GPU bus id is no GPU.
    let c = choose_nic(Some("  "), &t, Some("soft0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Hint {
            name: "soft0".into()
        }
    );
}

#[test]
fn no_located_active_nic_falls_back_to_the_hint() {
    let t = topo(vec![
        nic("rxe0", None, true),
        nic("mlx5_0", Some("0000:43:00.0"), false),
    ]);
    let c = choose_nic(Some("0000:43:00.0"), &t, Some("rxe0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Hint {
            name: "rxe0".into()
        }
    );
    let c = choose_nic(Some("0000:43:00.0"), &topo(vec![]), Some("soft0")).unwrap();
    assert_eq!(
        c,
        NicChoice::Hint {
            name: "soft0".into()
        }
    );
}

#[test]
fn nic_not_found_without_a_hint() {
    let t = topo(vec![nic("bnxt_re0", Some("0000:41:00.0"), true)]);
    let why = not_found(choose_nic(None, &t, None));
    assert!(why.contains("no GPU"), "{why}");
    let why = not_found(choose_nic(None, &t, Some(" , ")));
    assert!(why.contains("no GPU"), "{why}");

    let t = topo(vec![
        nic("down", Some("0000:41:00.0"), false),
        nic("nobus", None, true),
    ]);
    let why = not_found(choose_nic(Some("0000:43:00.0"), &t, None));
    assert!(
        why.contains("no active NIC with a known PCI bus id"),
        "{why}"
    );
    let why = not_found(choose_nic(Some("0000:43:00.0"), &topo(vec![]), None));
    assert!(why.contains("no active NIC"), "{why}");

    let err = choose_nic(None, &t, None).unwrap_err();
    assert!(err.to_string().starts_with("no RDMA NIC found: "), "{err}");
}

#[test]
fn nic_not_found_when_the_hint_excludes_every_active_nic() {
    let t = topo(vec![
        nic("bnxt_re0", Some("0000:41:00.0"), true),
        nic("bnxt_re1", Some("0000:c1:00.0"), false),
    ]);
    let why = not_found(choose_nic(
        Some("0000:43:00.0"),
        &t,
        Some("ionic_0,bnxt_re1"),
    ));
    assert!(why.contains("no active NIC matched the NIC hint"), "{why}");
    assert!(why.contains("ionic_0,bnxt_re1"), "{why}");
    assert!(why.contains("bnxt_re0"), "{why}");
}

// ---------------------------------------------------------------- GID

fn e(index: u16, gid: Gid, gid_type: GidType) -> GidEntry {
    GidEntry {
        index,
        gid,
        gid_type,
    }
}

fn v4(last: u8) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, last))
}

fn link_local(last: u8) -> Gid {
    let mut b = [0u8; 16];
    b[0] = 0xfe;
    b[1] = 0x80;
    b[8..].copy_from_slice(&[0x0a, 0x2b, 0x3c, 0xff, 0xfe, 0x4d, 0x5e, last]);
    Gid(b)
}

fn global(last: u8) -> Gid {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    b[15] = last;
    Gid(b)
}

#[test]
fn gid_preference_order() {
    use GidType::{RoceV1, RoceV2};
    // Every class, listed worst first so index order doesn't decide.
    let mut table = vec![
        e(0, link_local(1), RoceV1),
        e(1, global(1), RoceV1),
        e(2, link_local(1), RoceV2),
        e(3, global(1), RoceV2),
        e(4, v4(1), RoceV2),
    ];
    for expect in [4, 3, 2, 1, 0] {
        assert_eq!(pick_best_gid(&table), expect);
        table.retain(|x| x.index != expect);
    }
    assert_eq!(pick_best_gid(&table), 0);
    // An IPv4-mapped RoCE v1 GID counts as RoCE v1 global.
    let table = [e(7, link_local(1), RoceV1), e(9, v4(1), RoceV1)];
    assert_eq!(pick_best_gid(&table), 9);
    let table = [e(9, v4(1), RoceV1), e(8, global(1), RoceV1)];
    assert_eq!(pick_best_gid(&table), 8);
    // Any RoCE v2 beats any RoCE v1.
    let table = [e(1, v4(1), RoceV1), e(6, link_local(1), RoceV2)];
    assert_eq!(pick_best_gid(&table), 6);
}

#[test]
fn gid_ties_go_to_the_lowest_index() {
    use GidType::RoceV2;
    let table = [
        e(9, v4(2), RoceV2),
        e(5, v4(3), RoceV2),
        e(7, v4(1), RoceV2),
    ];
    assert_eq!(pick_best_gid(&table), 5);
    let table = [e(3, global(2), RoceV2), e(2, global(1), RoceV2)];
    assert_eq!(pick_best_gid(&table), 2);
}

#[test]
fn gid_skips_unconfigured_unknown_and_ib_entries() {
    use GidType::{Ib, RoceV1, RoceV2, Unknown};
    // All-zero entries are skipped whatever their type says.
    let table = [
        e(0, Gid::ZERO, RoceV2),
        e(1, v4(1), Unknown),
        e(2, v4(1), Ib),
        e(3, link_local(1), RoceV1),
    ];
    assert_eq!(pick_best_gid(&table), 3);
    // No candidate at all: index 0, even if there's no entry 0.
    let table = [
        e(4, Gid::ZERO, RoceV2),
        e(5, v4(1), Unknown),
        e(6, link_local(1), Ib),
        e(7, Gid::ZERO, Unknown),
    ];
    assert_eq!(pick_best_gid(&table), 0);
    assert_eq!(pick_best_gid(&[]), 0);
}

#[test]
fn gid_link_local_with_ff_ff_in_the_middle_is_not_ipv4_mapped() {
    use GidType::RoceV2;
    // fe80::0aff:ff..: bytes 10 and 11 are ff ff, yet it's link-local.
    let mut b = link_local(1).0;
    b[10] = 0xff;
    b[11] = 0xff;
    let odd = Gid(b);
    assert!(odd.is_ipv4_mapped() && odd.is_link_local());
    let table = [e(0, odd, RoceV2), e(1, global(1), RoceV2)];
    assert_eq!(pick_best_gid(&table), 1);
}

#[test]
fn gid_from_a_real_table() {
    // bnxt_re port 2 of the fixture: v1/v2 link-local, v1/v2 IPv4, v1/v2
    // global, two unconfigured.
    use GidType::{RoceV1, RoceV2, Unknown};
    let table = [
        e(0, link_local(0x6f), RoceV1),
        e(1, link_local(0x6f), RoceV2),
        e(2, v4(1), RoceV1),
        e(3, v4(1), RoceV2),
        e(4, global(0x42), RoceV1),
        e(5, global(0x42), RoceV2),
        e(6, Gid::ZERO, Unknown),
        e(7, Gid::ZERO, Unknown),
    ];
    assert_eq!(pick_best_gid(&table), 3);
    // Without IPv4: the global one.
    assert_eq!(pick_best_gid(&[table[0], table[1], table[4], table[5]]), 5);
}

// ---------------------------------------------------------------- vendor

#[test]
fn vendors() {
    assert_eq!(VENDOR_BROADCOM, 0x14E4);
    assert_eq!(VENDOR_PENSANDO, 0x1DD8);
    assert_eq!(VENDOR_MELLANOX, 0x15B3);
    assert_eq!(Vendor::from_id(0x14e4), Vendor::Bnxt);
    assert_eq!(Vendor::from_id(0x1dd8), Vendor::Ionic);
    assert_eq!(Vendor::from_id(0x15b3), Vendor::Other);
    assert_eq!(Vendor::from_id(0), Vendor::Other);
    assert_eq!(Vendor::from_id(u32::MAX), Vendor::Other);
}
