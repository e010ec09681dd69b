//! The 16-byte RDMA global identifier (GID) and its IPv4-mapped form.

use std::fmt;
use std::net::Ipv4Addr;

/// A 128-bit RoCE/InfiniBand GID, kept verbatim in network byte order.
///
/// On RoCE v2 over IPv4 the GID is the IPv4-mapped IPv6 address of the NIC
/// (`::ffff:a.b.c.d`): bytes 10 and 11 are `0xff` and bytes 12..16 are the
/// IPv4 address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID (an unconfigured GID table entry).
    pub const ZERO: Gid = Gid([0; 16]);

    /// The IPv4-mapped GID `::ffff:a.b.c.d` for an IPv4 address.
    pub fn from_ipv4(ip: Ipv4Addr) -> Gid {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&ip.octets());
        Gid(b)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Whether bytes 10 and 11 are `ff ff`, the test hipObject's
    /// `hipObjTokenClientNic()` applies (the first ten bytes are not checked,
    /// matching hipObject).
    pub fn is_ipv4_mapped(&self) -> bool {
        self.0[10] == 0xff && self.0[11] == 0xff
    }

    /// The IPv4 address carried by an IPv4-mapped GID, else `None`.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        if self.is_ipv4_mapped() {
            Some(Ipv4Addr::new(
                self.0[12], self.0[13], self.0[14], self.0[15],
            ))
        } else {
            None
        }
    }

    /// Whether every byte is zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Whether the GID is an IPv6 link-local address (`fe80::/10`).
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && (self.0[1] & 0xc0) == 0x80
    }

    /// 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        crate::hex::encode_lower(&self.0)
    }

    /// Parses exactly 32 hex digits, in either case.
    pub fn from_hex(s: &str) -> Option<Gid> {
        let mut b = [0u8; 16];
        crate::hex::decode_into(s.as_bytes(), &mut b).then_some(Gid(b))
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ipv4() {
            Some(ip) if self.0[..10] == [0; 10] => write!(f, "Gid(::ffff:{ip})"),
            _ => write!(f, "Gid({})", self.to_hex()),
        }
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_mapped_round_trip() {
        let g = Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 42));
        assert_eq!(g.to_hex(), "00000000000000000000ffffc0a8012a");
        assert_eq!(g.ipv4(), Some(Ipv4Addr::new(192, 168, 1, 42)));
        assert_eq!(Gid::from_hex("00000000000000000000FFFFC0A8012A"), Some(g));
    }

    #[test]
    fn non_mapped_has_no_ipv4() {
        let mut b = [0u8; 16];
        b[0] = 0xfe;
        b[1] = 0x80;
        let g = Gid(b);
        assert!(g.is_link_local());
        assert_eq!(g.ipv4(), None);
        assert_eq!(Gid::from_hex("zz"), None);
        assert_eq!(Gid::from_hex(&"0".repeat(33)), None);
    }
}
