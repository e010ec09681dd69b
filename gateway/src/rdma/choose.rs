//! Which of the gateway's devices answers a client, from the client's GID
//! and the devices' GIDs. Pure: the engine passes each device's GID and
//! whether its port is active.
//!
//! The rule, in order (docs/architecture.md, "Several NICs"):
//!
//! 1. **Same subnet**: the active device whose GID is the client's, else
//!    the first active one whose GID is in the client's subnet. IPv4-mapped GIDs (RoCE v2, the soft provider): the
//!    same /24; but a loopback address (127.0.0.0/8) matches only the very
//!    same address, since every loopback address is one host's and the
//!    soft provider stands one device on each. Other GIDs (IPv6 RoCE,
//!    InfiniBand): the same 64-bit subnet prefix, link-local ones
//!    (`fe80::/10`, which every port has) excepted.
//! 2. **Routes**: else the first active device that can reach the client at
//!    all: a GID of the same kind (both IPv4-mapped or both not) and, for
//!    IPv4, the same scope (a device on a loopback address reaches only
//!    loopback addresses, any other device only non-loopback ones).
//! 3. **First**: else the first device; the transfer then fails as it
//!    would on a gateway with that one device.

use hipobj_fabric::Gid;

/// One device as the choice sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The GID the device's tokens name.
    pub gid: Gid,
    /// Whether its port is active.
    pub active: bool,
}

/// Why a device was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Its GID is in the client's subnet.
    Subnet,
    /// It routes to the client (no device is in its subnet).
    Routes,
    /// Nothing matched: the first device.
    First,
}

impl Why {
    /// For logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Subnet => "same subnet",
            Why::Routes => "routes",
            Why::First => "first device",
        }
    }
}

/// Whether `a` and `b` are in one subnet (rule 1).
pub fn same_subnet(a: Gid, b: Gid) -> bool {
    match (a.ipv4(), b.ipv4()) {
        (Some(x), Some(y)) if x.is_loopback() || y.is_loopback() => x == y,
        (Some(x), Some(y)) => x.octets()[..3] == y.octets()[..3],
        (None, None) => !a.is_link_local() && !b.is_link_local() && a.0[..8] == b.0[..8],
        _ => false,
    }
}

/// Whether a device with GID `device` can reach `client` (rule 2).
pub fn routes(device: Gid, client: Gid) -> bool {
    match (device.ipv4(), client.ipv4()) {
        (Some(d), Some(c)) => d.is_loopback() == c.is_loopback(),
        (None, None) => true,
        _ => false,
    }
}

/// The index of the device that answers `client` among `devices` (at
/// least one), and why.
pub fn choose(client: Gid, devices: &[Candidate]) -> (usize, Why) {
    let active = || devices.iter().enumerate().filter(|(_, d)| d.active);
    // The very address first, then its subnet.
    let exact = active().find(|(_, d)| d.gid == client);
    if let Some((i, _)) = exact.or_else(|| active().find(|(_, d)| same_subnet(d.gid, client))) {
        return (i, Why::Subnet);
    }
    if let Some((i, _)) = active().find(|(_, d)| routes(d.gid, client)) {
        return (i, Why::Routes);
    }
    (0, Why::First)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> Gid {
        Gid::from_ipv4(Ipv4Addr::new(a, b, c, d))
    }

    fn v6(prefix: u64, iid: u64) -> Gid {
        let mut g = [0u8; 16];
        g[..8].copy_from_slice(&prefix.to_be_bytes());
        g[8..].copy_from_slice(&iid.to_be_bytes());
        Gid(g)
    }

    fn up(gid: Gid) -> Candidate {
        Candidate { gid, active: true }
    }

    #[test]
    fn loopback_addresses_match_only_themselves() {
        let devs = [up(v4(127, 0, 0, 2)), up(v4(127, 0, 0, 3))];
        assert_eq!(choose(v4(127, 0, 0, 2), &devs), (0, Why::Subnet));
        assert_eq!(choose(v4(127, 0, 0, 3), &devs), (1, Why::Subnet));
        // Another loopback address: no subnet, but the first device routes.
        assert_eq!(choose(v4(127, 0, 0, 9), &devs), (0, Why::Routes));
        // A loopback device never reaches a real address.
        assert_eq!(choose(v4(10, 0, 0, 9), &devs), (0, Why::First));
    }

    #[test]
    fn ipv4_rails_are_chosen_by_their_slash_24() {
        let devs = [
            up(v4(10, 0, 1, 10)),
            up(v4(10, 0, 2, 10)),
            up(v4(10, 0, 3, 10)),
        ];
        assert_eq!(choose(v4(10, 0, 2, 77), &devs), (1, Why::Subnet));
        assert_eq!(choose(v4(10, 0, 3, 1), &devs), (2, Why::Subnet));
        // Another /24 of the same /16: the first that routes.
        assert_eq!(choose(v4(10, 0, 9, 1), &devs), (0, Why::Routes));
        assert_eq!(choose(v4(127, 0, 0, 1), &devs), (0, Why::First));
        // An IPv6 client is not reached from IPv4 GIDs.
        assert_eq!(choose(v6(0x2001_0db8_0000_0001, 5), &devs), (0, Why::First));
    }

    #[test]
    fn a_device_whose_port_is_down_is_passed_over() {
        let devs = [
            up(v4(10, 0, 1, 10)),
            Candidate {
                gid: v4(10, 0, 2, 10),
                active: false,
            },
        ];
        assert_eq!(choose(v4(10, 0, 2, 5), &devs), (0, Why::Routes));
        let down = [
            Candidate {
                gid: v4(10, 0, 1, 10),
                active: false,
            },
            Candidate {
                gid: v4(10, 0, 2, 10),
                active: false,
            },
        ];
        assert_eq!(choose(v4(10, 0, 2, 5), &down), (0, Why::First));
    }

    #[test]
    fn ipv6_and_infiniband_gids_match_by_the_64_bit_prefix() {
        let devs = [
            up(v6(0x2001_0db8_0000_0001, 1)),
            up(v6(0x2001_0db8_0000_0002, 1)),
        ];
        assert_eq!(
            choose(v6(0x2001_0db8_0000_0002, 9), &devs),
            (1, Why::Subnet)
        );
        assert_eq!(
            choose(v6(0x2001_0db8_0000_0003, 9), &devs),
            (0, Why::Routes)
        );
        // Link-local GIDs say nothing about the rail.
        let ll = [up(v6(0xfe80 << 48, 1)), up(v6(0xfe80 << 48, 2))];
        assert_eq!(choose(v6(0xfe80 << 48, 3), &ll), (0, Why::Routes));
        assert!(!same_subnet(v6(0xfe80 << 48, 1), v6(0xfe80 << 48, 3)));
        assert!(!routes(v6(0xfe80 << 48, 1), v4(10, 0, 0, 1)));
    }

    #[test]
    fn the_first_device_of_the_subnet_wins_unless_one_has_the_address() {
        let devs = [up(v4(10, 0, 1, 10)), up(v4(10, 0, 1, 11))];
        assert_eq!(choose(v4(10, 0, 1, 99), &devs), (0, Why::Subnet));
        // The very address beats its subnet.
        assert_eq!(choose(v4(10, 0, 1, 11), &devs), (1, Why::Subnet));
    }
}
