//! The values of hipobj-rc-v2's headers. Every parser is strict about
//! length and alphabet (hex in either case, as both sources read it) and
//! every formatter writes lower case, as both sources' clients send it.

use std::fmt;
use thiserror::Error;

use crate::hex::{encode_lower, nibble};

/// The largest transfer, and the largest end offset (`2^31 - 1`): both
/// sources cap a transfer there (hipObject's `hipObjSizeTooLarge`).
pub const MAX_TRANSFER: u64 = (1 << 31) - 1;

/// Why a header value was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FieldError {
    /// Not the expected number of hex digits, or not hex.
    #[error("{field}: {value:?} is not {want}")]
    Malformed {
        /// The header.
        field: &'static str,
        /// The value, cut to 40 characters.
        value: String,
        /// What was expected.
        want: &'static str,
    },
    /// Outside the range the protocol allows.
    #[error("{field}: {value} is out of range ({range})")]
    Range {
        /// The header.
        field: &'static str,
        /// The value.
        value: u64,
        /// The range allowed.
        range: &'static str,
    },
}

fn malformed(field: &'static str, value: &str, want: &'static str) -> FieldError {
    FieldError::Malformed {
        field,
        value: value.chars().take(40).collect(),
        want,
    }
}

/// Exactly `n` hex digits, either case, as a number.
fn fixed_hex(
    field: &'static str,
    s: &str,
    n: usize,
    want: &'static str,
) -> Result<u64, FieldError> {
    if s.len() != n {
        return Err(malformed(field, s, want));
    }
    bare_hex_u64(field, s).map_err(|_| malformed(field, s, want))
}

/// 1 to 16 hex digits, either case, no prefix or sign (the QPN, the
/// memory region's address and rkey).
pub fn bare_hex_u64(field: &'static str, s: &str) -> Result<u64, FieldError> {
    const WANT: &str = "1 to 16 hex digits";
    if s.is_empty() || s.len() > 16 {
        return Err(malformed(field, s, WANT));
    }
    s.bytes().try_fold(0u64, |acc, c| {
        nibble(c)
            .map(|d| (acc << 4) | u64::from(d))
            .ok_or_else(|| malformed(field, s, WANT))
    })
}

/// As [`bare_hex_u64`], for a 32-bit value (a QPN in 24 bits, an rkey).
pub fn bare_hex_u32(field: &'static str, s: &str) -> Result<u32, FieldError> {
    let v = bare_hex_u64(field, s)?;
    u32::try_from(v).map_err(|_| FieldError::Range {
        field,
        value: v,
        range: "0 to 0xffffffff",
    })
}

/// A session: 128 random bits, 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub [u8; 16]);

impl SessionId {
    /// Parses 32 hex digits, either case.
    pub fn parse(s: &str) -> Result<SessionId, FieldError> {
        let mut b = [0u8; 16];
        if crate::hex::decode_into(s.as_bytes(), &mut b) {
            Ok(SessionId(b))
        } else {
            Err(malformed(super::H_SESSION, s, "32 hex digits"))
        }
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&encode_lower(&self.0))
    }
}

impl fmt::Debug for SessionId {
    /// A session id is a capability: logs show its first 8 digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({}...)", &encode_lower(&self.0[..4]))
    }
}

/// The transfer's cookie: 32 bits, 8 hex digits, never 0 (the RDMA
/// immediate that marks the last piece of the transfer).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Cookie(pub u32);

impl Cookie {
    /// Parses 8 hex digits, either case; 0 is refused.
    pub fn parse(s: &str) -> Result<Cookie, FieldError> {
        let v = fixed_hex(super::H_COOKIE, s, 8, "8 hex digits")?;
        match u32::try_from(v) {
            Ok(0) | Err(_) => Err(FieldError::Range {
                field: super::H_COOKIE,
                value: v,
                range: "1 to 0xffffffff",
            }),
            Ok(c) => Ok(Cookie(c)),
        }
    }
}

