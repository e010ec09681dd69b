//! The hipObject binary token: 44 little-endian bytes as 88 hex digits.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | u8 | transport: 0 = DC, 1 = RC |
//! | 1 | u32 | QP number (the DCT number for DC) |
//! | 5 | 16 bytes | GID, verbatim |
//! | 21 | u32 | rkey |
//! | 25 | u64 | remote virtual address |
//! | 33 | u64 | length in bytes |
//! | 41 | u8 | port number |
//! | 42 | u16 | LID (0 on RoCE) |
//!
//! The encoder writes lowercase; the decoder accepts either case and nothing
//! else: no sign, no `0x`, no whitespace, no suffix.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use thiserror::Error;

use crate::gid::Gid;
use crate::hex;

/// Bytes in a serialized token.
pub const TOKEN_BYTES: usize = 44;
/// Hex digits in an encoded token.
pub const TOKEN_HEX_LEN: usize = 2 * TOKEN_BYTES;

const OFF_TRANSPORT: usize = 0;
const OFF_QP_NUM: usize = OFF_TRANSPORT + 1;
const OFF_GID: usize = OFF_QP_NUM + 4;
const OFF_RKEY: usize = OFF_GID + 16;
const OFF_ADDR: usize = OFF_RKEY + 4;
const OFF_LEN: usize = OFF_ADDR + 8;
const OFF_PORT: usize = OFF_LEN + 8;
const OFF_LID: usize = OFF_PORT + 1;
const END: usize = OFF_LID + 2;

// The layout `docs/protocol.md` tables; a change of any field's size fails the build.
const _: () = {
    assert!(OFF_QP_NUM == 1);
    assert!(OFF_GID == 5);
    assert!(OFF_RKEY == 21);
    assert!(OFF_ADDR == 25);
    assert!(OFF_LEN == 33);
    assert!(OFF_PORT == 41);
    assert!(OFF_LID == 42);
    assert!(END == TOKEN_BYTES);
    assert!(TOKEN_HEX_LEN == 88);
};

/// The RDMA transport a token names.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// Dynamic Connection (mlx5 only); the QP number is a DCT number.
    Dc = 0,
    /// Reliable Connection; the QP number names a connected queue pair.
    Rc = 1,
}

impl Transport {
    /// The transport for a token's first byte, `None` for anything but 0 or 1.
    pub fn from_byte(b: u8) -> Option<Transport> {
        match b {
            0 => Some(Transport::Dc),
            1 => Some(Transport::Rc),
            _ => None,
        }
    }

    /// The byte written into a token.
    pub fn as_byte(self) -> u8 {
        self as u8
    }

    /// `"dc"` or `"rc"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Dc => "dc",
            Transport::Rc => "rc",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a token was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    /// The value is not 88 characters long.
    #[error("token is {len} characters, expected 88")]
    Length {
        /// The length found, in characters.
        len: usize,
    },
    /// 88 hex digits followed by `:` (the legacy suffix), which a hipObject
    /// token never carries.
    #[error("token is followed by a suffix of {suffix_len} characters starting with ':'; a hipObject token has no suffix")]
    Suffix {
        /// Characters after the 88 hex digits.
        suffix_len: usize,
    },
    /// A character that is not an ASCII hex digit.
    #[error("non-hex character {ch:?} at position {position}")]
    NonHex {
        /// Position of the character, counted in characters from 0.
        position: usize,
        /// The character.
        ch: char,
    },
    /// The first byte is neither 0 (DC) nor 1 (RC).
    #[error("transport byte {byte:#04x} is neither DC (0) nor RC (1)")]
    Transport {
        /// The byte found.
        byte: u8,
    },
}

/// A decoded hipObject token: the client's buffer and queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token {
    /// RC or DC.
    pub transport: Transport,
    /// The QP number (the DCT number for DC).
    pub qp_num: u32,
    /// The NIC's GID.
    pub gid: Gid,
    /// The memory region's remote key.
    pub rkey: u32,
    /// The remote virtual address of the first byte to move.
    pub addr: u64,
    /// Bytes to move; 0 on an RC token is a connection request.
    pub len: u64,
    /// The NIC port (1).
    pub port: u8,
    /// The port's LID (0 on RoCE).
    pub lid: u16,
}

fn field<const N: usize>(b: &[u8; TOKEN_BYTES], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    // `off + N <= TOKEN_BYTES` for every call: the offsets are constants
    // checked at compile time above.
    if let Some(src) = b.get(off..off.saturating_add(N)) {
        out.copy_from_slice(src);
    }
    out
}

fn put(b: &mut [u8; TOKEN_BYTES], off: usize, src: &[u8]) {
    if let Some(dst) = b.get_mut(off..off.saturating_add(src.len())) {
        dst.copy_from_slice(src);
    }
}

