//! The software provider's own packets, carried over TCP between devices.
//!
//! A requester QP opens one TCP connection to the responder device's
//! listener and sends [`Request`]s on it; the responder answers on the same
//! connection with [`Response`]s. Headers have a fixed size and are encoded
//! field by field in little-endian order; a payload follows a header when its
//! `seg_len` says so. Everything read from a peer is checked: a bad magic,
//! version or opcode, or a segment longer than [`MAX_SEGMENT`], closes the
//! connection.
//!
//! Every connection starts with a [`Hello`] from the requester that names
//! who it is and the one QP or DCT it will address, answered by the
//! responder's [`HelloAck`]. A requester sends no request, and so no byte of
//! memory, before that answer: a connection that reaches something other
//! than a soft device (an address and port derived from a hostile token)
//! carries only the hello. A responder closes a stream whose first bytes are
//! not a valid hello, whose claimed GID is not the TCP peer's address, or
//! whose later requests claim another source or destination.

use hipobj_wire::Gid;

/// Marks every header.
pub const MAGIC: u16 = 0x5248; // "HR"
/// Protocol version (2: connections open with a hello; 3: the hello's
/// answer offers the same-host path, see [`FLAG_CMA`]; 4: the offer names
/// the responder's descriptor of the connection, checked without a walk of
/// the host's socket table; 5: a same-host request carries its nonce in
/// `dc_key`, so that an RDMA WRITE with immediate keeps its immediate in
/// `imm` and takes the path too).
pub const VERSION: u8 = 5;
/// The payload of one full segment: a message is cut into segments of this
/// size, each with its own PSN. Both sides derive PSNs from it, so it is part
/// of the protocol, not a setting.
pub const SEGMENT: u32 = 1 << 20;
/// The largest payload one packet may carry.
pub const MAX_SEGMENT: u32 = SEGMENT;
/// The largest message (`ibv_port_attr.max_msg_sz`): 2 GiB.
pub const MAX_MESSAGE: u64 = 1 << 31;

/// Request opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReqOp {
    /// One segment of an RDMA WRITE.
    Write = 1,
    /// One segment of an RDMA WRITE with immediate (the last one carries it).
    WriteImm = 2,
    /// One segment of a SEND.
    Send = 3,
    /// One segment of a SEND with immediate.
    SendImm = 4,
    /// An RDMA READ request for `msg_len` bytes.
    ReadReq = 5,
    /// Same-host path: the requester has copied (or failed to copy) the
    /// bytes of the grant at `psn` whose nonce is in `rkey`; `imm` is 0
    /// when it has, [`CMA_FAILED`] when not.
    CmaDone = 6,
}

impl ReqOp {
    fn from_u8(v: u8) -> Option<ReqOp> {
        Some(match v {
            1 => ReqOp::Write,
            2 => ReqOp::WriteImm,
            3 => ReqOp::Send,
            4 => ReqOp::SendImm,
            5 => ReqOp::ReadReq,
            6 => ReqOp::CmaDone,
            _ => return None,
        })
    }
}

/// The first segment of a message.
pub const FLAG_FIRST: u8 = 1;
/// The last segment of a message.
pub const FLAG_LAST: u8 = 2;
/// Same-host path (cross-memory attach): a WRITE or READ request that
/// carries no payload. The responder checks it exactly as the ordinary
/// request (QP state, PSN, key, protection domain, bounds, access), and
/// then, instead of taking or sending the bytes, answers with a
/// [`RespOp::CmaGrant`] naming where the range lies in its address space
/// and keeps the region registered until the requester's
/// [`ReqOp::CmaDone`]; the requester moves the bytes itself with
/// `process_vm_writev`/`process_vm_readv`. A WRITE covers `cma_len` bytes
/// (whole segments, up to [`MAX_CMA_WRITE`]), one PSN per segment; a READ
/// covers its whole `msg_len`. `dc_key` (otherwise 0 on an RC QP) carries
/// a 32-bit nonce the grant and the done repeat, so that a late grant is
/// never taken for a newer request. A WRITE with immediate carries its
/// immediate in `imm` as on the stream; the responder consumes a receive
/// and completes it with the immediate once the last request is copied.
pub const FLAG_CMA: u8 = 4;
/// The most bytes one same-host WRITE request covers.
pub const MAX_CMA_WRITE: u64 = 8 * SEGMENT as u64;
/// In [`ReqOp::CmaDone`]'s `imm`: the copy failed (nothing to acknowledge;
/// the requester sends the bytes over the stream instead).
pub const CMA_FAILED: u32 = 1;

