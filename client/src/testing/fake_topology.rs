//! A NIC topology answering from plain data.

use crate::platform::topology::{NicInfo, NicTopology};
use hipobj_fabric::{GidEntry, GidType};
use std::collections::HashMap;

/// A [`NicTopology`] answering from plain data, for tests.
///
/// [`NicTopology::gid_type`] looks the entry up in [`FakeTopology::gids`];
/// an entry that isn't there is [`GidType::Unknown`].
#[derive(Clone, Debug, Default)]
pub struct FakeTopology {
    /// What [`NicTopology::nics`] returns.
    pub nics: Vec<NicInfo>,
    /// GID tables by `(device, port)`.
    pub gids: HashMap<(String, u8), Vec<GidEntry>>,
}

impl NicTopology for FakeTopology {
    fn nics(&self) -> Vec<NicInfo> {
        self.nics.clone()
    }

    fn gid_type(&self, device: &str, port: u8, index: u16) -> GidType {
        self.gids
            .get(&(device.to_owned(), port))
            .and_then(|t| t.iter().find(|e| e.index == index))
            .map_or(GidType::Unknown, |e| e.gid_type)
    }

    fn gids(&self, device: &str, port: u8) -> Vec<GidEntry> {
        self.gids
            .get(&(device.to_owned(), port))
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipobj_fabric::Gid;

    #[test]
    fn fake_answers_from_its_tables() {
        let mut fake = FakeTopology::default();
        fake.gids.insert(
            ("dev0".into(), 1),
            vec![GidEntry {
                index: 3,
                gid: Gid::ZERO,
                gid_type: GidType::RoceV2,
            }],
        );
        assert_eq!(fake.gid_type("dev0", 1, 3), GidType::RoceV2);
        assert_eq!(fake.gid_type("dev0", 1, 4), GidType::Unknown);
        assert_eq!(fake.gid_type("dev1", 1, 3), GidType::Unknown);
        assert_eq!(fake.gids("dev0", 1).len(), 1);
        assert!(fake.gids("dev0", 2).is_empty());
        assert!(fake.nics().is_empty());
    }
}
