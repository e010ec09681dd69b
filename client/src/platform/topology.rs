//! NIC topology: what the host's RDMA NICs are and where they sit.
//!
//! [`NicTopology`] is the library's only route to `/sys/class/infiniband`.
//! [`SysfsTopology`] reads a (possibly fake) sysfs tree; [`NoTopology`]
//! knows no NICs (init then needs a `nicHint`). Tests of the modules above
//! it answer from plain data with `testing::FakeTopology` (feature
//! `testing`).
//!
//! Everything read from sysfs is treated as untrusted text: every file read
//! is bounded to [`MAX_ATTR_BYTES`], every directory listing to
//! [`MAX_DIR_ENTRIES`], a missing or malformed file reads as "unknown", and
//! nothing here panics on any content.

use hipobj_fabric::ibverbs::sysfs::{self, parse_link_layer, read_attr};
use hipobj_fabric::{Gid, GidEntry, GidType, LinkLayer};
use std::fs;
use std::path::{Path, PathBuf};

/// The most bytes read from any one sysfs file (a sysfs attribute is at
/// most one page); the fabric's sysfs reader enforces it.
pub use hipobj_fabric::ibverbs::sysfs::MAX_ATTR_BYTES;

/// The most entries taken from any one sysfs directory listing (devices,
/// ports, GID table entries). Entries beyond it are ignored.
pub const MAX_DIR_ENTRIES: usize = 4096;

/// The port state number sysfs reports for an active port (`4: ACTIVE`).
pub const PORT_STATE_ACTIVE: u32 = 4;

/// One physical port of a NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (1-based, as in `ports/<n>`).
    pub port: u8,
    /// Whether the port's state is ACTIVE (state number 4).
    pub active: bool,
    /// The link layer as sysfs names it (`"Ethernet"`, `"InfiniBand"`),
    /// trimmed; `None` when missing or empty.
    pub link_layer: Option<String>,
}

/// One RDMA device and where it sits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicInfo {
    /// The verbs device name (`bnxt_re0`, `ionic_0`, `mlx5_0`).
    pub name: String,
    /// The PCI bus id of the device's function, e.g. `"0000:41:00.0"`;
    /// `None` when unknown (no PCI parent, or unreadable).
    pub pci_bus_id: Option<String>,
    /// The NUMA node; `None` when unknown (sysfs says -1, or unreadable).
    pub numa_node: Option<i32>,
    /// The PCI vendor id (0x14E4 Broadcom, 0x1DD8 Pensando, 0x15B3 Mellanox).
    pub vendor_id: Option<u32>,
    /// The device's ports; [`SysfsTopology`] lists them in ascending order.
    pub ports: Vec<PortInfo>,
}

impl NicInfo {
    /// The number of the first active port, in the order of [`NicInfo::ports`].
    pub fn first_active_port(&self) -> Option<u8> {
        self.ports.iter().find(|p| p.active).map(|p| p.port)
    }

    /// Whether any port is active.
    pub fn has_active_port(&self) -> bool {
        self.first_active_port().is_some()
    }
}

/// The host's RDMA NIC topology, as the library sees it.
///
/// Methods take `&self` and implementations are `Send + Sync`, so one object
/// serves every thread.
pub trait NicTopology: Send + Sync + std::fmt::Debug {
    /// Every RDMA device, whether or not it has an active port.
    fn nics(&self) -> Vec<NicInfo>;

    /// The type of GID table entry `index` of `device`'s `port`;
    /// [`GidType::Unknown`] when it can't be told.
    fn gid_type(&self, device: &str, port: u8, index: u16) -> GidType;

    /// The GID table of `device`'s `port` as sysfs shows it, in ascending
    /// index order, each entry with its type. Unconfigured (all-zero)
    /// entries are included as shown; empty when the port is unknown.
    fn gids(&self, device: &str, port: u8) -> Vec<GidEntry>;
}