/// A request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// What it asks.
    pub op: ReqOp,
    /// FIRST / LAST.
    pub flags: u8,
    /// The responder QP or DCT number.
    pub dst_qpn: u32,
    /// The requester's QP number.
    pub src_qpn: u32,
    /// The requester's GID.
    pub src_gid: Gid,
    /// This packet's PSN.
    pub psn: u32,
    /// Remote key (writes and reads).
    pub rkey: u32,
    /// Remote address of this segment (writes, reads); offset in the
    /// message (sends).
    pub va: u64,
    /// Payload bytes following this header (0 for a read request).
    pub seg_len: u32,
    /// Length of the whole message (writes, sends), or of the read.
    pub msg_len: u64,
    /// Immediate data (on the last segment of `*_WITH_IMM`).
    pub imm: u32,
    /// DC access key (DC initiators); on an RC QP the same-host nonce
    /// ([`FLAG_CMA`]); 0 otherwise.
    pub dc_key: u64,
    /// Same-host WRITEs ([`FLAG_CMA`]): the bytes this request covers,
    /// from `va`; 0 otherwise.
    pub cma_len: u64,
}

/// Encoded request header size.
pub const REQUEST_LEN: usize = 80;

impl Request {
    /// Field-by-field encoding.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.op as u8;
        b[4] = self.flags;
        b[8..12].copy_from_slice(&self.dst_qpn.to_le_bytes());
        b[12..16].copy_from_slice(&self.src_qpn.to_le_bytes());
        b[16..32].copy_from_slice(self.src_gid.as_bytes());
        b[32..36].copy_from_slice(&self.psn.to_le_bytes());
        b[36..40].copy_from_slice(&self.rkey.to_le_bytes());
        b[40..48].copy_from_slice(&self.va.to_le_bytes());
        b[48..52].copy_from_slice(&self.seg_len.to_le_bytes());
        b[52..56].copy_from_slice(&self.imm.to_le_bytes());
        b[56..64].copy_from_slice(&self.msg_len.to_le_bytes());
        b[64..72].copy_from_slice(&self.dc_key.to_le_bytes());
        b[72..80].copy_from_slice(&self.cma_len.to_le_bytes());
        b
    }

    /// Decodes and checks a header; `None` if it is not a valid one.
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Option<Request> {
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION {
            return None;
        }
        let op = ReqOp::from_u8(b[3])?;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        let r = Request {
            op,
            flags: b[4],
            dst_qpn: u32_at(b, 8),
            src_qpn: u32_at(b, 12),
            src_gid: Gid(gid),
            psn: u32_at(b, 32),
            rkey: u32_at(b, 36),
            va: u64_at(b, 40),
            seg_len: u32_at(b, 48),
            imm: u32_at(b, 52),
            msg_len: u64_at(b, 56),
            dc_key: u64_at(b, 64),
            cma_len: u64_at(b, 72),
        };
        let cma = r.flags & FLAG_CMA != 0;
        let cma_ok = match (cma, r.op) {
            (false, _) => r.cma_len == 0,
            (true, ReqOp::Write | ReqOp::WriteImm) => {
                r.seg_len == 0
                    && r.cma_len > 0
                    && r.cma_len <= MAX_CMA_WRITE.min(r.msg_len)
                    && r.dc_key <= u64::from(u32::MAX)
            }
            (true, ReqOp::ReadReq) => r.cma_len == 0 && r.dc_key <= u64::from(u32::MAX),
            (true, _) => false,
        };
        let valid = r.seg_len <= MAX_SEGMENT
            && u64::from(r.seg_len) <= r.msg_len
            && r.msg_len <= MAX_MESSAGE
            && (!matches!(r.op, ReqOp::ReadReq | ReqOp::CmaDone) || r.seg_len == 0)
            && r.psn <= super::psn::PSN_MASK
            && r.flags & !(FLAG_FIRST | FLAG_LAST | FLAG_CMA) == 0
            && cma_ok;
        valid.then_some(r)
    }
}

/// Response opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RespOp {
    /// Every request up to and including `psn` was executed.
    Ack = 1,
    /// The request at `psn` was refused; see the syndrome.
    Nak = 2,
    /// One segment of READ data for the request segment at `psn`.
    ReadResp = 3,
    /// Same-host path: the request at `psn` was checked; a payload of
    /// [`CMA_GRANT_LEN`] follows: the address (in the responder's process)
    /// where its range lies, and the request's nonce. See [`FLAG_CMA`].
    CmaGrant = 4,
}

