//! `SysfsTopology` over fake sysfs trees modelled on real NICs, and over
//! hostile ones.

#![forbid(unsafe_code)]

use hipobj::platform::topology::{NicInfo, NicTopology, PortInfo, SysfsTopology, MAX_ATTR_BYTES};
use hipobj::testing::FakeTopology;
use hipobj_fabric::{Gid, GidEntry, GidType};
use std::fs;
use std::net::Ipv4Addr;
use std::path::Path;

/// Builds the tree a compact description names under `root` (format in
/// `tests/fixtures/sysfs/README.md`).
fn build_tree(root: &Path, desc: &str) {
    let mut base = root.to_path_buf();
    for (n, raw) in desc.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(dir) = line.strip_prefix("@ ") {
            base = root.join(dir.trim());
            continue;
        }
        if let Some((path, target)) = line.split_once(" -> ") {
            let p = base.join(path.trim());
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target.trim(), &p)
                .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        } else if let Some((path, text)) = line.split_once(" = ") {
            let p = base.join(path.trim());
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, format!("{}\n", text.replace("\\n", "\n")))
                .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        } else if let Some(dir) = line.strip_suffix('/') {
            fs::create_dir_all(base.join(dir)).unwrap();
        } else {
            panic!("line {}: can't parse {raw:?}", n + 1);
        }
    }
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A temporary root holding the named fixtures.
fn tree(fixtures: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in fixtures {
        build_tree(dir.path(), &fixture(f));
    }
    dir
}

fn gid(s: &str) -> Gid {
    Gid::from_hex(&s.replace(':', "")).unwrap()
}

fn entry(index: u16, g: &str, gid_type: GidType) -> GidEntry {
    GidEntry {
        index,
        gid: gid(g),
        gid_type,
    }
}

fn port(port: u8, active: bool, link_layer: &str) -> PortInfo {
    PortInfo {
        port,
        active,
        link_layer: Some(link_layer.to_owned()),
    }
}

const ZERO: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

#[test]
fn reads_every_field_of_real_layouts() {
    let root = tree(&["bnxt_re.tree", "ionic.tree", "mlx5.tree"]);
    let topo = SysfsTopology::new(root.path());
    assert_eq!(topo.root(), root.path());
    let nics = topo.nics();
    assert_eq!(
        nics,
        vec![
            NicInfo {
                name: "bnxt_re0".into(),
                pci_bus_id: Some("0000:41:00.0".into()),
                numa_node: Some(0),
                vendor_id: Some(0x14e4),
                ports: vec![port(1, false, "Ethernet"), port(2, true, "Ethernet")],
            },
            NicInfo {
                name: "ionic_0".into(),
                pci_bus_id: Some("0000:c1:00.0".into()),
                numa_node: Some(1),
                vendor_id: Some(0x1dd8),
                ports: vec![port(1, true, "Ethernet")],
            },
            NicInfo {
                name: "mlx5_0".into(),
                pci_bus_id: Some("0000:a1:00.0".into()),
                numa_node: None,
                vendor_id: Some(0x15b3),
                ports: vec![port(1, false, "Ethernet")],
            },
            NicInfo {
                name: "mlx5_1".into(),
                pci_bus_id: Some("0000:a1:00.1".into()),
                numa_node: None,
                vendor_id: Some(0x15b3),
                ports: vec![port(1, true, "InfiniBand")],
            },
        ]
    );
    let active: Vec<_> = nics.iter().map(NicInfo::first_active_port).collect();
    assert_eq!(active, vec![Some(2), Some(1), None, Some(1)]);
    assert!(!nics[2].has_active_port());
}

#[test]
fn bnxt_gid_tables() {
    let root = tree(&["bnxt_re.tree"]);
    let topo = SysfsTopology::new(root.path());
    let ll1 = "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6e";
    assert_eq!(
        topo.gids("bnxt_re0", 1),
        vec![
            entry(0, ll1, GidType::RoceV1),
            entry(1, ll1, GidType::RoceV2),
            entry(2, ZERO, GidType::Unknown),
        ]
    );
    let ll = "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f";
    let v4 = "0000:0000:0000:0000:0000:ffff:0a00:0001";
    let global = "2001:0db8:0000:0000:0000:0000:0000:0042";
    let table = topo.gids("bnxt_re0", 2);
    assert_eq!(
        table,
        vec![
            entry(0, ll, GidType::RoceV1),
            entry(1, ll, GidType::RoceV2),
            entry(2, v4, GidType::RoceV1),
            entry(3, v4, GidType::RoceV2),
            entry(4, global, GidType::RoceV1),
            entry(5, global, GidType::RoceV2),
            entry(6, ZERO, GidType::Unknown),
            entry(7, ZERO, GidType::Unknown),
        ]
    );
    assert_eq!(table[3].gid.ipv4(), Some(Ipv4Addr::new(10, 0, 0, 1)));
    assert!(table[0].gid.is_link_local());
    assert!(table[6].gid.is_zero());
    for e in &table {
        assert_eq!(topo.gid_type("bnxt_re0", 2, e.index), e.gid_type);
    }
    assert_eq!(topo.gid_type("bnxt_re0", 2, 8), GidType::Unknown);
    assert_eq!(topo.gid_type("bnxt_re0", 3, 0), GidType::Unknown);
    assert!(topo.gids("bnxt_re0", 3).is_empty());
    assert!(topo.gids("bnxt_re1", 1).is_empty());
}