impl fmt::Display for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

/// A first PSN: 24 bits, 6 hex digits, never 0.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Psn(pub u32);

impl Psn {
    /// Parses 6 hex digits, either case; 0 is refused.
    pub fn parse(s: &str) -> Result<Psn, FieldError> {
        let v = fixed_hex(super::H_PSN, s, 6, "6 hex digits")?;
        if v == 0 {
            return Err(FieldError::Range {
                field: super::H_PSN,
                value: 0,
                range: "1 to 0xffffff",
            });
        }
        Ok(Psn(v as u32))
    }

    /// A PSN from a 24-bit value (`None` for 0 or more than 24 bits).
    pub fn new(v: u32) -> Option<Psn> {
        (v != 0 && v <= 0xff_ffff).then_some(Psn(v))
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:06x}", self.0)
    }
}

/// The operation a session stands for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Op {
    /// GetObject (or a part of it): the server RDMA WRITEs into the
    /// client's buffer.
    Get,
    /// PutObject or UploadPart: the client RDMA WRITEs into the server's
    /// staging region.
    Put,
}

impl Op {
    /// `GET` or `PUT`, exactly (upper case, as hipObject's client sends).
    pub fn parse(s: &str) -> Result<Op, FieldError> {
        match s {
            "GET" => Ok(Op::Get),
            "PUT" => Ok(Op::Put),
            _ => Err(malformed(super::H_OP, s, "GET or PUT")),
        }
    }

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Put => "PUT",
        }
    }
}

/// Where the bytes are in the object: `size` bytes from `offset`, each
/// and their sum at most [`MAX_TRANSFER`], the size at least 1.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Span {
    /// The first byte.
    pub offset: u64,
    /// How many.
    pub size: u64,
}

/// A decimal count: ASCII digits only, no sign, no leading zero (but `0`),
/// at most 10 digits.
pub fn decimal(field: &'static str, s: &str) -> Result<u64, FieldError> {
    const WANT: &str = "a decimal number";
    let ok = !s.is_empty()
        && s.len() <= 10
        && s.bytes().all(|c| c.is_ascii_digit())
        && !(s.len() > 1 && s.starts_with('0'));
    if !ok {
        return Err(malformed(field, s, WANT));
    }
    s.parse::<u64>().map_err(|_| malformed(field, s, WANT))
}

impl Span {
    /// From `X-Amz-Rdma-Size` and the optional `X-Amz-Rdma-Offset`.
    pub fn parse(size: &str, offset: Option<&str>) -> Result<Span, FieldError> {
        let size_v = decimal(super::H_SIZE, size)?;
        let offset_v = offset
            .map(|o| decimal(super::H_OFFSET, o))
            .transpose()?
            .unwrap_or(0);
        Span::new(offset_v, size_v)
    }

    /// Checks the bounds.
    pub fn new(offset: u64, size: u64) -> Result<Span, FieldError> {
        if size == 0 || size > MAX_TRANSFER {
            return Err(FieldError::Range {
                field: super::H_SIZE,
                value: size,
                range: "1 to 2^31 - 1",
            });
        }
        let end = offset.checked_add(size).filter(|&e| e <= MAX_TRANSFER);
        if end.is_none() {
            return Err(FieldError::Range {
                field: super::H_OFFSET,
                value: offset,
                range: "offset + size at most 2^31 - 1",
            });
        }
        Ok(Span { offset, size })
    }
}

/// `X-Amz-Rdma-Checksum`: `CRC64NVME ` and the 12-character base64 of the
/// big-endian CRC-64/NVME, decoded strictly (padding present, the two
/// spare bits zero), so that one value has one spelling.
pub fn parse_checksum(s: &str) -> Result<u64, FieldError> {
    const WANT: &str = "CRC64NVME and 12 base64 characters";
    s.strip_prefix("CRC64NVME ")
        .filter(|b| b.len() == 12)
        .and_then(crate::checksum::crc64nvme_from_value)
        .ok_or_else(|| malformed(super::H_CHECKSUM, s, WANT))
}