/// The payload of a [`RespOp::CmaGrant`]: the address (u64) and the
/// request's nonce (u32, from its `dc_key`), little-endian, then 4 zero
/// bytes.
pub const CMA_GRANT_LEN: u32 = 16;

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Syndrome {
    /// PSN sequence error: `psn` is the one the responder expects.
    Sequence = 1,
    /// Receiver not ready: no receive posted; retry after `rnr_timer`.
    Rnr = 2,
    /// Invalid request (operation not allowed, message too long for the receive).
    InvalidRequest = 3,
    /// Remote access error: key, protection domain, bounds or access flags.
    RemoteAccess = 4,
    /// Remote operational error: the responder failed locally.
    RemoteOperation = 5,
}

impl Syndrome {
    fn from_u8(v: u8) -> Option<Syndrome> {
        Some(match v {
            1 => Syndrome::Sequence,
            2 => Syndrome::Rnr,
            3 => Syndrome::InvalidRequest,
            4 => Syndrome::RemoteAccess,
            5 => Syndrome::RemoteOperation,
            _ => return None,
        })
    }
}

/// A response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// What it says.
    pub op: RespOp,
    /// The PSN it refers to.
    pub psn: u32,
    /// For NAKs.
    pub syndrome: Option<Syndrome>,
    /// For RNR NAKs: the responder's `min_rnr_timer` code.
    pub rnr_timer: u8,
    /// READ payload bytes following this header.
    pub seg_len: u32,
}

/// Encoded response header size.
pub const RESPONSE_LEN: usize = 16;

impl Response {
    /// An ACK up to `psn`.
    pub fn ack(psn: u32) -> Response {
        Response {
            op: RespOp::Ack,
            psn,
            syndrome: None,
            rnr_timer: 0,
            seg_len: 0,
        }
    }

    /// A NAK.
    pub fn nak(psn: u32, syndrome: Syndrome, rnr_timer: u8) -> Response {
        Response {
            op: RespOp::Nak,
            psn,
            syndrome: Some(syndrome),
            rnr_timer,
            seg_len: 0,
        }
    }

    /// A READ response segment header.
    pub fn read(psn: u32, seg_len: u32) -> Response {
        Response {
            op: RespOp::ReadResp,
            psn,
            syndrome: None,
            rnr_timer: 0,
            seg_len,
        }
    }

    /// Field-by-field encoding.
    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut b = [0u8; RESPONSE_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.op as u8;
        b[4] = self.syndrome.map_or(0, |s| s as u8);
        b[5] = self.rnr_timer;
        b[8..12].copy_from_slice(&self.psn.to_le_bytes());
        b[12..16].copy_from_slice(&self.seg_len.to_le_bytes());
        b
    }

    /// A same-host grant for the request at `psn` (its address follows).
    pub fn cma_grant(psn: u32) -> Response {
        Response {
            op: RespOp::CmaGrant,
            psn,
            syndrome: None,
            rnr_timer: 0,
            seg_len: CMA_GRANT_LEN,
        }
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8; RESPONSE_LEN]) -> Option<Response> {
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION {
            return None;
        }
        let op = match b[3] {
            1 => RespOp::Ack,
            2 => RespOp::Nak,
            3 => RespOp::ReadResp,
            4 => RespOp::CmaGrant,
            _ => return None,
        };
        let syndrome = match op {
            RespOp::Nak => Some(Syndrome::from_u8(b[4])?),
            _ => None,
        };
        let r = Response {
            op,
            psn: u32_at(b, 8),
            syndrome,
            rnr_timer: b[5],
            seg_len: u32_at(b, 12),
        };
        let valid = r.seg_len <= MAX_SEGMENT
            && match op {
                RespOp::ReadResp => true,
                RespOp::CmaGrant => r.seg_len == CMA_GRANT_LEN,
                _ => r.seg_len == 0,
            }
            && r.psn <= super::psn::PSN_MASK
            && r.rnr_timer < 32;
        valid.then_some(r)
    }
}

/// The first thing a requester sends on a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The requester's GID (its address must be the TCP peer's).
    pub src_gid: Gid,
    /// The requester's QP number.
    pub src_qpn: u32,
    /// The only QP or DCT number this connection's requests may name.
    pub dst_qpn: u32,
}

