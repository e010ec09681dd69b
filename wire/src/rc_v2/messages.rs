//! hipobj-rc-v2's requests and answers, each read from a header getter
//! (`name -> value`, names lowercase, as HTTP libraries look them up) and
//! written as `(name, value)` pairs. Reading checks every field; writing
//! produces what the peers' parsers take (lower-case hex, the protocol
//! echo on every answer).

use thiserror::Error;

use super::fields::{
    bare_hex_u32, bare_hex_u64, decimal, format_checksum, parse_checksum, Cookie, FieldError, Op,
    Psn, SessionId, Span, MAX_TRANSFER,
};
use super::names::{
    CAPABILITY_HANDSHAKE, CAPABILITY_PARTS, H_BYTES, H_CAPABILITIES, H_CHECKSUM, H_COOKIE, H_ETAG,
    H_MR_ADDR, H_MR_RKEY, H_OFFSET, H_OP, H_PROTOCOL, H_PSN, H_QPN, H_REPLY, H_SESSION, H_SIZE,
    H_TARGET, H_TOKEN, H_VERSION_ID, PROTOCOL,
};
use super::target::{Target, TargetError};
use crate::reply::{Reply, ReplyError};
use crate::token::{Token, TokenError, Transport};

/// The longest ETag or version id accepted (versitygw's limit).
pub const TAG_MAX_LEN: usize = 127;

/// Why a request or an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MessageError {
    /// No `x-amz-rdma-protocol`, or another protocol: not a v2 message.
    #[error("x-amz-rdma-protocol is {0:?}, not hipobj-rc-v2")]
    Protocol(Option<String>),
    /// A header the message needs is absent.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// A header's value is malformed or out of range.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The target is malformed.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The token is malformed.
    #[error("x-amz-rdma-token: {0}")]
    Token(#[from] TokenError),
    /// The token is not an RC queue pair's, or names no GID.
    #[error("{0} names no RC queue pair (transport DC, or an all-zero GID)")]
    NotRc(&'static str),
    /// The reply is malformed, or not `200:` and a token.
    #[error("x-amz-rdma-reply: {0}")]
    Reply(String),
    /// An ETag or version id over 127 bytes or with control characters.
    #[error("{0} is over 127 bytes or has control characters")]
    Tag(&'static str),
}

impl From<ReplyError> for MessageError {
    fn from(e: ReplyError) -> MessageError {
        MessageError::Reply(e.to_string())
    }
}

/// A header getter.
pub trait Headers {
    /// The value of `name` (lowercase), if present.
    fn get(&self, name: &str) -> Option<&str>;
}

impl Headers for [(&str, &str)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

impl Headers for [(&'static str, String)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn need<'a, H: Headers + ?Sized>(h: &'a H, name: &'static str) -> Result<&'a str, MessageError> {
    h.get(name).ok_or(MessageError::Missing(name))
}

fn protocol<H: Headers + ?Sized>(h: &H) -> Result<(), MessageError> {
    match h.get(H_PROTOCOL) {
        Some(PROTOCOL) => Ok(()),
        other => Err(MessageError::Protocol(
            other.map(|s| s.chars().take(40).collect()),
        )),
    }
}

fn rc_token(t: Token, what: &'static str) -> Result<Token, MessageError> {
    if t.transport != Transport::Rc || t.gid.0 == [0; 16] || t.qp_num == 0 {
        return Err(MessageError::NotRc(what));
    }
    Ok(t)
}

fn tag<H: Headers + ?Sized>(h: &H, name: &'static str) -> Result<Option<String>, MessageError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) if v.len() <= TAG_MAX_LEN && !v.bytes().any(|c| c.is_ascii_control()) => {
            Ok(Some(v.to_string()))
        }
        Some(_) => Err(MessageError::Tag(name)),
    }
}

/// A memory region the peer may write into: its address and rkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staging {
    /// Its virtual address.
    pub addr: u64,
    /// Its rkey.
    pub rkey: u32,
}

impl Staging {
    fn read<H: Headers + ?Sized>(h: &H) -> Result<Option<Staging>, MessageError> {
        match (h.get(H_MR_ADDR), h.get(H_MR_RKEY)) {
            (None, None) => Ok(None),
            (Some(a), Some(k)) => Ok(Some(Staging {
                addr: bare_hex_u64(H_MR_ADDR, a)?,
                rkey: bare_hex_u32(H_MR_RKEY, k)?,
            })),
            (None, Some(_)) => Err(MessageError::Missing(H_MR_ADDR)),
            (Some(_), None) => Err(MessageError::Missing(H_MR_RKEY)),
        }
    }

    fn write(&self, out: &mut Vec<(&'static str, String)>) {
        out.push((H_MR_ADDR, format!("{:x}", self.addr)));
        out.push((H_MR_RKEY, format!("{:x}", self.rkey)));
    }
}

/// PREPARE: the client's QP (token) and first PSN, the cookie, and what
/// to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare {
    /// The client's RC QP and GID (the rest of the token is zero).
    pub token: Token,
    /// The client's first PSN.
    pub psn: Psn,
    /// The transfer's cookie.
    pub cookie: Cookie,
    /// GET or PUT.
    pub op: Op,
    /// The object.
    pub target: Target,
    /// The bytes.
    pub span: Span,
}

impl Prepare {
    /// Reads a PREPARE. The token must be the bare 88 hex digits of an RC
    /// token with a GID.
    pub fn read<H: Headers + ?Sized>(h: &H) -> Result<Prepare, MessageError> {
        protocol(h)?;
        let token = rc_token(Token::decode(need(h, H_TOKEN)?)?, H_TOKEN)?;
        Ok(Prepare {
            token,
            psn: Psn::parse(need(h, H_PSN)?)?,
            cookie: Cookie::parse(need(h, H_COOKIE)?)?,
            op: Op::parse(need(h, H_OP)?)?,
            target: Target::parse(need(h, H_TARGET)?)?,
            span: Span::parse(need(h, H_SIZE)?, h.get(H_OFFSET))?,
        })
    }

    /// The request's headers (the offset only when it is not 0, as
    /// hipObject's client sends it).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (H_PROTOCOL, PROTOCOL.to_string()),
            (H_TOKEN, self.token.encode()),
            (H_PSN, self.psn.to_string()),
            (H_COOKIE, self.cookie.to_string()),
            (H_OP, self.op.as_str().to_string()),
            (H_TARGET, self.target.encode()),
            (H_SIZE, self.span.size.to_string()),
        ];
        if self.span.offset != 0 {
            v.push((H_OFFSET, self.span.offset.to_string()));
        }
        v
    }
}

