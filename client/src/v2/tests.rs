//! The client's sequence against an in-process fake server on the
//! software provider: the server's QP goes to RTR at PREPARE and RTS at
//! READY, WRITE_WITH_IMMs a GET in two pieces and receives a PUT's
//! WRITE_WITH_IMM into its staging region.

use super::*;
pub(crate) use crate::testing::platforms::soft;
use crate::testing::platforms::{gpu_platform, host_platform};
use crate::{Config, Hipobj, Options};
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::{Device, ProtectionDomain, RegisteredBuffer};
use hipobj_wire::Gid;
use std::collections::HashMap;
use std::net::Ipv4Addr;

pub(crate) fn lib() -> Hipobj {
    let platform = host_platform();
    let options = Options {
        max_transfers: 1,
        transfer_timeout: Duration::from_secs(10),
        ..Options::default()
    };
    Hipobj::with_platform(platform, options, &Config::with_nic("soft0")).unwrap()
}

/// One session of the fake server.
pub(crate) struct Session {
    qp: QueuePair,
    cq: CompletionQueue,
    op: Op,
    key: String,
    span: Span,
    cookie: Cookie,
    psn: Psn,
    staging: Option<RegisteredBuffer>,
}

/// Header fields of an answer.
pub(crate) type Fields = Vec<(&'static str, String)>;

/// What the fake server does wrong, on purpose.
#[derive(Default, Clone)]
pub(crate) struct Faults {
    /// PREPARE's answer instead of a session: status and headers.
    prepare: Option<(u16, Fields)>,
    /// READY's answer instead of FINAL: status and headers.
    ready: Option<(u16, Fields)>,
    /// Echo another cookie in FINAL.
    pub(crate) wrong_cookie: bool,
    /// Send a checksum of other bytes.
    pub(crate) bad_checksum: bool,
}

pub(crate) struct FakeServer {
    device: Device,
    pd: ProtectionDomain,
    gid: Gid,
    pub(crate) objects: HashMap<String, Vec<u8>>,
    sessions: HashMap<SessionId, Session>,
    pub(crate) faults: Faults,
    pub(crate) cancels: Vec<(SessionId, Cookie)>,
    prepares: usize,
    readies: usize,
}

impl FakeServer {
    pub(crate) fn new() -> FakeServer {
        let device = soft().open_ip(Ipv4Addr::LOCALHOST);
        let gid = device.gid_table(1).unwrap()[0].gid;
        let pd = device.alloc_pd().unwrap();
        FakeServer {
            device,
            pd,
            gid,
            objects: HashMap::new(),
            sessions: HashMap::new(),
            faults: Faults::default(),
            cancels: Vec::new(),
            prepares: 0,
            readies: 0,
        }
    }

    fn open(&mut self, req: &Prepare) -> std::result::Result<PrepareAnswer, String> {
        let access = match req.op {
            Op::Get => AccessFlags::EMPTY,
            Op::Put => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        };
        let (qp, cq) =
            rc::init_qp(&self.device, &self.pd, 16, 1, access).map_err(|e| e.to_string())?;
        let psn = random_psn().unwrap();
        let params = RcParams {
            rq_psn: req.psn.0,
            sq_psn: psn.0,
            ..RcParams::default()
        };
        let peer = RcPeer {
            qp_num: req.token.qp_num,
            gid: req.token.gid,
            lid: 0,
        };
        rc::to_rtr(&qp, &peer, &params).map_err(|e| e.to_string())?;
        let staging = match req.op {
            Op::Put => {
                let b = self
                    .pd
                    .alloc_buffer(
                        req.span.size as usize,
                        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
                    )
                    .map_err(|e| e.to_string())?;
                qp.post_recv(&RecvWr {
                    wr_id: 9,
                    sg_list: Vec::new(),
                })
                .map_err(|e| e.to_string())?;
                Some(b)
            }
            Op::Get => None,
        };
        let mut sid = [0u8; 16];
        getrandom::fill(&mut sid).unwrap();
        let session = SessionId(sid);
        let answer = PrepareAnswer {
            server: Token {
                transport: Transport::Rc,
                qp_num: qp.qp_num(),
                gid: self.gid,
                rkey: 0,
                addr: 0,
                len: 0,
                port: 1,
                lid: 0,
            },
            session,
            psn,
            staging: staging.as_ref().map(|b| Staging {
                addr: b.mr().addr(),
                rkey: b.mr().rkey(),
            }),
        };
        self.sessions.insert(
            session,
            Session {
                qp,
                cq,
                op: req.op,
                key: req.target.key.clone(),
                span: req.span,
                cookie: req.cookie,
                psn,
                staging,
            },
        );
        Ok(answer)
    }

    fn serve_ready(&mut self, r: &Ready) -> std::result::Result<Final, u16> {
        let s = self.sessions.remove(&r.session).ok_or(404u16)?;
        if s.cookie != r.cookie {
            return Err(404);
        }
        let params = RcParams {
            sq_psn: s.psn.0,
            ..RcParams::default()
        };
        rc::to_rts(&s.qp, &params).map_err(|_| 502u16)?;
        let moved: Vec<u8> = match s.op {
            Op::Get => {
                let obj = self.objects.get(&s.key).ok_or(404u16)?;
                let start = s.span.offset as usize;
                let bytes = obj[start..start + s.span.size as usize].to_vec();
                let dest = r.buffer.ok_or(400u16)?;
                let mut src = self
                    .pd
                    .alloc_buffer(bytes.len(), AccessFlags::LOCAL_WRITE)
                    .map_err(|_| 503u16)?;
                src.buf_mut().write_at(0, &bytes).map_err(|_| 500u16)?;
                // Two pieces: a plain WRITE, then the last as
                // WRITE_WITH_IMM carrying the cookie.
                let first = bytes.len() / 2;
                let pieces = [(0usize, first, false), (first, bytes.len() - first, true)];
                let mut posted = 0;
                for (at, len, last) in pieces {
                    if len == 0 {
                        continue;
                    }
                    let remote = RemoteAddr {
                        addr: dest.addr + at as u64,
                        rkey: dest.rkey,
                    };
                    let op = if last {
                        SendOp::RdmaWriteWithImm(remote, s.cookie.0)
                    } else {
                        SendOp::RdmaWrite(remote)
                    };
                    s.qp.post_send(&SendWr {
                        wr_id: at as u64,
                        op,
                        sg_list: vec![src.sge(at as u64, len as u32).map_err(|_| 500u16)?],
                        signaled: true,
                        dc: None,
                    })
                    .map_err(|_| 502u16)?;
                    posted += 1;
                }
                let wcs =
                    s.cq.wait_n(posted, Duration::from_secs(5))
                        .map_err(|_| 502u16)?;
                if wcs.len() != posted || wcs.iter().any(|w| w.status != WcStatus::Success) {
                    return Err(502);
                }
                bytes
            }
            Op::Put => {
                let wc =
                    s.cq.wait_one(Duration::from_secs(5))
                        .map_err(|_| 502u16)?
                        .ok_or(502u16)?;
                if wc.status != WcStatus::Success
                    || wc.opcode != WcOpcode::RecvRdmaWithImm
                    || wc.imm_data != Some(s.cookie.0)
                {
                    return Err(502);
                }
                let bytes = s.staging.as_ref().ok_or(500u16)?.buf().to_vec();
                self.objects.insert(s.key.clone(), bytes.clone());
                bytes
            }
        };
        let mut crc = crc64nvme(&moved);
        if self.faults.bad_checksum {
            crc ^= 1;
        }
        Ok(Final {
            bytes: moved.len() as u64,
            cookie: if self.faults.wrong_cookie {
                Cookie(s.cookie.0 ^ 0x8000_0000)
            } else {
                s.cookie
            },
            etag: Some("\"e\"".into()),
            version_id: None,
            checksum: Some(crc),
            parts: true,
            handshake: false,
        })
    }
}

impl V2Ops for FakeServer {
    fn prepare(
        &mut self,
        req: &Prepare,
        _remaining: Duration,
    ) -> std::result::Result<V2Response<PrepareAnswer>, i32> {
        self.prepares += 1;
        // The request goes over the wire as headers and is read back, as
        // the server would.
        let req = Prepare::read(req.headers().as_slice()).map_err(|_| -1)?;
        if let Some((status, headers)) = self.faults.prepare.clone() {
            return Ok(V2Response::from_headers(status, headers.as_slice()));
        }
        match self.open(&req) {
            Ok(a) => Ok(V2Response::from_headers(200, a.headers().as_slice())),
            Err(_) => Ok(V2Response::status_only(500)),
        }
    }

    fn ready(
        &mut self,
        req: &Ready,
        _remaining: Duration,
    ) -> std::result::Result<V2Response<Final>, i32> {
        self.readies += 1;
        let req = Ready::read(req.headers().as_slice()).map_err(|_| -1)?;
        if let Some((status, headers)) = self.faults.ready.clone() {
            self.sessions.remove(&req.session);
            return Ok(V2Response::from_headers(status, headers.as_slice()));
        }
        match self.serve_ready(&req) {
            Ok(f) => Ok(V2Response::from_headers(200, f.headers().as_slice())),
            Err(status) => Ok(V2Response::status_only(status)),
        }
    }

    fn cancel(
        &mut self,
        session: SessionId,
        cookie: Cookie,
        _remaining: Duration,
    ) -> std::result::Result<u16, i32> {
        self.cancels.push((session, cookie));
        self.sessions.remove(&session);
        Ok(200)
    }
}

pub(crate) fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

pub(crate) fn target(key: &str) -> Target {
    Target {
        bucket: "bkt".into(),
        key: key.into(),
        query: None,
    }
}

pub(crate) fn whole(key: &str, size: usize) -> V2Transfer {
    V2Transfer {
        target: target(key),
        object_offset: 0,
        buffer_offset: 0,
        size: size as u64,
    }
}

#[test]
fn crc64nvme_check_value() {
    assert_eq!(crc64nvme(b"123456789"), 0xae8b_1486_0a79_9888);
    assert_eq!(crc64nvme(b""), 0);
    // Slice by 8 agrees with the bytewise remainder path at every length.
    let data = pattern(100, 7);
    for n in 0..data.len() {
        let a = crc64nvme(&data[..n]);
        let b = {
            let mut crc = !0u64;
            for &byte in &data[..n] {
                crc ^= u64::from(byte);
                for _ in 0..8 {
                    crc = if crc & 1 == 1 {
                        (crc >> 1) ^ 0x9a6c_9329_ac4b_c9b5
                    } else {
                        crc >> 1
                    };
                }
            }
            !crc
        };
        assert_eq!(a, b, "length {n}");
    }
}

#[test]
fn get_and_put_move_the_bytes() {
    let lib = lib();
    let mut server = FakeServer::new();
    let want = pattern(256 * 1024 + 5, 1);
    server.objects.insert("obj".into(), want.clone());

    let mut mem = vec![0u8; want.len() + 64];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        // The whole object, 64 bytes into the buffer.
        let t = V2Transfer {
            buffer_offset: 64,
            ..whole("obj", want.len())
        };
        let f = buf.get_v2(&t, &mut server).unwrap();
        assert_eq!(f.bytes, want.len() as u64);
        assert_eq!(f.etag.as_deref(), Some("\"e\""));
    }
    assert!(mem[64..] == want[..]);
    assert!(mem[..64].iter().all(|&b| b == 0));

    // A range of the object.
    let mut part = vec![0u8; 1000];
    {
        let buf = lib.register_host(&mut part).unwrap();
        let t = V2Transfer {
            object_offset: 4096,
            ..whole("obj", 1000)
        };
        buf.get_v2(&t, &mut server).unwrap();
    }
    assert!(part[..] == want[4096..5096]);

    // PUT back from the buffer, and the server has the bytes.
    let mut src = pattern(300_001, 9);
    let expect = src.clone();
    {
        let buf = lib.register_host(&mut src).unwrap();
        let f = buf
            .put_v2(&whole("copy", expect.len()), &mut server)
            .unwrap();
        assert_eq!(f.bytes, expect.len() as u64);
    }
    assert!(server.objects["copy"] == expect);
    assert!(server.cancels.is_empty());
    assert_eq!((server.prepares, server.readies), (3, 3));
}