/// Encoded hello size.
pub const HELLO_LEN: usize = 32;
/// Encoded hello answer size.
pub const HELLO_ACK_LEN: usize = 16;
const KIND_HELLO: u8 = b'H';
const KIND_HELLO_ACK: u8 = b'A';

impl Hello {
    /// Field-by-field encoding.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = KIND_HELLO;
        b[4..8].copy_from_slice(&self.dst_qpn.to_le_bytes());
        b[8..12].copy_from_slice(&self.src_qpn.to_le_bytes());
        b[16..32].copy_from_slice(self.src_gid.as_bytes());
        b
    }

    /// Decodes and checks a hello; `None` if it is not one.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Option<Hello> {
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION || b[3] != KIND_HELLO {
            return None;
        }
        if b[12..16] != [0; 4] {
            return None;
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        Some(Hello {
            dst_qpn: u32_at(b, 4),
            src_qpn: u32_at(b, 8),
            src_gid: Gid(gid),
        })
    }
}

/// The responder's answer to a hello: the connection may carry requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloAck {
    /// The responder offers the same-host path ([`FLAG_CMA`]): it is on
    /// the requester's host (the connection is local) and allows it.
    pub cma: bool,
    /// The responder's process id, for the same-host path (0 without it).
    /// The requester uses it only after checking that this process holds
    /// the other end of the connection.
    pub pid: u32,
    /// The responder's descriptor number of its end of the connection,
    /// with the offer (0 without it), which the requester checks as the
    /// far end before it uses `pid`.
    pub fd: u32,
}

const ACK_FLAG_CMA: u8 = 1;

impl HelloAck {
    /// The answer of a responder without the same-host path.
    pub const PLAIN: HelloAck = HelloAck {
        cma: false,
        pid: 0,
        fd: 0,
    };

