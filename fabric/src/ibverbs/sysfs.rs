//! What the kernel says about a GID table entry, from
//! `/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>`.
//!
//! This is the one reader of GID types in sysfs: the verbs provider uses it
//! where libibverbs can't say, and the client library's NIC topology reads
//! its trees through it. Everything read is untrusted text: a file read is
//! bounded to [`MAX_ATTR_BYTES`], only regular files are opened, and a
//! missing, unreadable or malformed file is `Unknown`.

use crate::types::{GidType, LinkLayer};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The default sysfs root of RDMA devices.
pub const DEFAULT_ROOT: &str = "/sys/class/infiniband";

/// The most bytes read from any one sysfs file (a sysfs attribute is at
/// most one page).
pub const MAX_ATTR_BYTES: u64 = 4096;

/// The file that holds the type of GID `index` of `dev`'s `port`.
pub fn gid_type_path(root: &Path, dev: &str, port: u8, index: u16) -> PathBuf {
    root.join(dev)
        .join("ports")
        .join(port.to_string())
        .join("gid_attrs")
        .join("types")
        .join(index.to_string())
}

/// Parses a port's `link_layer` file: `Ethernet` or `InfiniBand` (ASCII
/// whitespace around it ignored); anything else is `Unspecified`.
pub fn parse_link_layer(text: &str) -> LinkLayer {
    match text.trim_ascii() {
        "Ethernet" => LinkLayer::Ethernet,
        "InfiniBand" => LinkLayer::InfiniBand,
        _ => LinkLayer::Unspecified,
    }
}

/// Parses a `gid_attrs/types` file: the kernel writes `IB/RoCE v1` for
/// both InfiniBand and RoCE v1 (told apart by the port's link layer) and
/// `RoCE v2`. `IB/RoCE v1` on a port whose link layer is not known is
/// `Unknown`; so is an unconfigured entry, which can't be read (EINVAL), and
/// anything else.
pub fn parse_gid_type(text: &str, link_layer: LinkLayer) -> GidType {
    match text.trim_ascii() {
        "RoCE v2" => GidType::RoceV2,
        "IB/RoCE v1" => match link_layer {
            LinkLayer::Ethernet => GidType::RoceV1,
            LinkLayer::InfiniBand => GidType::Ib,
            LinkLayer::Unspecified => GidType::Unknown,
        },
        _ => GidType::Unknown,
    }
}

/// The type of GID `index` of `dev`'s `port`, read under `root` (the
/// directory that holds the devices, [`DEFAULT_ROOT`] on a host).
pub fn gid_type(root: &Path, dev: &str, port: u8, index: u16, link_layer: LinkLayer) -> GidType {
    read_attr(&gid_type_path(root, dev, port, index))
        .map_or(GidType::Unknown, |text| parse_gid_type(&text, link_layer))
}

/// Reads at most [`MAX_ATTR_BYTES`] of a regular file as text (invalid
/// UTF-8 replaced); `None` when it's missing, not a regular file, or
/// unreadable.
pub fn read_attr(path: &Path) -> Option<String> {
    // Only regular files: opening a FIFO in a hostile tree would block.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    match file.take(MAX_ATTR_BYTES).read_to_end(&mut buf) {
        Ok(_) => Some(String::from_utf8_lossy(&buf).into_owned()),
        Err(e) => {
            tracing::trace!(path = %path.display(), error = %e, "sysfs: read failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_strings() {
        use GidType::*;
        use LinkLayer::*;
        for (text, link_layer, want) in [
            ("RoCE v2\n", Ethernet, RoceV2),
            ("RoCE v2\n", Unspecified, RoceV2),
            ("IB/RoCE v1\n", Ethernet, RoceV1),
            ("IB/RoCE v1", InfiniBand, Ib),
            // Without a link layer, "IB/RoCE v1" can't be told apart.
            ("IB/RoCE v1\n", Unspecified, Unknown),
            ("", Ethernet, Unknown),
            ("RoCE v3", Ethernet, Unknown),
        ] {
            assert_eq!(parse_gid_type(text, link_layer), want, "{text:?}");
        }
        assert_eq!(parse_link_layer("Ethernet\n"), Ethernet);
        assert_eq!(parse_link_layer("InfiniBand\n"), InfiniBand);
        assert_eq!(parse_link_layer(""), Unspecified);
        assert_eq!(parse_link_layer("ethernet"), Unspecified);
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
        // A directory where the file should be reads as unknown.
        std::fs::create_dir_all(gid_type_path(&root, "rxe0", 1, 5)).unwrap();
        assert_eq!(
            gid_type(&root, "rxe0", 1, 5, LinkLayer::Ethernet),
            GidType::Unknown
        );
        // Reads are cut at MAX_ATTR_BYTES.
        let big = root.join("big");
        std::fs::write(&big, vec![b'x'; 3 * MAX_ATTR_BYTES as usize]).unwrap();
        assert_eq!(
            read_attr(&big).map(|s| s.len() as u64),
            Some(MAX_ATTR_BYTES)
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