#[test]
fn ionic_and_mlx5_gid_tables() {
    let root = tree(&["ionic.tree", "mlx5.tree"]);
    let topo = SysfsTopology::new(root.path());
    let ll = "fe80:0000:0000:0000:0aae:c1ff:fe00:0001";
    let v4 = "0000:0000:0000:0000:0000:ffff:0a01:0005";
    assert_eq!(
        topo.gids("ionic_0", 1),
        vec![
            entry(0, ll, GidType::RoceV1),
            entry(1, ll, GidType::RoceV2),
            entry(2, v4, GidType::RoceV1),
            entry(3, v4, GidType::RoceV2),
        ]
    );
    let ll0 = "fe80:0000:0000:0000:1e34:daff:fe5a:0001";
    assert_eq!(
        topo.gids("mlx5_0", 1),
        vec![
            entry(0, ll0, GidType::RoceV1),
            entry(1, ll0, GidType::RoceV2)
        ]
    );
    // "IB/RoCE v1" on an InfiniBand port is an IB GID.
    let ib = "fe80:0000:0000:0000:1e34:da03:005a:0002";
    assert_eq!(topo.gids("mlx5_1", 1), vec![entry(0, ib, GidType::Ib)]);
    assert_eq!(topo.gid_type("mlx5_1", 1, 0), GidType::Ib);
}

#[test]
fn device_names_cannot_escape_the_class_directory() {
    let root = tree(&["ionic.tree"]);
    let topo = SysfsTopology::new(root.path().join("sys/class/infiniband/ionic_0/ports/1"));
    // Sanity: the real name works from the real root.
    let real = SysfsTopology::new(root.path());
    assert_eq!(real.gid_type("ionic_0", 1, 3), GidType::RoceV2);
    for name in ["", ".", "..", "../ionic_0", "ionic_0/../ionic_0", "a\0b"] {
        assert_eq!(real.gid_type(name, 1, 3), GidType::Unknown, "{name:?}");
        assert!(real.gids(name, 1).is_empty(), "{name:?}");
    }
    assert!(topo.nics().is_empty());
}

#[test]
fn missing_trees_read_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let topo = SysfsTopology::new(dir.path().join("nope"));
    assert!(topo.nics().is_empty());
    assert!(topo.gids("mlx5_0", 1).is_empty());
    assert_eq!(topo.gid_type("mlx5_0", 1, 0), GidType::Unknown);

    // A device directory with nothing in it.
    build_tree(dir.path(), "sys/class/infiniband/bare/");
    let nics = SysfsTopology::new(dir.path()).nics();
    assert_eq!(
        nics,
        vec![NicInfo {
            name: "bare".into(),
            ..NicInfo::default()
        }]
    );
}