#[test]
fn a_wrong_cookie_echo_is_refused_and_cancelled() {
    let lib = lib();
    let mut server = FakeServer::new();
    server.objects.insert("obj".into(), pattern(4096, 3));
    server.faults.wrong_cookie = true;
    let mut mem = vec![0u8; 4096];
    let buf = lib.register_host(&mut mem).unwrap();
    let e = buf.get_v2(&whole("obj", 4096), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert!(e.message.contains("cookie"), "{e}");
    assert_eq!(server.cancels.len(), 1);

    // A PUT too.
    let e = buf.put_v2(&whole("x", 4096), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert_eq!(server.cancels.len(), 2);
}

#[test]
fn a_bad_checksum_is_refused() {
    let lib = lib();
    let mut server = FakeServer::new();
    server.objects.insert("obj".into(), pattern(10_000, 4));
    server.faults.bad_checksum = true;
    let mut mem = vec![0u8; 10_000];
    let buf = lib.register_host(&mut mem).unwrap();
    let e = buf.get_v2(&whole("obj", 10_000), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert!(e.message.contains("CRC-64/NVME"), "{e}");
    assert_eq!(server.cancels.len(), 1, "one CANCEL after the failure");
    let e = buf.put_v2(&whole("y", 10_000), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert_eq!(server.cancels.len(), 2);
}

#[test]
fn refusals_map_to_the_library_errors() {
    let lib = lib();
    let mut mem = vec![0u8; 64];
    let buf = lib.register_host(&mut mem).unwrap();
    let unsupported = vec![
        (H_PROTOCOL, PROTOCOL.to_string()),
        (H_PROTOCOL_STATUS, UNSUPPORTED.to_string()),
    ];
    let cases: Vec<(u16, Fields, OpError)> = vec![
        (501, unsupported, OpError::NotSupported),
        (501, vec![], OpError::S3Error),
        (409, vec![(H_PROTOCOL, PROTOCOL.to_string())], OpError::Busy),
        (503, vec![], OpError::Busy),
        (400, vec![], OpError::InvalidValue),
        (403, vec![], OpError::InvalidValue),
        (404, vec![], OpError::S3Error),
        (
            413,
            vec![(H_MAX_SIZE, (8u64 << 20).to_string())],
            OpError::SizeTooLarge,
        ),
        // A 200 without a session is malformed.
        (
            200,
            vec![(H_PROTOCOL, PROTOCOL.to_string())],
            OpError::RdmaError,
        ),
    ];
    for (status, headers, want) in cases {
        let mut server = FakeServer::new();
        server.faults.prepare = Some((status, headers));
        let e = buf.get_v2(&whole("obj", 64), &mut server).unwrap_err();
        assert_eq!(e.op, want, "{status}: {e}");
        // No session: nothing to cancel.
        assert!(server.cancels.is_empty(), "{status}");
        assert_eq!(server.readies, 0);
    }
}

#[test]
fn a_refused_ready_is_cancelled_once() {
    let lib = lib();
    let mut mem = vec![0u8; 64];
    let buf = lib.register_host(&mut mem).unwrap();
    for (status, want) in [
        (409, OpError::Busy),
        (404, OpError::S3Error),
        (502, OpError::RdmaError),
    ] {
        let mut server = FakeServer::new();
        server.objects.insert("obj".into(), vec![1; 64]);
        server.faults.ready = Some((status, vec![(H_PROTOCOL, PROTOCOL.to_string())]));
        let e = buf.get_v2(&whole("obj", 64), &mut server).unwrap_err();
        assert_eq!(e.op, want, "{status}: {e}");
        assert_eq!(server.cancels.len(), 1, "{status}");
        assert_eq!(server.readies, 1, "no retry after READY");
    }
}

#[test]
fn a_put_needs_a_staging_region_and_sizes_are_capped() {
    let lib = lib();
    let mut mem = vec![0u8; 64];
    let buf = lib.register_host(&mut mem).unwrap();
    // A PREPARE answer without a staging region, to a PUT.
    let mut server = FakeServer::new();
    let answer = PrepareAnswer {
        server: Token {
            transport: Transport::Rc,
            qp_num: 77,
            gid: server.gid,
            rkey: 0,
            addr: 0,
            len: 0,
            port: 1,
            lid: 0,
        },
        session: SessionId([3; 16]),
        psn: Psn(5),
        staging: None,
    };
    server.faults.prepare = Some((200, answer.headers()));
    let e = buf.put_v2(&whole("k", 64), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert_eq!(
        server.cancels,
        vec![(SessionId([3; 16]), server.cancels[0].1)]
    );

    let e = buf
        .get_v2(&whole("k", (MAX_TRANSFER + 1) as usize), &mut server)
        .unwrap_err();
    assert_eq!(e.op, OpError::SizeTooLarge);
    // Outside the buffer.
    let e = buf.get_v2(&whole("k", 65), &mut server).unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
}

#[test]
fn psn_and_cookie_are_random_and_in_range() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..64 {
        let p = random_psn().unwrap();
        assert!(p.0 >= 1 && p.0 <= 0xff_ffff);
        let c = random_cookie().unwrap();
        assert_ne!(c.0, 0);
        seen.insert(c.0);
    }
    assert!(seen.len() > 60);
}

/// GPU buffers through the fake HIP runtime: staged (the NIC cannot reach
/// the memory: copies through pinned host memory, as the connect-first
/// flow makes them) and registered directly (a device synchronize after).
mod gpu {
    use super::*;
    use crate::buffer::Registration;
    use crate::testing::FakeHip;
    use std::sync::atomic::Ordering;

    fn gpu_lib(hip: &Arc<FakeHip>, reachable: bool) -> Hipobj {
        let platform = gpu_platform(hip, reachable, reachable);
        Hipobj::with_platform(platform, Options::default(), &Config::default()).unwrap()
    }

    #[test]
    fn staged_and_direct_gpu_buffers() {
        for reachable in [false, true] {
            let hip = Arc::new(FakeHip::new(&["0000:41:00.0"]));
            let lib = gpu_lib(&hip, reachable);
            let mut server = FakeServer::new();
            let len = 100_000;
            server.objects.insert("obj".into(), pattern(len, 5));
            let dev = hip.alloc_device(len, 0);
            // SAFETY: fake device memory lives as long as `hip`.
            let buf = unsafe { lib.register(dev, len) }.unwrap();
            let kind = lib.instance().buffers.find(dev).unwrap().kind;
            assert_eq!(kind == Registration::Staged, !reachable, "{kind:?}");

            buf.get_v2(&whole("obj", len), &mut server).unwrap();
            let mut got = vec![0u8; len];
            hip.read(dev, &mut got);
            assert!(got == pattern(len, 5), "GET into the device ({kind:?})");

            hip.write(dev, &pattern(len, 6));
            buf.put_v2(&whole("up", len), &mut server).unwrap();
            assert!(server.objects["up"] == pattern(len, 6), "PUT ({kind:?})");
            if reachable {
                assert!(hip.log.synchronizes.load(Ordering::Relaxed) >= 2);
            } else {
                assert_eq!(hip.log.copies.load(Ordering::Relaxed), 2);
            }
        }
    }
}
