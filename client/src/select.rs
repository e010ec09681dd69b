//! NIC and GID selection at init.
//!
//! - **NIC**: the active NIC whose PCI bus id is closest to the GPU's
//!   ([`closest_nic`], [`choose_nic`]), by a heuristic over the bus-id
//!   strings ([`bus_distance`]), not a walk of the PCIe tree. The NUMA node
//!   is not used. Without a GPU, or without any active NIC of known bus id,
//!   the NIC hint is opened as a device name directly.
//! - **GID**: [`pick_best_gid`] ranks a port's GID table, RoCE v2 first.
//! - **Vendor**: [`Vendor::from_id`] tells which vendor attributes apply.

use crate::platform::topology::{NicInfo, NicTopology};

/// PCI vendor id of Broadcom (bnxt_re NICs).
pub const VENDOR_BROADCOM: u32 = 0x14E4;
/// PCI vendor id of AMD Pensando (ionic NICs).
pub const VENDOR_PENSANDO: u32 = 0x1DD8;
/// PCI vendor id of Mellanox / NVIDIA (mlx5 NICs).
pub const VENDOR_MELLANOX: u32 = 0x15B3;

/// Which vendor-specific QP attributes a device gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// Broadcom bnxt ([`VENDOR_BROADCOM`]).
    Bnxt,
    /// AMD Pensando ionic ([`VENDOR_PENSANDO`]).
    Ionic,
    /// Anything else, Mellanox included: generic attributes.
    Other,
}

impl Vendor {
    /// The vendor of a PCI vendor id.
    pub fn from_id(vendor_id: u32) -> Vendor {
        match vendor_id {
            VENDOR_BROADCOM => Vendor::Bnxt,
            VENDOR_PENSANDO => Vendor::Ionic,
            _ => Vendor::Other,
        }
    }
}

/// Why no NIC could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// No usable RDMA NIC (`hipObjNicNotFound`).
    #[error("no RDMA NIC found: {reason}")]
    NicNotFound {
        /// What was missing.
        reason: String,
    },
}

/// The NIC [`choose_nic`] settled on, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicChoice {
    /// The active NIC closest to the GPU, from the topology.
    Topology {
        /// Its device name.
        name: String,
    },
    /// The NIC hint, to be opened as a device name without consulting the
    /// topology.
    Hint {
        /// The device name (the hint's first entry).
        name: String,
    },
}

impl NicChoice {
    /// The device name to open.
    pub fn name(&self) -> &str {
        match self {
            NicChoice::Topology { name } | NicChoice::Hint { name } => name,
        }
    }
}

/// The device names of a NIC hint: comma-separated, each trimmed of
/// whitespace, empty entries ignored. A hint with no names (`None`, `""`,
/// `" , "`) yields an empty list, which means "no hint".
pub fn hint_names(hint: Option<&str>) -> Vec<&str> {
    hint.map(|h| {
        h.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// The distance between two PCI bus ids, smaller is closer.
///
/// Each id is trimmed of whitespace, its PCI function (from the last `.`
/// on, if there is a `.`) is dropped, and it is lowercased (ASCII). The
/// distance is then the number of characters of the longer id after the two
/// ids' common prefix: `max(len_a, len_b) - common_prefix_len`, counted in
/// `char`s. Equal ids (functions aside) are at distance 0; the measure is
/// symmetric.
///
/// For the GPU `0000:43:00.0`: `0000:43:00.1` is at 0, `0000:41:00.0` at 4
/// (common prefix `0000:4`), `0000:c1:00.0` at 5 (common prefix `0000:`).
pub fn bus_distance(a: &str, b: &str) -> usize {
    let a = normalize_bus_id(a);
    let b = normalize_bus_id(b);
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    a.chars().count().max(b.chars().count()) - common
}

fn normalize_bus_id(id: &str) -> String {
    let id = id.trim();
    let id = id.rfind('.').map_or(id, |dot| &id[..dot]);
    id.to_ascii_lowercase()
}

/// Whether a NIC can be chosen from the topology: an active port and a
/// known bus id.
fn is_candidate(nic: &NicInfo) -> bool {
    nic.pci_bus_id.is_some() && nic.has_active_port()
}

/// The NIC closest to the GPU at `gpu_bus_id` (see [`bus_distance`]),
/// among those with an active port and a known bus id and, when `hint`
/// names any devices (see [`hint_names`]), whose name is one of them
/// (exact, case-sensitive). Of equally close NICs the first in `nics` wins.
/// `None` when no NIC qualifies.
pub fn closest_nic<'a>(
    gpu_bus_id: &str,
    nics: &'a [NicInfo],
    hint: Option<&str>,
) -> Option<&'a NicInfo> {
    let allowed = hint_names(hint);
    let mut best: Option<(usize, &NicInfo)> = None;
    for nic in nics {
        if !is_candidate(nic) {
            continue;
        }
        if !allowed.is_empty() && !allowed.contains(&nic.name.as_str()) {
            continue;
        }
        let Some(bus) = nic.pci_bus_id.as_deref() else {
            continue;
        };
        let d = bus_distance(gpu_bus_id, bus);
        tracing::trace!(nic = %nic.name, bus, distance = d, "NIC candidate");
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, nic));
        }
    }
    best.map(|(_, nic)| nic)
}

