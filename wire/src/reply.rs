//! The `x-amz-rdma-reply` response header, with hipObject's strict grammar.
//!
//! Trailing NUL, CR and LF are stripped first. Then the value is exactly one
//! of:
//!
//! - `ok` (deprecated, means 200) or `err` (deprecated, a failure);
//! - three ASCII digits from 100 to 599: no sign, no spaces, no extra
//!   leading zero;
//! - `200:`, `204:` or `206:` followed by an 88-hex hipObject token, the
//!   server's RC queue pair (the three successes; hipObject's own handshake
//!   answers `200:`, and its library accepts the other two);
//! - `501` followed by anything: a decline, as hipObject's library reads
//!   it (it compares the first three characters only). Declining is the
//!   safe answer (the client falls back to plain HTTP), so this is the one
//!   place where the grammar is as loose as the real library's.
//!
//! hipObject reads the value into a 512-byte buffer, so longer values are
//! rejected before anything else. Where the real library is looser still
//! (a status followed by other bytes, signs, leading zeros, an embedded
//! NUL), this parser refuses: docs/protocol.md says why for each.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::token::{Token, TokenError};

/// The longest reply accepted, in bytes, before stripping.
pub const REPLY_MAX_LEN: usize = 512;

/// The prefix of the usual form that carries a token.
const PEER_PREFIX: &str = "200:";

/// The status whose reply is a decline whatever follows it.
const DECLINE_PREFIX: &[u8] = b"501";

/// Characters of an unrecognized reply quoted in an error message.
const QUOTE_MAX: usize = 16;

/// A parsed `x-amz-rdma-reply` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reply {
    /// A three-digit status, 100 to 599. Values outside that range can be
    /// built but are not valid on the wire, so they do not parse back.
    Status(u16),
    /// The deprecated `ok`: success, status 200.
    Ok,
    /// The deprecated `err`: a failure with no status.
    Err,
    /// `200:<token>`: success, naming the server's RC queue pair.
    Peer(Token),
    /// `204:<token>` or `206:<token>`: success with that status, naming
    /// the server's RC queue pair (hipObject's library accepts them; no
    /// server of this project sends them).
    PeerStatus(u16, Token),
}

/// Why a reply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// Longer than hipObject's 512-byte reply buffer.
    #[error("reply is {len} bytes, longer than the 512 bytes hipObject reads")]
    TooLong {
        /// The length in bytes.
        len: usize,
    },
    /// Nothing left after stripping trailing NUL, CR and LF.
    #[error("reply is empty")]
    Empty,
    /// Bytes that are not UTF-8.
    #[error("reply is not UTF-8 (invalid byte at position {position})")]
    NotUtf8 {
        /// Byte position of the first invalid byte.
        position: usize,
    },
    /// Three digits outside 100 to 599.
    #[error("reply status {status:03} is outside 100 to 599")]
    StatusRange {
        /// The status found.
        status: u16,
    },
    /// A `:` after something other than `200`, `204` or `206`.
    #[error(
        "reply prefix {prefix:?} cannot carry a token: only \"200:\", \"204:\" and \"206:\" do"
    )]
    TokenPrefix {
        /// What came before the first `:` (at most 16 characters).
        prefix: String,
    },
    /// `200:`, `204:` or `206:` followed by an invalid token.
    #[error("reply carries an invalid token: {0}")]
    Peer(TokenError),
    /// None of the forms.
    #[error("reply {value:?} is not ok, err, a three-digit status from 100 to 599, 501 and anything, or 200:, 204: or 206: and an 88-hex token")]
    Unrecognized {
        /// The value, cut to at most 16 characters.
        value: String,
    },
}

fn quote(s: &str) -> String {
    s.chars().take(QUOTE_MAX).collect()
}

impl Reply {
    /// `200`: the transfer succeeded.
    pub fn success() -> Reply {
        Reply::Status(200)
    }

