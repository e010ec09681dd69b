//! The JSON shapes the commands print.

use hipobj_wire::{DcDescriptor, Detected, LegacySuffix, Reply, Token, TokenValue};
use serde::Serialize;

/// A decoded token value, either dialect.
#[derive(Debug, Serialize)]
pub struct TokenJson {
    /// `"hipobj"` or `"cuobj"`.
    pub dialect: &'static str,
    /// `"rc"` or `"dc"`; cuObject is always `"dc"`.
    pub transport: &'static str,
    /// QP number; the DCT number for DC.
    pub qp_num: u32,
    /// 32 lowercase hex digits; null for a descriptor without a GID.
    pub gid: Option<String>,
    pub rkey: u32,
    pub addr: u64,
    /// Bytes; the buffer size for cuObject.
    pub len: u64,
    /// Null for cuObject, whose descriptor has no port.
    pub port: Option<u8>,
    pub lid: u16,
    /// Dotted quad from an IPv4-mapped GID, else null.
    pub client_ip: Option<String>,
    /// The legacy `:addr:size` suffix, when present.
    pub suffix: Option<SuffixJson>,
}

/// The legacy suffix.
#[derive(Debug, Serialize)]
pub struct SuffixJson {
    pub addr: u64,
    pub len: u64,
}

/// A parsed reply.
#[derive(Debug, Serialize)]
pub struct ReplyJson {
    /// `"status"`, `"ok"`, `"err"` or `"peer"`.
    pub form: &'static str,
    pub status: Option<u16>,
    pub success: bool,
    pub declined: bool,
    /// The server's token, for `200:<token>`.
    pub peer: Option<TokenJson>,
}

impl TokenJson {
    /// A hipObject token.
    pub fn from_token(t: &Token, suffix: Option<&LegacySuffix>) -> TokenJson {
        TokenJson {
            dialect: "hipobj",
            transport: t.transport.as_str(),
            qp_num: t.qp_num,
            gid: Some(t.gid.to_hex()),
            rkey: t.rkey,
            addr: t.addr,
            len: t.len,
            port: Some(t.port),
            lid: t.lid,
            client_ip: t.client_ip().map(|ip| ip.to_string()),
            suffix: suffix.map(SuffixJson::from),
        }
    }

    /// A cuObject descriptor.
    pub fn from_descriptor(d: &DcDescriptor, suffix: Option<&LegacySuffix>) -> TokenJson {
        TokenJson {
            dialect: "cuobj",
            transport: "dc",
            qp_num: d.dct_num,
            gid: d.gid.map(|g| g.to_hex()),
            rkey: d.rkey,
            addr: d.addr,
            len: u64::from(d.size),
            port: None,
            lid: d.lid,
            client_ip: d.gid.and_then(|g| g.ipv4()).map(|ip| ip.to_string()),
            suffix: suffix.map(SuffixJson::from),
        }
    }
}

impl From<&Detected> for TokenJson {
    fn from(d: &Detected) -> TokenJson {
        match &d.value {
            TokenValue::HipObj(t) => TokenJson::from_token(t, d.suffix.as_ref()),
            TokenValue::CuObj(c) => TokenJson::from_descriptor(c, d.suffix.as_ref()),
        }
    }
}

impl From<&LegacySuffix> for SuffixJson {
    fn from(s: &LegacySuffix) -> SuffixJson {
        SuffixJson {
            addr: s.addr,
            len: s.len,
        }
    }
}

impl From<&Reply> for ReplyJson {
    fn from(r: &Reply) -> ReplyJson {
        let form = match r {
            Reply::Status(_) => "status",
            Reply::Ok => "ok",
            Reply::Err => "err",
            Reply::Peer(_) | Reply::PeerStatus(..) => "peer",
        };
        ReplyJson {
            form,
            status: r.status(),
            success: r.is_success(),
            declined: r.is_declined(),
            peer: r.peer_token().map(|t| TokenJson::from_token(t, None)),
        }
    }
}