    /// The encoding.
    pub fn encode(&self) -> [u8; HELLO_ACK_LEN] {
        let mut b = [0u8; HELLO_ACK_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = KIND_HELLO_ACK;
        if self.cma {
            b[4] = ACK_FLAG_CMA;
            b[8..12].copy_from_slice(&self.pid.to_le_bytes());
            b[12..16].copy_from_slice(&self.fd.to_le_bytes());
        }
        b
    }

    /// Decodes and checks an answer; `None` if `b` is not one.
    pub fn decode(b: &[u8; HELLO_ACK_LEN]) -> Option<HelloAck> {
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION || b[3] != KIND_HELLO_ACK {
            return None;
        }
        if b[4] & !ACK_FLAG_CMA != 0 || b[5..8] != [0; 3] {
            return None;
        }
        let cma = b[4] & ACK_FLAG_CMA != 0;
        let (pid, fd) = (u32_at(b, 8), u32_at(b, 12));
        if cma == (pid == 0) || (!cma && fd != 0) {
            // An offer names a process; a plain answer names none, and no
            // descriptor.
            return None;
        }
        Some(HelloAck { cma, pid, fd })
    }
}

/// The soft wire version a header names, when it is a soft provider's
/// header (the magic) of another version than this one's: a peer running
/// another hipobj release, which this one cannot talk to. `None` for this
/// version's headers and for bytes that are not a soft header at all.
pub fn foreign_version(b: &[u8]) -> Option<u8> {
    match b {
        [m0, m1, v, ..] if u16::from_le_bytes([*m0, *m1]) == MAGIC && *v != VERSION => Some(*v),
        _ => None,
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_round_trip() {
        let r = Request {
            op: ReqOp::WriteImm,
            flags: FLAG_FIRST | FLAG_LAST,
            dst_qpn: 0x12_3456,
            src_qpn: 7,
            src_gid: Gid::from_ipv4([127, 0, 0, 1].into()),
            psn: 0xff_fffe,
            rkey: 0xdead_beef,
            va: u64::MAX - 5,
            seg_len: 4096,
            msg_len: 1 << 31,
            imm: 99,
            dc_key: 0xffee_ddcc,
            cma_len: 0,
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        let cma = Request {
            op: ReqOp::Write,
            flags: FLAG_FIRST | FLAG_CMA,
            seg_len: 0,
            cma_len: MAX_CMA_WRITE,
            ..r
        };
        assert_eq!(Request::decode(&cma.encode()), Some(cma));
        // A WRITE with immediate takes the path too, its immediate in
        // `imm` and the nonce in `dc_key`.
        let cma_imm = Request {
            op: ReqOp::WriteImm,
            imm: 0x1234_5678,
            ..cma
        };
        assert_eq!(Request::decode(&cma_imm.encode()), Some(cma_imm));
        // A same-host WRITE carries no payload, covers at most
        // MAX_CMA_WRITE and no more than its message; only WRITEs and READ
        // have one; no other request names a length; the nonce is 32 bits.
        for bad in [
            Request {
                seg_len: 4096,
                ..cma
            },
            Request {
                cma_len: MAX_CMA_WRITE + 1,
                ..cma
            },
            Request { cma_len: 0, ..cma },
            Request {
                msg_len: 4096,
                cma_len: 8192,
                ..cma
            },
            Request {
                op: ReqOp::Send,
                ..cma
            },
            Request {
                op: ReqOp::SendImm,
                ..cma
            },
            Request {
                dc_key: 1 << 32,
                ..cma
            },
            Request {
                dc_key: 1 << 32,
                ..cma_imm
            },
            Request {
                op: ReqOp::ReadReq,
                cma_len: 0,
                dc_key: u64::MAX,
                ..cma
            },
            Request {
                flags: FLAG_FIRST,
                ..cma
            },
        ] {
            assert_eq!(Request::decode(&bad.encode()), None, "{bad:?}");
        }
    }

    #[test]
    fn oversized_segment_is_rejected() {
        let r = Request {
            op: ReqOp::Write,
            flags: 0,
            dst_qpn: 1,
            src_qpn: 1,
            src_gid: Gid::ZERO,
            psn: 0,
            rkey: 0,
            va: 0,
            seg_len: MAX_SEGMENT + 1,
            msg_len: u64::MAX,
            imm: 0,
            dc_key: 0,
            cma_len: 0,
        };
        assert_eq!(Request::decode(&r.encode()), None);
        let read_with_payload = Request {
            op: ReqOp::ReadReq,
            seg_len: 1,
            ..r
        };
        assert_eq!(Request::decode(&read_with_payload.encode()), None);
    }

    #[test]
    fn hello_round_trip_and_rejects() {
        let h = Hello {
            src_gid: Gid::from_ipv4([127, 0, 0, 1].into()),
            src_qpn: 0x0012_3401,
            dst_qpn: 0x0056_7802,
        };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[3] = b'X';
        assert_eq!(Hello::decode(&bad), None);
        // A request header is not a hello.
        let mut req = [0u8; HELLO_LEN];
        req.copy_from_slice(
            &Request::decode(&[0u8; REQUEST_LEN]).map_or([0u8; REQUEST_LEN], |r| r.encode())
                [..HELLO_LEN],
        );
        assert_eq!(Hello::decode(&req), None);
        for a in [
            HelloAck::PLAIN,
            HelloAck {
                cma: true,
                pid: 4242,
                fd: 17,
            },
        ] {
            assert_eq!(HelloAck::decode(&a.encode()), Some(a));
        }
        assert_eq!(HelloAck::decode(b"+OK\r\n\0\0\0\0\0\0\0\0\0\0\0"), None);
        // An offer without a process, or a process without an offer.
        let mut b = HelloAck::PLAIN.encode();
        b[4] = 1;
        assert_eq!(HelloAck::decode(&b), None);
        let mut b = HelloAck::PLAIN.encode();
        b[8] = 7;
        assert_eq!(HelloAck::decode(&b), None);
        // A descriptor without an offer.
        let mut b = HelloAck::PLAIN.encode();
        b[12] = 5;
        assert_eq!(HelloAck::decode(&b), None);
    }

    #[test]
    fn response_round_trip() {
        for r in [
            Response::ack(5),
            Response::nak(9, Syndrome::Rnr, 12),
            Response::nak(0, Syndrome::RemoteAccess, 0),
            Response::read(3, 1 << 20),
            Response::cma_grant(11),
        ] {
            assert_eq!(Response::decode(&r.encode()), Some(r));
        }
    }

    proptest! {
        #[test]
        fn decoders_never_panic(req in proptest::collection::vec(any::<u8>(), REQUEST_LEN),
                                resp in proptest::collection::vec(any::<u8>(), RESPONSE_LEN)) {
            let mut a = [0u8; REQUEST_LEN];
            a.copy_from_slice(&req);
            let _ = Request::decode(&a);
            let mut b = [0u8; RESPONSE_LEN];
            b.copy_from_slice(&resp);
            let _ = Response::decode(&b);
        }
    }
}
