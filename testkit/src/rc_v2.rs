//! A hipobj-rc-v2 client peer for tests, on the software provider, built
//! from the wire messages and the fabric directly (not the client
//! library), so that a test can send exactly what it means to: a wrong
//! cookie, a replayed READY, a session of another key, a write that never
//! comes.

use std::time::Duration;

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{
    AccessFlags, CompletionQueue, Device, Gid, ProtectionDomain, QueuePair, RecvWr,
    RegisteredBuffer, RemoteAddr, SendOp, SendWr, WorkCompletion,
};
use hipobj_wire::rc_v2::{
    Cookie, Final, Op, Prepare, PrepareAnswer, Psn, Ready, SessionId, Span, Staging, Target,
};
use hipobj_wire::{Token, Transport};
use http::Method;

use crate::s3::{Answer, S3};

/// A client QP in INIT with a registered buffer, on `soft0`.
#[derive(Debug)]
pub struct V2Client {
    /// The QP.
    pub qp: QueuePair,
    /// Its CQ.
    pub cq: CompletionQueue,
    /// The buffer (GET's destination, PUT's source).
    pub buf: RegisteredBuffer,
    _pd: ProtectionDomain,
    _device: Device,
    /// The device's GID.
    pub gid: Gid,
    /// The first PSN it sends.
    pub psn: Psn,
}

/// A random nonzero 32-bit value (cookies) from the OS.
pub fn random_cookie() -> Cookie {
    loop {
        let mut b = [0u8; 4];
        getrandom::fill(&mut b).unwrap();
        let v = u32::from_le_bytes(b);
        if v != 0 {
            return Cookie(v);
        }
    }
}

