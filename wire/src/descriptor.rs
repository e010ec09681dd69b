//! NVIDIA cuObject's DC descriptor: 81 characters, seven colon-separated hex
//! fields in the printf form `%016llx:%08x:%08x:%04x:%06x:%1x:%s`.
//!
//! | # | field | width |
//! |---|---|---|
//! | 1 | remote base address | 16 |
//! | 2 | buffer size | 8 |
//! | 3 | rkey | 8 |
//! | 4 | LID | 4 |
//! | 5 | DCT number (24 bits) | 6 |
//! | 6 | GID present | 1 (`0` or `1`) |
//! | 7 | GID | 32 |
//!
//! Choices this crate makes where the format leaves room:
//!
//! - [`DcDescriptor::format`] writes lowercase, as printf's `%x` does;
//!   [`DcDescriptor::parse`] accepts hex digits in either case, as the
//!   hipObject token decoder does.
//! - With the present flag `0` the GID field is still 32 characters: the
//!   formatter writes 32 zeros, and the parser requires 32 hex digits (any
//!   value) and ignores them.
//! - The parser takes exactly 81 characters: every field at its exact width,
//!   colons at their exact positions, no sign, no `0x`, no whitespace, and no
//!   suffix (see [`crate::dialect`] for the legacy `:addr:size` suffix).

use std::str::FromStr;

use thiserror::Error;

use crate::gid::Gid;
use crate::hex;

/// Characters in a descriptor.
pub const DESCRIPTOR_LEN: usize = 81;
/// The largest DCT number: the field is 24 bits.
pub const DCT_NUM_MAX: u32 = 0x00ff_ffff;

/// Name and width of each field, in order; colons separate them.
const FIELDS: [(&str, usize); 7] = [
    ("address", 16),
    ("size", 8),
    ("rkey", 8),
    ("LID", 4),
    ("DCT number", 6),
    ("GID present flag", 1),
    ("GID", 32),
];

const _: () = {
    let mut total = 0;
    let mut i = 0;
    while i < FIELDS.len() {
        total += FIELDS[i].1;
        i += 1;
    }
    // Six colons between seven fields.
    assert!(total + FIELDS.len() - 1 == DESCRIPTOR_LEN);
};

/// Why a descriptor was rejected, or could not be formatted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DescriptorError {
    /// The value is not 81 characters long.
    #[error("cuObject descriptor is {len} characters, expected 81")]
    Length {
        /// The length found, in characters.
        len: usize,
    },
    /// A character other than `:` where a field separator belongs.
    #[error("cuObject descriptor has {ch:?} at position {position} where ':' belongs")]
    Separator {
        /// Position, counted in characters from 0.
        position: usize,
        /// The character found.
        ch: char,
    },
    /// A character that is not an ASCII hex digit inside a field.
    #[error("non-hex character {ch:?} at position {position} (cuObject descriptor {field} field)")]
    NonHex {
        /// The field's name.
        field: &'static str,
        /// Position, counted in characters from 0.
        position: usize,
        /// The character found.
        ch: char,
    },
    /// A GID present flag other than `0` or `1`.
    #[error("cuObject descriptor GID present flag is {ch:?}, expected '0' or '1'")]
    PresentFlag {
        /// The character found.
        ch: char,
    },
    /// On format: a DCT number wider than 24 bits.
    #[error("DCT number {dct_num:#x} does not fit the descriptor's 24 bits (at most 0xffffff)")]
    DctNumTooLarge {
        /// The DCT number given.
        dct_num: u32,
    },
}

/// A decoded cuObject DC descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DcDescriptor {
    /// The remote base address of the buffer.
    pub addr: u64,
    /// The buffer size in bytes (so at most 2^32 - 1).
    pub size: u32,
    /// The memory region's remote key.
    pub rkey: u32,
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// The DC target number; 24 bits on the wire.
    pub dct_num: u32,
    /// The GID, when the present flag is 1.
    pub gid: Option<Gid>,
}

