//! What the kernel says about a GID table entry, from
//! `/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>`.

use crate::types::{GidType, LinkLayer};
use std::path::{Path, PathBuf};

/// The default sysfs root of RDMA devices.
pub const DEFAULT_ROOT: &str = "/sys/class/infiniband";

/// The file that holds the type of GID `index` of `dev`'s `port`.
pub fn gid_type_path(root: &Path, dev: &str, port: u8, index: u16) -> PathBuf {
    root.join(dev)
        .join("ports")
        .join(port.to_string())
        .join("gid_attrs")
        .join("types")
        .join(index.to_string())
}

/// Parses a `gid_attrs/types` file: the kernel writes `IB/RoCE v1` for
/// both InfiniBand and RoCE v1 (told apart by the port's link layer) and
/// `RoCE v2`. An unconfigured entry can't be read (EINVAL), which is
/// `Unknown`, as is anything else.
pub fn parse_gid_type(text: &str, link_layer: LinkLayer) -> GidType {
    match text.trim() {
        "RoCE v2" => GidType::RoceV2,
        "IB/RoCE v1" => match link_layer {
            LinkLayer::Ethernet => GidType::RoceV1,
            LinkLayer::InfiniBand => GidType::Ib,
            LinkLayer::Unspecified => GidType::Unknown,
        },
        _ => GidType::Unknown,
    }
}

/// The type of GID `index` of `dev`'s `port`, read under `root`.
pub fn gid_type(root: &Path, dev: &str, port: u8, index: u16, link_layer: LinkLayer) -> GidType {
    let path = gid_type_path(root, dev, port, index);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_gid_type(&text, link_layer),
        Err(e) => {
            tracing::trace!(path = %path.display(), error = %e, "GID type not readable");
            GidType::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_strings() {
        assert_eq!(
            parse_gid_type("RoCE v2\n", LinkLayer::Ethernet),
            GidType::RoceV2
        );
        assert_eq!(
            parse_gid_type("IB/RoCE v1\n", LinkLayer::Ethernet),
            GidType::RoceV1
        );
        assert_eq!(
            parse_gid_type("IB/RoCE v1\n", LinkLayer::InfiniBand),
            GidType::Ib
        );
        assert_eq!(parse_gid_type("", LinkLayer::Ethernet), GidType::Unknown);
        assert_eq!(
            parse_gid_type("RoCE v3", LinkLayer::Ethernet),
            GidType::Unknown
        );
    }

    #[test]
    fn reads_under_a_chosen_root() {
        let root = std::env::temp_dir().join(format!("hipobj-sysfs-{}", std::process::id()));
        let p = gid_type_path(&root, "rxe0", 1, 3);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "RoCE v2\n").unwrap();
        assert_eq!(
            gid_type(&root, "rxe0", 1, 3, LinkLayer::Ethernet),
            GidType::RoceV2
        );
        assert_eq!(
            gid_type(&root, "rxe0", 1, 4, LinkLayer::Ethernet),
            GidType::Unknown
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