/// Chooses the NIC to open at init.
///
/// `gpu_bus_id` is the GPU's PCI bus id (`None`, or an empty string, when
/// there is no GPU); `hint` is the NIC hint, a comma-separated allow-list of
/// device names (see [`hint_names`]; a hint with no names counts as unset).
///
/// 1. With a GPU, if an active NIC with a known bus id is allowed by the
///    hint, the closest such NIC ([`closest_nic`]):
///    [`NicChoice::Topology`].
/// 2. Otherwise, if there is no GPU, or the topology has no active NIC with
///    a known bus id at all, and the hint is set: the hint's **first** name,
///    to be opened directly: [`NicChoice::Hint`]. (This is how GPU-less
///    hosts and hosts without a readable sysfs initialize.)
/// 3. Otherwise [`SelectError::NicNotFound`], saying why: no GPU and no
///    hint; no active NIC with a known bus id and no hint; or active NICs
///    exist but the hint allows none of them.
pub fn choose_nic(
    gpu_bus_id: Option<&str>,
    topo: &dyn NicTopology,
    hint: Option<&str>,
) -> Result<NicChoice, SelectError> {
    let names = hint_names(hint);
    let gpu = gpu_bus_id.map(str::trim).filter(|g| !g.is_empty());
    let hint_choice = || {
        names.first().map(|n| {
            tracing::info!(nic = %n, gpu = ?gpu, "NIC chosen from the hint");
            NicChoice::Hint {
                name: (*n).to_owned(),
            }
        })
    };

    let Some(gpu) = gpu else {
        return hint_choice().ok_or_else(|| SelectError::NicNotFound {
            reason: "no GPU, and no NIC hint to open instead".to_owned(),
        });
    };

    let nics = topo.nics();
    if let Some(nic) = closest_nic(gpu, &nics, hint) {
        tracing::info!(
            nic = %nic.name,
            nic_bus = ?nic.pci_bus_id,
            gpu,
            distance = nic.pci_bus_id.as_deref().map(|b| bus_distance(gpu, b)),
            "NIC chosen closest to the GPU"
        );
        return Ok(NicChoice::Topology {
            name: nic.name.clone(),
        });
    }

    let candidates: Vec<&str> = nics
        .iter()
        .filter(|n| is_candidate(n))
        .map(|n| n.name.as_str())
        .collect();
    if candidates.is_empty() {
        return hint_choice().ok_or_else(|| SelectError::NicNotFound {
            reason: format!(
                "no active NIC with a known PCI bus id ({} NICs found), and no NIC hint",
                nics.len()
            ),
        });
    }
    Err(SelectError::NicNotFound {
        reason: format!(
            "no active NIC matched the NIC hint {:?} (active NICs: {})",
            names.join(","),
            candidates.join(", ")
        ),
    })
}

pub use hipobj_fabric::gid_table::pick_best_gid;