    /// `206`: a ranged or partNumber transfer succeeded.
    pub fn partial() -> Reply {
        Reply::Status(206)
    }

    /// `501`: the server declined RDMA.
    pub fn declined() -> Reply {
        Reply::Status(501)
    }

    /// `200:<token>`: success, naming the server's queue pair.
    pub fn peer(token: Token) -> Reply {
        Reply::Peer(token)
    }

    /// Parses a reply value, from bytes or a string.
    pub fn parse(value: impl AsRef<[u8]>) -> Result<Reply, ReplyError> {
        let bytes = value.as_ref();
        if bytes.len() > REPLY_MAX_LEN {
            return Err(ReplyError::TooLong { len: bytes.len() });
        }
        let end = bytes
            .iter()
            .rposition(|b| !matches!(b, b'\0' | b'\r' | b'\n'))
            .map_or(0, |i| i + 1);
        let bytes = bytes.get(..end).unwrap_or_default();
        if bytes.is_empty() {
            return Err(ReplyError::Empty);
        }
        if bytes.starts_with(DECLINE_PREFIX) {
            return Ok(Reply::Status(501));
        }
        let s = std::str::from_utf8(bytes).map_err(|e| ReplyError::NotUtf8 {
            position: e.valid_up_to(),
        })?;
        match s {
            "ok" => return Ok(Reply::Ok),
            "err" => return Ok(Reply::Err),
            _ => {}
        }
        if let Some((prefix, token)) = s.split_once(':') {
            let status = match prefix {
                "200" => Some(200),
                "204" => Some(204),
                "206" => Some(206),
                _ => None,
            };
            return match status {
                Some(200) => Token::decode(token)
                    .map(Reply::Peer)
                    .map_err(ReplyError::Peer),
                Some(st) => Token::decode(token)
                    .map(|t| Reply::PeerStatus(st, t))
                    .map_err(ReplyError::Peer),
                None => Err(ReplyError::TokenPrefix {
                    prefix: quote(prefix),
                }),
            };
        }
        if let [a, b, c] = *s.as_bytes() {
            if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() {
                let status =
                    u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
                if !(100..=599).contains(&status) {
                    return Err(ReplyError::StatusRange { status });
                }
                return Ok(Reply::Status(status));
            }
        }
        Err(ReplyError::Unrecognized { value: quote(s) })
    }

    /// The HTTP status the reply stands for: 200 for `ok` and a peer token,
    /// none for `err`.
    pub fn status(&self) -> Option<u16> {
        match self {
            Reply::Status(s) => Some(*s),
            Reply::Ok | Reply::Peer(_) => Some(200),
            Reply::PeerStatus(st, _) => Some(*st),
            Reply::Err => None,
        }
    }

    /// Whether the reply is a success: 200, 204, 206, `ok`, or a peer token.
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Reply::Status(200 | 204 | 206) | Reply::Ok | Reply::Peer(_) | Reply::PeerStatus(..)
        )
    }

    /// Whether the server declined RDMA (501).
    pub fn is_declined(&self) -> bool {
        matches!(self, Reply::Status(501))
    }

    /// The peer token of a `200:`, `204:` or `206:` + token reply.
    pub fn peer_token(&self) -> Option<&Token> {
        match self {
            Reply::Peer(t) | Reply::PeerStatus(_, t) => Some(t),
            _ => None,
        }
    }

    /// The header value: `ok`, `err`, three digits, or a status, `:` and a token.
    pub fn format(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => write!(f, "{s:03}"),
            Reply::Ok => f.write_str("ok"),
            Reply::Err => f.write_str("err"),
            Reply::Peer(t) => write!(f, "{PEER_PREFIX}{t}"),
            Reply::PeerStatus(st, t) => write!(f, "{st:03}:{t}"),
        }
    }
}

impl FromStr for Reply {
    type Err = ReplyError;

    fn from_str(s: &str) -> Result<Reply, ReplyError> {
        Reply::parse(s)
    }
}