impl Token {
    /// Serializes field by field, little-endian, at the documented offsets.
    pub fn to_bytes(&self) -> [u8; TOKEN_BYTES] {
        let mut b = [0u8; TOKEN_BYTES];
        put(&mut b, OFF_TRANSPORT, &[self.transport.as_byte()]);
        put(&mut b, OFF_QP_NUM, &self.qp_num.to_le_bytes());
        put(&mut b, OFF_GID, self.gid.as_bytes());
        put(&mut b, OFF_RKEY, &self.rkey.to_le_bytes());
        put(&mut b, OFF_ADDR, &self.addr.to_le_bytes());
        put(&mut b, OFF_LEN, &self.len.to_le_bytes());
        put(&mut b, OFF_PORT, &[self.port]);
        put(&mut b, OFF_LID, &self.lid.to_le_bytes());
        b
    }

    /// Deserializes 44 bytes; fails only on a transport byte other than 0 or 1.
    pub fn from_bytes(b: &[u8; TOKEN_BYTES]) -> Result<Token, TokenError> {
        let [byte] = field::<1>(b, OFF_TRANSPORT);
        let transport = Transport::from_byte(byte).ok_or(TokenError::Transport { byte })?;
        let [port] = field::<1>(b, OFF_PORT);
        Ok(Token {
            transport,
            qp_num: u32::from_le_bytes(field(b, OFF_QP_NUM)),
            gid: Gid(field(b, OFF_GID)),
            rkey: u32::from_le_bytes(field(b, OFF_RKEY)),
            addr: u64::from_le_bytes(field(b, OFF_ADDR)),
            len: u64::from_le_bytes(field(b, OFF_LEN)),
            port,
            lid: u16::from_le_bytes(field(b, OFF_LID)),
        })
    }

    /// The token as 88 lowercase hex digits.
    pub fn encode(&self) -> String {
        hex::encode_lower(&self.to_bytes())
    }

    /// Decodes exactly 88 hex digits, in either case.
    ///
    /// Rejects any other length, any character that is not a hex digit
    /// (`+`, space, `x`, `g`, ...), a transport byte other than 0 or 1, and
    /// any suffix.
    pub fn decode(s: &str) -> Result<Token, TokenError> {
        if s.len() != TOKEN_HEX_LEN {
            let len = s.chars().count();
            if len > TOKEN_HEX_LEN && s.as_bytes().get(TOKEN_HEX_LEN) == Some(&b':') {
                if let Some(head) = s.get(..TOKEN_HEX_LEN) {
                    if hex::first_non_hex(head).is_none() {
                        return Err(TokenError::Suffix {
                            suffix_len: len - TOKEN_HEX_LEN,
                        });
                    }
                }
            }
            if len == TOKEN_HEX_LEN {
                // Right number of characters, but some are not ASCII.
                if let Some((position, ch)) = hex::first_non_hex(s) {
                    return Err(TokenError::NonHex { position, ch });
                }
            }
            return Err(TokenError::Length { len });
        }
        if let Some((position, ch)) = hex::first_non_hex(s) {
            return Err(TokenError::NonHex { position, ch });
        }
        let mut b = [0u8; TOKEN_BYTES];
        if !hex::decode_into(s.as_bytes(), &mut b) {
            // Unreachable after the checks above; reported as a length error
            // rather than a panic.
            return Err(TokenError::Length { len: s.len() });
        }
        Token::from_bytes(&b)
    }

    /// The client NIC's IPv4 address, when the GID is IPv4-mapped (bytes
    /// 10 and 11 are `ff ff`), as hipObject's `hipObjTokenClientNic()`.
    pub fn client_ip(&self) -> Option<Ipv4Addr> {
        self.gid.ipv4()
    }

    /// Whether this is an RC connection request: an RC token of length 0.
    pub fn is_handshake(&self) -> bool {
        self.transport == Transport::Rc && self.len == 0
    }
}

impl fmt::Display for Token {
    /// The 88 lowercase hex digits of [`Token::encode`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for Token {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Token, TokenError> {
        Token::decode(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_bytes() {
        assert_eq!(Transport::from_byte(0), Some(Transport::Dc));
        assert_eq!(Transport::from_byte(1), Some(Transport::Rc));
        assert_eq!(Transport::from_byte(2), None);
        assert_eq!(Transport::Rc.as_byte(), 1);
        assert_eq!(Transport::Dc.to_string(), "dc");
    }

    #[test]
    fn handshake_is_rc_with_len_zero() {
        let mut t = Token {
            transport: Transport::Rc,
            qp_num: 7,
            gid: Gid::ZERO,
            rkey: 0,
            addr: 0,
            len: 0,
            port: 1,
            lid: 0,
        };
        assert!(t.is_handshake());
        t.len = 1;
        assert!(!t.is_handshake());
        t.len = 0;
        t.transport = Transport::Dc;
        assert!(!t.is_handshake());
    }
}
