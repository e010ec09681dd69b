//! Choosing the GID to send from in a port's GID table, as hipObject's
//! `PickBestGid()` does. Shared by the client library and the gateway.

use crate::types::{GidEntry, GidType};
use hipobj_wire::Gid;

/// The preference rank of a GID entry, lower is better; `None` when the
/// entry is not a candidate (unconfigured, or not RoCE).
fn gid_rank(entry: &GidEntry) -> Option<u8> {
    let gid = &entry.gid;
    if gid.is_zero() {
        return None;
    }
    let mapped = is_strict_ipv4_mapped(gid);
    let link_local = gid.is_link_local();
    match entry.gid_type {
        GidType::RoceV2 if mapped => Some(0),
        GidType::RoceV2 if link_local => Some(2),
        GidType::RoceV2 => Some(1),
        GidType::RoceV1 if link_local => Some(4),
        GidType::RoceV1 => Some(3),
        GidType::Ib | GidType::Unknown => None,
    }
}

/// `::ffff:a.b.c.d`: ten zero bytes, then `ff ff`. Stricter than
/// [`Gid::is_ipv4_mapped`], so that a link-local GID whose bytes 10 and 11
/// happen to be `ff ff` isn't ranked as IPv4-mapped.
fn is_strict_ipv4_mapped(gid: &Gid) -> bool {
    gid.0[..10].iter().all(|&b| b == 0) && gid.is_ipv4_mapped()
}

/// The index of the best GID of a port's table.
///
/// Unconfigured (all-zero) entries and those whose type is
/// [`GidType::Unknown`] or [`GidType::Ib`] are skipped. The rest are
/// preferred, best to worst: RoCE v2 IPv4-mapped (`::ffff:a.b.c.d`), RoCE v2
/// global (neither link-local `fe80::/10` nor IPv4-mapped), RoCE v2
/// link-local, RoCE v1 global (IPv4-mapped included), RoCE v1 link-local.
/// Ties go to the lowest index; with no candidate the answer is 0.
pub fn pick_best_gid(entries: &[GidEntry]) -> u16 {
    entries
        .iter()
        .filter_map(|e| gid_rank(e).map(|r| (r, e.index)))
        .min()
        .map_or(0, |(_, index)| index)
}