/// A [`NicTopology`] over a sysfs tree: `<root>/sys/class/infiniband/<dev>/`.
///
/// Per device it reads:
///
/// - `device`: a symlink to the PCI function's directory; the final
///   component of its target is the bus id (e.g. `../../../0000:41:00.0`).
///   If that isn't a bus id (or `device` isn't a link), the `PCI_SLOT_NAME=`
///   line of `device/uevent` is used instead. A bus id is accepted only if
///   it consists of hex digits, `:` and `.`, and contains a `:`.
/// - `device/numa_node`: a decimal number; negative (-1) means unknown.
/// - `device/vendor`: hex, with or without `0x` (`"0x14e4\n"`).
/// - `ports/<n>/state`: `"4: ACTIVE\n"`; the leading number decides, 4 is
///   active.
/// - `ports/<n>/link_layer`: `"Ethernet"` or `"InfiniBand"`.
/// - `ports/<n>/gids/<i>`: eight groups of four hex digits separated by `:`
///   (see [`parse_sysfs_gid`]); an entry that doesn't parse is left out.
/// - `ports/<n>/gid_attrs/types/<i>`: `"RoCE v2"` or `"IB/RoCE v1"` (the
///   latter is [`GidType::Ib`] on an InfiniBand port, [`GidType::RoceV1`] on
///   an Ethernet one, [`GidType::Unknown`] where the link layer is missing
///   or other); unreadable (real kernels fail unconfigured entries with
///   `EINVAL`), missing or other text is [`GidType::Unknown`]. The fabric's
///   `ibverbs::sysfs` reads these, the same reader the verbs provider uses.
#[derive(Clone, Debug)]
pub struct SysfsTopology {
    root: PathBuf,
}

impl SysfsTopology {
    /// A topology over the sysfs tree under `root` (the directory that holds
    /// `sys/`).
    pub fn new(root: impl Into<PathBuf>) -> SysfsTopology {
        SysfsTopology { root: root.into() }
    }

    /// The host's own topology (root `/`).
    pub fn system() -> SysfsTopology {
        SysfsTopology::new("/")
    }

    /// The root this topology reads under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn class_dir(&self) -> PathBuf {
        self.root.join("sys/class/infiniband")
    }

    /// `<root>/sys/class/infiniband/<device>`, if `device` is a plain name.
    fn device_dir(&self, device: &str) -> Option<PathBuf> {
        is_plain_name(device).then(|| self.class_dir().join(device))
    }

    /// `.../<device>/ports/<port>`, if `device` is a plain name.
    fn port_dir(&self, device: &str, port: u8) -> Option<PathBuf> {
        self.device_dir(device)
            .map(|d| d.join("ports").join(port.to_string()))
    }

    /// The type of GID `index` of `device`'s `port` (a plain name, checked by
    /// the caller), on a port with `link_layer`.
    fn read_gid_type(&self, device: &str, port: u8, index: u16, link_layer: LinkLayer) -> GidType {
        sysfs::gid_type(&self.class_dir(), device, port, index, link_layer)
    }

    fn read_nic(&self, name: String) -> NicInfo {
        let dir = self.class_dir().join(&name);
        let dev = dir.join("device");
        let pci_bus_id = read_bus_id(&dev);
        let numa_node = read_attr(&dev.join("numa_node")).and_then(|s| parse_numa_node(&s));
        let vendor_id = read_attr(&dev.join("vendor")).and_then(|s| parse_vendor_id(&s));
        let mut ports: Vec<PortInfo> = list_dir(&dir.join("ports"))
            .into_iter()
            .filter_map(|n| parse_port_number(&n))
            .map(|port| read_port(&dir.join("ports").join(port.to_string()), port))
            .collect();
        ports.sort_by_key(|p| p.port);
        ports.dedup_by_key(|p| p.port);
        tracing::debug!(
            nic = %name,
            pci_bus_id = ?pci_bus_id,
            numa_node = ?numa_node,
            vendor_id = ?vendor_id,
            ports = ports.len(),
            "sysfs: read NIC"
        );
        NicInfo {
            name,
            pci_bus_id,
            numa_node,
            vendor_id,
            ports,
        }
    }
}

impl NicTopology for SysfsTopology {
    fn nics(&self) -> Vec<NicInfo> {
        let class = self.class_dir();
        let names = list_dir(&class);
        if names.is_empty() {
            tracing::debug!(dir = %class.display(), "sysfs: no RDMA devices");
        }
        names
            .into_iter()
            .filter(|n| is_plain_name(n))
            .map(|n| self.read_nic(n))
            .collect()
    }