/// PREPARE's 200: the server's QP (in the reply token), its first PSN, the
/// session, and for a PUT the staging region the client writes into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareAnswer {
    /// The server's RC QP and GID.
    pub server: Token,
    /// The session.
    pub session: SessionId,
    /// The server's first PSN.
    pub psn: Psn,
    /// Where a PUT's bytes go.
    pub staging: Option<Staging>,
}

impl PrepareAnswer {
    /// Reads a PREPARE's 200 (what hipObject's client requires: the echo,
    /// `200:` and an RC token, a session, a non-zero PSN).
    pub fn read<H: Headers + ?Sized>(h: &H) -> Result<PrepareAnswer, MessageError> {
        protocol(h)?;
        let reply = Reply::parse(need(h, H_REPLY)?)?;
        let server = match reply {
            Reply::Peer(t) => rc_token(t, H_REPLY)?,
            other => return Err(MessageError::Reply(format!("{other} is not 200:<token>"))),
        };
        Ok(PrepareAnswer {
            server,
            session: SessionId::parse(need(h, H_SESSION)?)?,
            psn: Psn::parse(need(h, H_PSN)?)?,
            staging: Staging::read(h)?,
        })
    }

    /// The answer's headers (the QPN too, as versitygw sends it).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (H_PROTOCOL, PROTOCOL.to_string()),
            (H_REPLY, Reply::Peer(self.server).format()),
            (H_SESSION, self.session.to_string()),
            (H_PSN, self.psn.to_string()),
            (H_QPN, format!("{:x}", self.server.qp_num)),
        ];
        if let Some(s) = &self.staging {
            s.write(&mut v);
        }
        v
    }
}

