//! Server-side detection of the three `x-amz-rdma-token` dialects.
//!
//! 1. The hipObject token: 88 hex digits ([`Token`]).
//! 2. NVIDIA cuObject's 81-character DC descriptor ([`DcDescriptor`]).
//! 3. Either of them followed by the legacy `:%016lx:%016lx` suffix
//!    (address, size) that some older clients append ([`LegacySuffix`]).
//!
//! The first field tells them apart: 88 hex digits before any `:` (or in a
//! value with no `:`) is a hipObject token; anything else is parsed as a
//! cuObject descriptor. The suffix is reported separately; this crate's
//! clients never send it, and what a server does with it is the server's
//! policy.
//!
//! Header values are taken as they are: nothing is trimmed, and leading or
//! trailing whitespace is an error.

use thiserror::Error;

use crate::descriptor::{DcDescriptor, DescriptorError, DESCRIPTOR_LEN};
use crate::hex;
use crate::token::{Token, TokenError, TOKEN_HEX_LEN};

/// Characters in the legacy suffix `:%016lx:%016lx`.
pub const SUFFIX_LEN: usize = 34;

/// The legacy `:addr:size` suffix: an override of the buffer's address and
/// size that some clients append to their token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LegacySuffix {
    /// The buffer address.
    pub addr: u64,
    /// The buffer size in bytes.
    pub len: u64,
}

impl LegacySuffix {
    /// The suffix as clients write it, `:%016lx:%016lx`, lowercase. Our
    /// clients never send it; this exists for tests and tools.
    pub fn format(&self) -> String {
        format!(":{:016x}:{:016x}", self.addr, self.len)
    }

    /// Parses exactly `:` + 16 hex digits + `:` + 16 hex digits (either case).
    pub fn parse(s: &str) -> Result<LegacySuffix, SuffixError> {
        let len = s.chars().count();
        if len != SUFFIX_LEN || s.len() != SUFFIX_LEN {
            if len == SUFFIX_LEN {
                if let Some((position, ch)) = s.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
                    return Err(SuffixError::NonHex { position, ch });
                }
            }
            return Err(SuffixError::Length { len });
        }
        // ASCII from here on, so byte positions are character positions.
        let bytes = s.as_bytes();
        for position in [0usize, 17] {
            match bytes.get(position) {
                Some(b':') => {}
                Some(&b) => {
                    return Err(SuffixError::Separator {
                        position,
                        ch: char::from(b),
                    })
                }
                None => return Err(SuffixError::Length { len }),
            }
        }
        let field = |from: usize| -> Result<u64, SuffixError> {
            let f = s.get(from..from + 16).unwrap_or("");
            if let Some((i, ch)) = hex::first_non_hex(f) {
                return Err(SuffixError::NonHex {
                    position: from + i,
                    ch,
                });
            }
            hex::parse_u64(f).ok_or(SuffixError::Length { len })
        };
        Ok(LegacySuffix {
            addr: field(1)?,
            len: field(18)?,
        })
    }
}

/// Why a legacy suffix was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SuffixError {
    /// Not 34 characters.
    #[error("legacy suffix is {len} characters, expected 34 (:<16 hex address>:<16 hex size>)")]
    Length {
        /// The length found, in characters.
        len: usize,
    },
    /// A character other than `:` where a separator belongs.
    #[error("legacy suffix has {ch:?} at position {position} where ':' belongs")]
    Separator {
        /// Position within the suffix, in characters from 0.
        position: usize,
        /// The character found.
        ch: char,
    },
    /// A character that is not an ASCII hex digit.
    #[error("non-hex character {ch:?} at position {position} of the legacy suffix")]
    NonHex {
        /// Position within the suffix, in characters from 0.
        position: usize,
        /// The character found.
        ch: char,
    },
}

/// Why a header value matched no dialect.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DialectError {
    /// The value is empty.
    #[error("token value is empty")]
    Empty,
    /// The value starts or ends with whitespace; header values are not
    /// trimmed.
    #[error("token value has whitespace at position {position}; values are not trimmed")]
    Whitespace {
        /// Position of the whitespace, in characters from 0.
        position: usize,
    },
    /// An invalid hipObject token (the first field is 88 characters, or
    /// there is no `:`).
    #[error(transparent)]
    Token(#[from] TokenError),
    /// An invalid cuObject descriptor.
    #[error(transparent)]
    Descriptor(#[from] DescriptorError),
    /// A valid token or descriptor followed by an invalid suffix.
    #[error(transparent)]
    Suffix(#[from] SuffixError),
}

/// A token value in one of the two dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenValue {
    /// hipObject's binary token (RC or DC).
    HipObj(Token),
    /// NVIDIA cuObject's DC descriptor.
    CuObj(DcDescriptor),
}

/// The result of [`detect`]: the value, and the legacy suffix if there was
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Detected {
    /// The token or descriptor.
    pub value: TokenValue,
    /// The legacy `:addr:size` suffix, when the client sent one.
    pub suffix: Option<LegacySuffix>,
}

/// Tells the dialect of an `x-amz-rdma-token` value and parses it strictly.
pub fn detect(s: &str) -> Result<Detected, DialectError> {
    if s.is_empty() {
        return Err(DialectError::Empty);
    }
    if s.starts_with(char::is_whitespace) {
        return Err(DialectError::Whitespace { position: 0 });
    }
    if s.ends_with(char::is_whitespace) {
        return Err(DialectError::Whitespace {
            position: s.chars().count().saturating_sub(1),
        });
    }
    let first_field = s.split(':').next().unwrap_or(s);
    let (head, tail, is_token) =
        if first_field.len() == TOKEN_HEX_LEN || first_field.len() == s.len() {
            // 88 characters before the first `:`, or no `:` at all.
            let cut = first_field.len();
            (first_field, s.get(cut..).unwrap_or(""), true)
        } else {
            match s.split_at_checked(DESCRIPTOR_LEN) {
                Some((head, tail)) if tail.starts_with(':') => (head, tail, false),
                _ => (s, "", false),
            }
        };
    let value = if is_token {
        TokenValue::HipObj(Token::decode(head)?)
    } else {
        TokenValue::CuObj(DcDescriptor::parse(head)?)
    };
    let suffix = if tail.is_empty() {
        None
    } else {
        Some(LegacySuffix::parse(tail)?)
    };
    Ok(Detected { value, suffix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_round_trip() {
        let s = LegacySuffix {
            addr: 0x7f00_0000_1000,
            len: 4096,
        };
        assert_eq!(s.format(), ":00007f0000001000:0000000000001000");
        assert_eq!(LegacySuffix::parse(&s.format()), Ok(s));
        assert_eq!(
            LegacySuffix::parse(":00007F0000001000:0000000000001000"),
            Ok(s)
        );
    }

    #[test]
    fn suffix_rejects() {
        assert_eq!(
            LegacySuffix::parse(":00007f0000001000:000000000000100"),
            Err(SuffixError::Length { len: 33 })
        );
        assert_eq!(
            LegacySuffix::parse(":00007f0000001000;0000000000001000"),
            Err(SuffixError::Separator {
                position: 17,
                ch: ';'
            })
        );
        assert_eq!(
            LegacySuffix::parse(":+0007f0000001000:0000000000001000"),
            Err(SuffixError::NonHex {
                position: 1,
                ch: '+'
            })
        );
    }
}