impl V2Client {
    /// A client whose buffer holds `len` bytes.
    pub fn new(len: usize) -> V2Client {
        let provider = SoftProvider::from_env().unwrap();
        let device = Device::open(&provider, "soft0").unwrap();
        let gid = device.gid_table(1).unwrap()[0].gid;
        let pd = device.alloc_pd().unwrap();
        let (qp, cq) = rc::init_qp(&device, &pd, 16, 1, AccessFlags::REMOTE_WRITE).unwrap();
        let buf = pd
            .alloc_buffer(
                len.max(1),
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        let mut b = [0u8; 4];
        getrandom::fill(&mut b).unwrap();
        let psn = Psn::new((u32::from_le_bytes(b) & 0xff_ffff).max(1)).unwrap();
        V2Client {
            qp,
            cq,
            buf,
            _pd: pd,
            _device: device,
            gid,
            psn,
        }
    }

    /// Its token: its RC QP and GID.
    pub fn token(&self) -> Token {
        Token {
            transport: Transport::Rc,
            qp_num: self.qp.qp_num(),
            gid: self.gid,
            rkey: 0,
            addr: 0,
            len: 0,
            port: 1,
            lid: 0,
        }
    }

    /// A PREPARE for `op` of `span` of `target`.
    pub fn prepare(&self, op: Op, target: &Target, span: Span, cookie: Cookie) -> Prepare {
        Prepare {
            token: self.token(),
            psn: self.psn,
            cookie,
            op,
            target: target.clone(),
            span,
        }
    }

    /// Connects to the server QP the answer names (RTR, RTS).
    pub fn connect(&self, a: &PrepareAnswer) {
        let peer = RcPeer {
            qp_num: a.server.qp_num,
            gid: a.server.gid,
            lid: 0,
        };
        let p = RcParams {
            rq_psn: a.psn.0,
            sq_psn: self.psn.0,
            ..RcParams::default()
        };
        rc::connect(&self.qp, &peer, &p).unwrap();
    }

    /// Posts a receive (a GET's WRITE_WITH_IMM consumes it).
    pub fn post_recv(&self) {
        self.qp
            .post_recv(&RecvWr {
                wr_id: 1,
                sg_list: Vec::new(),
            })
            .unwrap();
    }

    /// Where the buffer is, from `offset`.
    pub fn buffer_at(&self, offset: u64) -> Staging {
        Staging {
            addr: self.buf.mr().addr() + offset,
            rkey: self.buf.mr().rkey(),
        }
    }

    /// RDMA WRITE_WITH_IMM of `len` bytes of the buffer to `to`, and its
    /// completion.
    pub fn write_imm(&self, to: Staging, len: u32, imm: u32) -> WorkCompletion {
        let wr = SendWr {
            wr_id: 2,
            op: SendOp::RdmaWriteWithImm(
                RemoteAddr {
                    addr: to.addr,
                    rkey: to.rkey,
                },
                imm,
            ),
            sg_list: vec![self.buf.sge(0, len).unwrap()],
            signaled: true,
            dc: None,
        };
        self.qp.post_send(&wr).unwrap();
        self.cq
            .wait_one(Duration::from_secs(30))
            .unwrap()
            .expect("the write completes")
    }

    /// The next completion, up to `limit`.
    pub fn completion(&self, limit: Duration) -> Option<WorkCompletion> {
        self.cq.wait_one(limit).unwrap()
    }

    /// Fills the buffer with `data` from its start.
    pub fn fill(&mut self, data: &[u8]) {
        self.buf.buf_mut().write_at(0, data).unwrap();
    }

    /// The buffer's first `len` bytes.
    pub fn read(&self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.buf.buf().read_at(0, &mut out).unwrap();
        out
    }
}

/// One control request: a signed, body-less POST to `path` with `headers`
/// (all signed), and `unsigned` added after signing.
pub fn control(
    s3: &S3,
    path: &str,
    headers: &[(&'static str, String)],
    unsigned: &[(&str, &str)],
) -> Answer {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let secret = s3.secret_key().to_string();
    s3.send_ext(Method::POST, path, &h, Vec::new(), true, &secret, unsigned)
}

/// An answer's headers as the wire messages read them.
pub fn headers_of(a: &Answer) -> Vec<(String, String)> {
    a.headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

fn view(h: &[(String, String)]) -> Vec<(&str, &str)> {
    h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// PREPARE; the parsed answer on 200, else the answer.
pub fn prepare(s3: &S3, p: &Prepare) -> Result<PrepareAnswer, Box<Answer>> {
    let a = control(s3, hipobj_wire::rc_v2::PREPARE_PATH, &p.headers(), &[]);
    if a.status != 200 {
        return Err(Box::new(a));
    }
    let h = headers_of(&a);
    Ok(
        PrepareAnswer::read(view(&h).as_slice())
            .unwrap_or_else(|e| panic!("PREPARE's answer: {e}")),
    )
}

/// READY; the parsed FINAL on 200, else the answer.
pub fn ready(s3: &S3, r: &Ready) -> Result<Final, Box<Answer>> {
    let a = control(s3, hipobj_wire::rc_v2::READY_PATH, &r.headers(), &[]);
    if a.status != 200 {
        return Err(Box::new(a));
    }
    let h = headers_of(&a);
    Ok(Final::read(view(&h).as_slice()).unwrap_or_else(|e| panic!("FINAL: {e}")))
}

/// CANCEL.
pub fn cancel(s3: &S3, session: SessionId) -> Answer {
    control(
        s3,
        hipobj_wire::rc_v2::CANCEL_PATH,
        &[
            (
                hipobj_wire::rc_v2::H_PROTOCOL,
                hipobj_wire::rc_v2::PROTOCOL.to_string(),
            ),
            (hipobj_wire::rc_v2::H_SESSION, session.to_string()),
        ],
        &[],
    )
}

/// A target for `/bucket/key`.
pub fn target(bucket: &str, key: &str) -> Target {
    Target {
        bucket: bucket.to_string(),
        key: key.to_string(),
        query: None,
    }
}

/// A whole GET of `span` into a new client: the bytes and FINAL, or the
/// failing answer.
pub fn get(s3: &S3, t: &Target, span: Span) -> Result<(Vec<u8>, Final), Box<Answer>> {
    let c = V2Client::new(span.size as usize);
    let cookie = random_cookie();
    let a = prepare(s3, &c.prepare(Op::Get, t, span, cookie))?;
    c.connect(&a);
    c.post_recv();
    let f = ready(
        s3,
        &Ready {
            session: a.session,
            cookie,
            qpn: c.qp.qp_num(),
            buffer: Some(c.buffer_at(0)),
        },
    )?;
    assert_eq!(f.cookie, cookie, "FINAL echoes the cookie");
    let wc = c
        .completion(Duration::from_secs(10))
        .expect("the last WRITE_WITH_IMM consumed the receive");
    assert_eq!(wc.status, hipobj_fabric::WcStatus::Success);
    assert_eq!(wc.imm_data, Some(cookie.0), "the immediate is the cookie");
    Ok((c.read(span.size as usize), f))
}

/// A whole PUT of `data` to `t` from a new client (the write goes before
/// READY): FINAL, or the failing answer.
pub fn put(s3: &S3, t: &Target, data: &[u8]) -> Result<Final, Box<Answer>> {
    let mut c = V2Client::new(data.len());
    c.fill(data);
    let cookie = random_cookie();
    let span = Span::new(0, data.len() as u64).unwrap();
    let a = prepare(s3, &c.prepare(Op::Put, t, span, cookie))?;
    let staging = a
        .staging
        .expect("a PUT's PREPARE answer names the staging region");
    c.connect(&a);
    let wc = c.write_imm(staging, data.len() as u32, cookie.0);
    assert_eq!(
        wc.status,
        hipobj_fabric::WcStatus::Success,
        "the write lands"
    );
    let f = ready(
        s3,
        &Ready {
            session: a.session,
            cookie,
            qpn: c.qp.qp_num(),
            buffer: None,
        },
    )?;
    assert_eq!(f.cookie, cookie, "FINAL echoes the cookie");
    Ok(f)
}