    fn gid_type(&self, device: &str, port: u8, index: u16) -> GidType {
        let Some(pdir) = self.port_dir(device, port) else {
            return GidType::Unknown;
        };
        self.read_gid_type(device, port, index, read_link_layer(&pdir))
    }

    fn gids(&self, device: &str, port: u8) -> Vec<GidEntry> {
        let Some(pdir) = self.port_dir(device, port) else {
            return Vec::new();
        };
        let link_layer = read_link_layer(&pdir);
        let gdir = pdir.join("gids");
        let mut indices: Vec<u16> = list_dir(&gdir)
            .iter()
            .filter_map(|n| parse_decimal::<u16>(n))
            .collect();
        indices.sort_unstable();
        indices.dedup();
        indices
            .into_iter()
            .filter_map(|index| {
                let text = read_attr(&gdir.join(index.to_string()))?;
                let Some(gid) = parse_sysfs_gid(&text) else {
                    tracing::debug!(device, port, index, "sysfs: malformed GID entry skipped");
                    return None;
                };
                let gid_type = self.read_gid_type(device, port, index, link_layer);
                Some(GidEntry {
                    index,
                    gid,
                    gid_type,
                })
            })
            .collect()
    }
}

/// No topology: no NICs are known, so init needs a `nicHint` (a host
/// without sysfs, or an application that names its NIC).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTopology;

impl NicTopology for NoTopology {
    fn nics(&self) -> Vec<NicInfo> {
        Vec::new()
    }

    fn gid_type(&self, _device: &str, _port: u8, _index: u16) -> GidType {
        GidType::Unknown
    }

    fn gids(&self, _device: &str, _port: u8) -> Vec<GidEntry> {
        Vec::new()
    }
}

// ---------------------------------------------------------------------------
// Parsers for sysfs text. Each takes untrusted text and never panics.

/// Parses a GID as sysfs prints it: eight groups of exactly four hex digits
/// (either case) separated by `:`, e.g.
/// `fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f`. Surrounding ASCII whitespace
/// (the trailing newline) is ignored; anything else, including the
/// compressed `::` form, is rejected.
pub fn parse_sysfs_gid(text: &str) -> Option<Gid> {
    let text = text.trim_ascii();
    let mut hex = String::with_capacity(32);
    let mut groups = 0usize;
    for group in text.split(':') {
        groups += 1;
        if groups > 8 || group.len() != 4 || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        hex.push_str(group);
    }
    if groups != 8 {
        return None;
    }
    Gid::from_hex(&hex)
}

/// A decimal number with nothing around it but ASCII whitespace; no sign.
fn parse_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    let t = text.trim_ascii();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A port directory name: 1 to 255.
fn parse_port_number(name: &str) -> Option<u8> {
    parse_decimal::<u8>(name).filter(|&p| p != 0)
}

/// `device/numa_node`: a decimal number, negative meaning unknown.
fn parse_numa_node(text: &str) -> Option<i32> {
    let t = text.trim_ascii();
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<i32>().ok().filter(|&n| n >= 0)
}

/// `device/vendor`: hex, with or without `0x`.
fn parse_vendor_id(text: &str) -> Option<u32> {
    let t = text.trim_ascii();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// `ports/<n>/state`: the leading decimal number of `"4: ACTIVE"`.
fn parse_port_state(text: &str) -> Option<u32> {
    let t = text.trim_ascii_start();
    let end = t
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(t.len());
    let (digits, _) = t.split_at_checked(end)?;
    if digits.is_empty() {
        return None;
    }
    digits.parse().ok()
}

/// A PCI bus id such as `0000:41:00.0`: hex digits, `:` and `.` only, with
/// at least one `:`, at most 64 bytes.
fn parse_bus_id(text: &str) -> Option<String> {
    let t = text.trim_ascii();
    let ok = !t.is_empty()
        && t.len() <= 64
        && t.contains(':')
        && t.bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    ok.then(|| t.to_owned())
}

/// Whether `name` is a single path component we may join under a directory.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == 0)
}