#[test]
fn hostile_content_never_panics_and_reads_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    build_tree(
        root,
        r"
@ sys/class/infiniband/evil0
# `device` links to a network interface, and has no uevent either.
device -> ../../../eth0
ports/1/state = ACTIVE 4
ports/1/link_layer = \n
ports/1/gids/0 = fe80::1
ports/1/gids/1 = fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f:0000
ports/1/gids/2 = not a gid at all
ports/1/gids/x = 0000:0000:0000:0000:0000:ffff:0a00:0001
ports/1/gids/70000 = 0000:0000:0000:0000:0000:ffff:0a00:0001
ports/1/gids/3 = 0000:0000:0000:0000:0000:ffff:0a00:0001
ports/1/gid_attrs/types/3 = RoCE v2 and then some
ports/1/gids/4/
ports/0/state = 4: ACTIVE
ports/abc/state = 4: ACTIVE
ports/300/state = 4: ACTIVE
ports/2/state = 99999999999999999999: ACTIVE
ports/3/state = -4: ACTIVE
ports/4/state = 4 : ACTIVE
ports/5/state = 5: ACTIVE_DEFER

@ sys/class/infiniband/evil1
# A symlink loop, and nonsense numbers.
device -> device
ports/1/state -> state

@ sys/class/infiniband/evil2
device/numa_node = abc
device/vendor = 0xzz14
device/uevent = PCI_SLOT_NAME=../../etc\nPCI_SLOT_NAME=0000:01:00.0
ports/1/state = 4: ACTIVE
ports/1/link_layer = Ethernet

@ sys/class/infiniband/evil3
device/numa_node = 99999999999999999999
device/vendor = 0x123456789
",
    );
    // Binary garbage and an oversized file.
    let evil3 = root.join("sys/class/infiniband/evil3");
    fs::create_dir_all(evil3.join("ports/1")).unwrap();
    fs::write(evil3.join("ports/1/state"), [0xff, 0xfe, 0x00, b'4', 0x80]).unwrap();
    let mut big = b"4: ACTIVE".to_vec();
    big.resize(1 << 20, b'x');
    fs::write(evil3.join("ports/1/link_layer"), &big).unwrap();
    // A class entry that is a plain file.
    fs::write(root.join("sys/class/infiniband/stray"), "hello").unwrap();

    let topo = SysfsTopology::new(root);
    let nics = topo.nics();
    let names: Vec<_> = nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["evil0", "evil1", "evil2", "evil3", "stray"]);

    let evil0 = &nics[0];
    assert_eq!(evil0.pci_bus_id, None);
    assert_eq!(evil0.numa_node, None);
    assert_eq!(evil0.vendor_id, None);
    let ports: Vec<_> = evil0.ports.iter().map(|p| (p.port, p.active)).collect();
    // 0, abc and 300 are not port numbers; only "4: ..." exactly is active.
    assert_eq!(
        ports,
        [(1, false), (2, false), (3, false), (4, true), (5, false)]
    );
    assert_eq!(evil0.ports[0].link_layer, None);
    assert_eq!(evil0.first_active_port(), Some(4));
    // Only the well-formed entry with an in-range index survives; its type
    // text is not one the kernel prints.
    let v4 = gid("0000:0000:0000:0000:0000:ffff:0a00:0001");
    assert_eq!(
        topo.gids("evil0", 1),
        vec![GidEntry {
            index: 3,
            gid: v4,
            gid_type: GidType::Unknown
        }]
    );

    let evil1 = &nics[1];
    assert_eq!(evil1.pci_bus_id, None);
    assert_eq!(
        evil1.ports,
        vec![PortInfo {
            port: 1,
            active: false,
            link_layer: None
        }]
    );

    let evil2 = &nics[2];
    // The first PCI_SLOT_NAME line is taken, and it isn't a bus id.
    assert_eq!(evil2.pci_bus_id, None);
    assert_eq!(evil2.numa_node, None);
    assert_eq!(evil2.vendor_id, None);
    assert_eq!(evil2.first_active_port(), Some(1));

    let evil3 = &nics[3];
    assert_eq!(evil3.numa_node, None);
    assert_eq!(evil3.vendor_id, None);
    assert!(!evil3.ports[0].active);
    // The link layer read is cut at MAX_ATTR_BYTES.
    let ll = evil3.ports[0].link_layer.as_deref().unwrap();
    assert_eq!(ll.len() as u64, MAX_ATTR_BYTES);
    assert!(ll.starts_with("4: ACTIVE"));

    assert_eq!(
        nics[4],
        NicInfo {
            name: "stray".into(),
            ..NicInfo::default()
        }
    );
}

#[test]
fn system_topology_does_not_panic() {
    let topo = SysfsTopology::system();
    assert_eq!(topo.root(), Path::new("/"));
    for nic in topo.nics() {
        if let Some(p) = nic.first_active_port() {
            let _ = topo.gids(&nic.name, p);
        }
    }
}

#[test]
fn fake_topology_serves_its_data_through_the_trait() {
    let mut fake = FakeTopology::default();
    fake.nics.push(NicInfo {
        name: "soft0".into(),
        ports: vec![port(1, true, "Ethernet")],
        ..NicInfo::default()
    });
    let table = vec![
        entry(
            0,
            "fe80:0000:0000:0000:0000:0000:0000:0001",
            GidType::RoceV2,
        ),
        entry(1, ZERO, GidType::Unknown),
    ];
    fake.gids.insert(("soft0".into(), 1), table.clone());
    let topo: &dyn NicTopology = &fake;
    assert_eq!(topo.nics(), fake.nics);
    assert_eq!(topo.gids("soft0", 1), table);
    assert_eq!(topo.gid_type("soft0", 1, 0), GidType::RoceV2);
    assert_eq!(topo.gid_type("soft0", 1, 1), GidType::Unknown);
    assert_eq!(topo.gid_type("soft0", 1, 9), GidType::Unknown);
    assert!(topo.gids("soft0", 2).is_empty());
}