/// READY: the client's QP is connected; for a GET, where its buffer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The session.
    pub session: SessionId,
    /// The cookie PREPARE named.
    pub cookie: Cookie,
    /// The client's QPN (not 0).
    pub qpn: u32,
    /// The client's buffer (a GET's destination).
    pub buffer: Option<Staging>,
}

impl Ready {
    /// Reads a READY.
    pub fn read<H: Headers + ?Sized>(h: &H) -> Result<Ready, MessageError> {
        protocol(h)?;
        let qpn = bare_hex_u32(H_QPN, need(h, H_QPN)?)?;
        if qpn == 0 || qpn > 0xff_ffff {
            return Err(FieldError::Range {
                field: H_QPN,
                value: u64::from(qpn),
                range: "1 to 0xffffff",
            }
            .into());
        }
        Ok(Ready {
            session: SessionId::parse(need(h, H_SESSION)?)?,
            cookie: Cookie::parse(need(h, H_COOKIE)?)?,
            qpn,
            buffer: Staging::read(h)?,
        })
    }

    /// The request's headers.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (H_PROTOCOL, PROTOCOL.to_string()),
            (H_SESSION, self.session.to_string()),
            (H_COOKIE, self.cookie.to_string()),
            (H_QPN, format!("{:x}", self.qpn)),
        ];
        if let Some(b) = &self.buffer {
            b.write(&mut v);
        }
        v
    }
}

/// READY's successful answer: what moved, and the object's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
    /// Bytes moved.
    pub bytes: u64,
    /// The cookie, echoed.
    pub cookie: Cookie,
    /// The object's (or part's) ETag.
    pub etag: Option<String>,
    /// The object's version id.
    pub version_id: Option<String>,
    /// CRC-64/NVME of the bytes moved.
    pub checksum: Option<u64>,
    /// `mp` when the server moves parts.
    pub parts: bool,
    /// `hipobj-handshake` when the server also serves the handshake flow.
    pub handshake: bool,
}

/// Whether a capabilities value (tokens separated by commas or spaces)
/// names `cap`.
fn has_capability(value: Option<&str>, cap: &str) -> bool {
    value.is_some_and(|c| c.split([',', ' ']).any(|t| t.trim() == cap))
}

impl Final {
    /// Reads a FINAL: the echo and the cookie are required.
    pub fn read<H: Headers + ?Sized>(h: &H) -> Result<Final, MessageError> {
        protocol(h)?;
        let bytes = decimal(H_BYTES, need(h, H_BYTES)?)?;
        if bytes > MAX_TRANSFER {
            return Err(FieldError::Range {
                field: H_BYTES,
                value: bytes,
                range: "0 to 2^31 - 1",
            }
            .into());
        }
        Ok(Final {
            bytes,
            cookie: Cookie::parse(need(h, H_COOKIE)?)?,
            etag: tag(h, H_ETAG)?,
            version_id: tag(h, H_VERSION_ID)?,
            checksum: h.get(H_CHECKSUM).map(parse_checksum).transpose()?,
            parts: has_capability(h.get(H_CAPABILITIES), CAPABILITY_PARTS),
            handshake: has_capability(h.get(H_CAPABILITIES), CAPABILITY_HANDSHAKE),
        })
    }