// ---------------------------------------------------------------------------
// Bounded file access.

/// The UTF-8 names in a directory, sorted, at most [`MAX_DIR_ENTRIES`] of
/// them; empty when it can't be listed.
fn list_dir(path: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(path) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .take(MAX_DIR_ENTRIES)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// The PCI bus id behind a device's `device` entry: the final component of
/// the link's target, else `PCI_SLOT_NAME=` from `device/uevent`.
fn read_bus_id(dev: &Path) -> Option<String> {
    if let Ok(target) = fs::read_link(dev) {
        let last = target
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_bus_id);
        if last.is_some() {
            return last;
        }
    }
    let uevent = read_attr(&dev.join("uevent"))?;
    uevent
        .lines()
        .find_map(|l| l.trim_ascii().strip_prefix("PCI_SLOT_NAME="))
        .and_then(parse_bus_id)
}

fn read_port(dir: &Path, port: u8) -> PortInfo {
    let active =
        read_attr(&dir.join("state")).and_then(|s| parse_port_state(&s)) == Some(PORT_STATE_ACTIVE);
    let link_layer = read_attr(&dir.join("link_layer"))
        .map(|s| s.trim_ascii().to_owned())
        .filter(|s| !s.is_empty());
    PortInfo {
        port,
        active,
        link_layer,
    }
}

/// A port directory's `link_layer`, `Unspecified` when missing or other.
fn read_link_layer(port_dir: &Path) -> LinkLayer {
    read_attr(&port_dir.join("link_layer")).map_or(LinkLayer::Unspecified, |t| parse_link_layer(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_text() {
        let g = parse_sysfs_gid("fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f\n").unwrap();
        assert_eq!(g.to_hex(), "fe800000000000000a2b3cfffe4d5e6f");
        assert!(g.is_link_local());
        let m = parse_sysfs_gid("0000:0000:0000:0000:0000:FFFF:0a00:0001").unwrap();
        assert_eq!(m.ipv4(), Some(std::net::Ipv4Addr::new(10, 0, 0, 1)));
        for bad in [
            "",
            "fe80::1",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f:0000",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6g",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d:+e6f",
            "fe80:0000:0000:0000:0a2b:3cff:fe4d:5e6f0",
            "fe80 0000:0000:0000:0a2b:3cff:fe4d:5e6f",
            "fé80:0000:0000:0000:0a2b:3cff:fe4d:5e6f",
        ] {
            assert_eq!(parse_sysfs_gid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_numa_node("1\n"), Some(1));
        assert_eq!(parse_numa_node("-1\n"), None);
        assert_eq!(parse_numa_node("-"), None);
        assert_eq!(parse_numa_node("+1"), None);
        assert_eq!(parse_numa_node("99999999999"), None);
        assert_eq!(parse_vendor_id("0x14e4\n"), Some(0x14e4));
        assert_eq!(parse_vendor_id("15B3"), Some(0x15b3));
        assert_eq!(parse_vendor_id("0x"), None);
        assert_eq!(parse_vendor_id("0x+14e4"), None);
        assert_eq!(parse_vendor_id("0x123456789"), None);
        assert_eq!(parse_port_state("4: ACTIVE\n"), Some(4));
        assert_eq!(parse_port_state("1: DOWN"), Some(1));
        assert_eq!(parse_port_state("ACTIVE"), None);
        assert_eq!(parse_port_state("99999999999: X"), None);
        assert_eq!(parse_port_state("é"), None);
        assert_eq!(parse_port_number("0"), None);
        assert_eq!(parse_port_number("1"), Some(1));
        assert_eq!(parse_port_number("256"), None);
        assert_eq!(parse_port_number("+1"), None);
    }

    #[test]
    fn bus_ids_and_names() {
        assert_eq!(
            parse_bus_id("0000:41:00.0\n").as_deref(),
            Some("0000:41:00.0")
        );
        assert_eq!(parse_bus_id("eth0"), None);
        assert_eq!(parse_bus_id("0000:41:00.0/x"), None);
        assert_eq!(parse_bus_id(""), None);
        assert!(is_plain_name("mlx5_0"));
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
    }
}