impl DcDescriptor {
    /// The 81-character descriptor, lowercase, exactly as printf writes it.
    /// Without a GID the present flag is `0` and the GID field is 32 zeros.
    ///
    /// Fails only when `dct_num` is above [`DCT_NUM_MAX`].
    pub fn format(&self) -> Result<String, DescriptorError> {
        if self.dct_num > DCT_NUM_MAX {
            return Err(DescriptorError::DctNumTooLarge {
                dct_num: self.dct_num,
            });
        }
        let (present, gid) = match self.gid {
            Some(g) => (1, g),
            None => (0, Gid::ZERO),
        };
        Ok(format!(
            "{:016x}:{:08x}:{:08x}:{:04x}:{:06x}:{:1x}:{}",
            self.addr,
            self.size,
            self.rkey,
            self.lid,
            self.dct_num,
            present,
            gid.to_hex()
        ))
    }

    /// Parses exactly one 81-character descriptor; hex digits in either case.
    pub fn parse(s: &str) -> Result<DcDescriptor, DescriptorError> {
        if s.len() != DESCRIPTOR_LEN {
            let len = s.chars().count();
            if len != DESCRIPTOR_LEN {
                return Err(DescriptorError::Length { len });
            }
            // 81 characters but more bytes: something is not ASCII; the
            // field walk below reports where.
        }
        let mut fields: [&str; 7] = [""; 7];
        let mut rest = s;
        let mut position = 0usize;
        for (i, (name, width)) in FIELDS.iter().enumerate() {
            if i > 0 {
                let mut chars = rest.chars();
                match chars.next() {
                    Some(':') => {}
                    Some(ch) => return Err(DescriptorError::Separator { position, ch }),
                    None => return Err(DescriptorError::Length { len: position }),
                }
                rest = chars.as_str();
                position += 1;
            }
            let field_chars = rest.char_indices().take(*width);
            let mut end = 0usize;
            let mut count = 0usize;
            for (at, ch) in field_chars {
                if !ch.is_ascii_hexdigit() {
                    return Err(DescriptorError::NonHex {
                        field: name,
                        position: position + count,
                        ch,
                    });
                }
                end = at + ch.len_utf8();
                count += 1;
            }
            if count < *width {
                return Err(DescriptorError::Length {
                    len: position + count,
                });
            }
            let (field, tail) = rest.split_at_checked(end).unwrap_or((rest, ""));
            if let Some(slot) = fields.get_mut(i) {
                *slot = field;
            }
            rest = tail;
            position += width;
        }
        if !rest.is_empty() {
            return Err(DescriptorError::Length {
                len: position + rest.chars().count(),
            });
        }
        let [addr, size, rkey, lid, dct, present, gid] = fields;
        // Each field is all hex and of its exact width, so each conversion
        // below fits its type.
        let num = |f: &str| hex::parse_u64(f).unwrap_or(0);
        let gid = match present {
            "1" => Some(Gid::from_hex(gid).unwrap_or(Gid::ZERO)),
            "0" => None,
            other => {
                return Err(DescriptorError::PresentFlag {
                    ch: other.chars().next().unwrap_or('?'),
                })
            }
        };
        Ok(DcDescriptor {
            addr: num(addr),
            size: u32::try_from(num(size)).unwrap_or(u32::MAX),
            rkey: u32::try_from(num(rkey)).unwrap_or(u32::MAX),
            lid: u16::try_from(num(lid)).unwrap_or(u16::MAX),
            dct_num: u32::try_from(num(dct)).unwrap_or(DCT_NUM_MAX),
            gid,
        })
    }
}

impl FromStr for DcDescriptor {
    type Err = DescriptorError;

    fn from_str(s: &str) -> Result<DcDescriptor, DescriptorError> {
        DcDescriptor::parse(s)
    }
}