/// The [`parse_checksum`] value of a CRC.
pub fn format_checksum(crc: u64) -> String {
    format!("CRC64NVME {}", crate::checksum::crc64nvme_value(crc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_cookies_and_psns() {
        let s = SessionId::parse("00112233445566778899AABBCCDDEEFF").unwrap();
        assert_eq!(s.to_string(), "00112233445566778899aabbccddeeff");
        assert_eq!(format!("{s:?}"), "SessionId(00112233...)");
        for bad in [
            "",
            "0011",
            "00112233445566778899aabbccddeef",
            "g0112233445566778899aabbccddeeff",
        ] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Cookie::parse("DEADbeef").unwrap(), Cookie(0xdead_beef));
        assert_eq!(Cookie(0x1a2b).to_string(), "00001a2b");
        assert!(Cookie::parse("00000000").is_err());
        assert!(Cookie::parse("1234567").is_err());
        assert!(Cookie::parse("+1234567").is_err());
        assert_eq!(Psn::parse("00ABCD").unwrap(), Psn(0xabcd));
        assert_eq!(Psn(0xabcd).to_string(), "00abcd");
        assert!(Psn::parse("000000").is_err());
        assert!(Psn::parse("1000000").is_err());
        assert_eq!(Psn::new(0x100_0000), None);
        assert_eq!(Psn::new(0), None);
    }

    #[test]
    fn bare_hex() {
        assert_eq!(bare_hex_u64("q", "7f00ABC0").unwrap(), 0x7f00_abc0);
        assert_eq!(bare_hex_u64("q", "ffffffffffffffff").unwrap(), u64::MAX);
        for bad in ["", "0x10", "1ffffffffffffffff", " 1", "-1", "1g"] {
            assert!(bare_hex_u64("q", bad).is_err(), "{bad:?}");
        }
        assert!(bare_hex_u32("r", "100000000").is_err());
        assert_eq!(bare_hex_u32("r", "ffffffff").unwrap(), u32::MAX);
    }

    #[test]
    fn ops_and_spans() {
        assert_eq!(Op::parse("GET").unwrap(), Op::Get);
        assert!(Op::parse("get").is_err());
        assert!(Op::parse("DELETE").is_err());
        assert_eq!(
            Span::parse("4096", None).unwrap(),
            Span {
                offset: 0,
                size: 4096
            }
        );
        assert_eq!(
            Span::parse("1", Some("2147483646")).unwrap(),
            Span {
                offset: 2_147_483_646,
                size: 1
            }
        );
        for (size, off) in [
            ("0", None),
            ("2147483648", None),
            ("2", Some("2147483646")),
            ("01", None),
            ("+1", None),
            ("1", Some("")),
            ("99999999999", None),
            ("1 ", None),
        ] {
            assert!(Span::parse(size, off).is_err(), "{size:?} {off:?}");
        }
    }

    #[test]
    fn checksums_have_one_spelling() {
        assert_eq!(parse_checksum("CRC64NVME AAAAAAAAAAE=").unwrap(), 1);
        assert_eq!(format_checksum(1), "CRC64NVME AAAAAAAAAAE=");
        assert_eq!(
            parse_checksum(&format_checksum(0xae8b_1486_0a79_9888)).unwrap(),
            0xae8b_1486_0a79_9888
        );
        for bad in [
            "CRC64NVME AAAAAAAAAAF=",
            "CRC64NVME AAAAAAAAAAE",
            "crc64nvme AAAAAAAAAAE=",
            "CRC64NVME  AAAAAAAAAAE=",
            "CRC32 AAAAAA==",
            "CRC64NVME AAAAAAAAAAAAAA==",
        ] {
            assert!(parse_checksum(bad).is_err(), "{bad:?}");
        }
    }
}