    /// The answer's headers.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (H_PROTOCOL, PROTOCOL.to_string()),
            (H_BYTES, self.bytes.to_string()),
            (H_COOKIE, self.cookie.to_string()),
        ];
        if let Some(e) = &self.etag {
            v.push((H_ETAG, e.clone()));
        }
        if let Some(e) = &self.version_id {
            v.push((H_VERSION_ID, e.clone()));
        }
        if let Some(c) = self.checksum {
            v.push((H_CHECKSUM, format_checksum(c)));
        }
        let caps: Vec<&str> = [
            (self.parts, CAPABILITY_PARTS),
            (self.handshake, CAPABILITY_HANDSHAKE),
        ]
        .into_iter()
        .filter_map(|(on, cap)| on.then_some(cap))
        .collect();
        if !caps.is_empty() {
            v.push((H_CAPABILITIES, caps.join(", ")));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Gid;

    fn token(qp: u32) -> Token {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 0, 7]);
        Token {
            transport: Transport::Rc,
            qp_num: qp,
            gid: Gid(gid),
            rkey: 0,
            addr: 0,
            len: 0,
            port: 1,
            lid: 0,
        }
    }

    fn prepare() -> Prepare {
        Prepare {
            token: token(0x1234),
            psn: Psn(0xabcdef),
            cookie: Cookie(0xdead_beef),
            op: Op::Put,
            target: Target::parse("/bkt/dir/obj?uploadId=u1&partNumber=3").unwrap(),
            span: Span::new(0, 5 << 20).unwrap(),
        }
    }

    #[test]
    fn prepare_round_trips_and_sends_no_zero_offset() {
        let p = prepare();
        let h = p.headers();
        assert!(h.iter().all(|(k, _)| *k != H_OFFSET));
        assert_eq!(Prepare::read(h.as_slice()).unwrap(), p);
        let with_offset = Prepare {
            span: Span::new(7, 9).unwrap(),
            ..prepare()
        };
        assert_eq!(
            Prepare::read(with_offset.headers().as_slice()).unwrap(),
            with_offset
        );
    }

    #[test]
    fn prepare_needs_each_field_and_the_protocol() {
        let good = prepare().headers();
        for drop in [H_PROTOCOL, H_TOKEN, H_PSN, H_COOKIE, H_OP, H_TARGET, H_SIZE] {
            let h: Vec<(&'static str, String)> =
                good.iter().filter(|(k, _)| *k != drop).cloned().collect();
            let e = Prepare::read(h.as_slice()).unwrap_err();
            if drop == H_PROTOCOL {
                assert_eq!(e, MessageError::Protocol(None));
            } else {
                assert_eq!(e, MessageError::Missing(drop), "{drop}");
            }
        }
        let mut other = good.clone();
        other[0].1 = "hipobj-rc-v3".into();
        assert!(matches!(
            Prepare::read(other.as_slice()),
            Err(MessageError::Protocol(Some(_)))
        ));
        // A DC token, or one without a GID, names no RC queue pair.
        let mut dc = good.clone();
        dc[1].1 = Token {
            transport: Transport::Dc,
            ..token(5)
        }
        .encode();
        assert_eq!(
            Prepare::read(dc.as_slice()).unwrap_err(),
            MessageError::NotRc(H_TOKEN)
        );
        let mut nogid = good.clone();
        nogid[1].1 = Token {
            gid: Gid([0; 16]),
            ..token(5)
        }
        .encode();
        assert_eq!(
            Prepare::read(nogid.as_slice()).unwrap_err(),
            MessageError::NotRc(H_TOKEN)
        );
        // The legacy suffix is not a v2 token.
        let mut suffix = good;
        suffix[1].1 = format!("{}:1000:10", token(5).encode());
        assert!(matches!(
            Prepare::read(suffix.as_slice()),
            Err(MessageError::Token(_))
        ));
    }

    #[test]
    fn answers_round_trip() {
        let a = PrepareAnswer {
            server: token(0x77_0001),
            session: SessionId([7; 16]),
            psn: Psn(1),
            staging: Some(Staging {
                addr: 0x7f00_0000_1000,
                rkey: 0xabcd,
            }),
        };
        let h = a.headers();
        assert_eq!(
            Headers::get(h.as_slice(), H_REPLY).unwrap(),
            format!("200:{}", a.server.encode())
        );
        assert_eq!(Headers::get(h.as_slice(), H_QPN).unwrap(), "770001");
        assert_eq!(PrepareAnswer::read(h.as_slice()).unwrap(), a);

        let r = Ready {
            session: SessionId([9; 16]),
            cookie: Cookie(0x0102_0304),
            qpn: 0x00_1234,
            buffer: Some(Staging {
                addr: 0x1000,
                rkey: 1,
            }),
        };
        assert_eq!(Ready::read(r.headers().as_slice()).unwrap(), r);

        let f = Final {
            bytes: 5 << 20,
            cookie: Cookie(0x0102_0304),
            etag: Some("\"9b2cf535f27731c974343645a3985328\"".into()),
            version_id: None,
            checksum: Some(0xae8b_1486_0a79_9888),
            parts: true,
            handshake: true,
        };
        assert_eq!(Final::read(f.headers().as_slice()).unwrap(), f);
        assert_eq!(
            Headers::get(f.headers().as_slice(), H_CAPABILITIES),
            Some("mp, hipobj-handshake")
        );
    }

    #[test]
    fn answers_are_checked() {
        // Upper-case hex as versitygw sends it is read.
        let h: &[(&str, &str)] = &[
            (H_PROTOCOL, PROTOCOL),
            (H_BYTES, "0"),
            (H_COOKIE, "0A0B0C0D"),
            (H_CAPABILITIES, "foo, mp"),
        ];
        let f = Final::read(h).unwrap();
        assert_eq!((f.bytes, f.cookie, f.parts), (0, Cookie(0x0a0b_0c0d), true));
        // versitygw's answer names no handshake flow; ours may, in any
        // order and spacing, and a token that only starts like it is not it.
        assert!(!f.handshake);
        for (caps, handshake) in [
            ("mp, hipobj-handshake", true),
            ("hipobj-handshake mp", true),
            ("hipobj-handshake2, mp", false),
            ("hipobj", false),
        ] {
            let h: &[(&str, &str)] = &[
                (H_PROTOCOL, PROTOCOL),
                (H_BYTES, "0"),
                (H_COOKIE, "0A0B0C0D"),
                (H_CAPABILITIES, caps),
            ];
            assert_eq!(Final::read(h).unwrap().handshake, handshake, "{caps}");
        }
        let no_cookie: &[(&str, &str)] = &[(H_PROTOCOL, PROTOCOL), (H_BYTES, "1")];
        assert_eq!(
            Final::read(no_cookie).unwrap_err(),
            MessageError::Missing(H_COOKIE)
        );
        let long_tag = "e".repeat(128);
        let bad_tag: &[(&str, &str)] = &[
            (H_PROTOCOL, PROTOCOL),
            (H_BYTES, "1"),
            (H_COOKIE, "00000001"),
            (H_ETAG, &long_tag),
        ];
        assert_eq!(Final::read(bad_tag).unwrap_err(), MessageError::Tag(H_ETAG));
        // A PREPARE answer must carry 200:<RC token>.
        let tok = format!("206:{}", token(3).encode());
        let partial: &[(&str, &str)] = &[
            (H_PROTOCOL, PROTOCOL),
            (H_REPLY, &tok),
            (H_SESSION, "00000000000000000000000000000001"),
            (H_PSN, "000001"),
        ];
        assert!(matches!(
            PrepareAnswer::read(partial),
            Err(MessageError::Reply(_))
        ));
        // Half a staging region is refused.
        let tok = format!("200:{}", token(3).encode());
        let half: &[(&str, &str)] = &[
            (H_PROTOCOL, PROTOCOL),
            (H_REPLY, &tok),
            (H_SESSION, "00000000000000000000000000000001"),
            (H_PSN, "000001"),
            (H_MR_ADDR, "1000"),
        ];
        assert_eq!(
            PrepareAnswer::read(half).unwrap_err(),
            MessageError::Missing(H_MR_RKEY)
        );
        let zero_qpn: &[(&str, &str)] = &[
            (H_PROTOCOL, PROTOCOL),
            (H_SESSION, "00000000000000000000000000000001"),
            (H_COOKIE, "00000001"),
            (H_QPN, "0"),
        ];
        assert!(matches!(Ready::read(zero_qpn), Err(MessageError::Field(_))));
    }
}
