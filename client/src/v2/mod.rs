//! hipobj-rc-v2, the client side (docs/protocol.md, "hipobj-rc-v2"): a
//! transfer of a registered buffer in two control round trips, PREPARE and
//! READY, that the application sends through [`V2Ops`].
//!
//! 1. A fresh RC QP in INIT (a GET's allows the peer to write, a PUT's
//!    nothing), a random PSN and cookie from the OS.
//! 2. PREPARE names the QP (an RC token of length 0), the PSN, the cookie,
//!    the operation, the target and the span. Its 200 names the server's
//!    QP and PSN, a session and, for a PUT, the server's staging region.
//! 3. The client connects (RTR to the server's QP with the server's PSN,
//!    RTS with its own).
//! 4. PUT: one RDMA WRITE_WITH_IMM of the whole span into the staging
//!    region, immediate = cookie, and its completion; then READY.
//!    GET: a receive is posted, then READY names the buffer; the server
//!    WRITEs into it, the last piece with the cookie as immediate.
//! 5. READY's answer (FINAL) is the outcome: the cookie echoed, the bytes
//!    moved, and a CRC-64/NVME that is checked when present.
//!
//! Every wait is bounded by the transfer deadline; after any failure once a
//! session exists one best-effort CANCEL goes out; nothing is retried after
//! READY. The QP is destroyed when the transfer ends.

use crate::buffer::{BufEntry, Direction, Registration};
use crate::error::{Error, OpError, Result};
use crate::instance::Instance;
use crate::transfer::{lookup, stage_copy, SyncDirection};
use hipobj_fabric::rc::{self, RcPeer};
use hipobj_fabric::{
    AccessFlags, CompletionQueue, QueuePair, RecvWr, RemoteAddr, SendOp, SendWr, Sge, WcOpcode,
    WcStatus,
};
use hipobj_wire::rc_v2::{
    Cookie, Final, Headers, MessageError, Op, Prepare, PrepareAnswer, Psn, Ready, SessionId, Span,
    Staging, Target, H_COOKIE, H_PROTOCOL, H_PROTOCOL_STATUS, H_SESSION, MAX_TRANSFER, PROTOCOL,
    UNSUPPORTED,
};
use hipobj_wire::{Token, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The header of a 413: the largest PUT the server stages at once.
pub const H_MAX_SIZE: &str = "x-amz-rdma-max-size";

/// The whole-transfer deadline when none is set (hipObject's 60 s).
pub const DEFAULT_TRANSFER_DEADLINE: Duration = crate::options::DEFAULT_TRANSFER_DEADLINE;
/// The `hip_error` of a transfer that failed [`OpError::Busy`] because
/// its deadline expired (hipObject's `HIPOBJ_DIAG_DEADLINE_EXPIRED`,
/// "TIME"), as against a busy server.
pub const DIAG_DEADLINE_EXPIRED: i32 = 0x5449_4D45;
/// The budget of the CANCEL after a failure (hipObject's 1 s).
pub const DEFAULT_CANCEL_BUDGET: Duration = Duration::from_secs(1);

/// A message the library reads from a 2xx answer.
pub trait Message: Sized {
    /// Reads it from the answer's headers.
    fn read_from<H: Headers + ?Sized>(h: &H) -> std::result::Result<Self, MessageError>;
}

impl Message for PrepareAnswer {
    fn read_from<H: Headers + ?Sized>(h: &H) -> std::result::Result<Self, MessageError> {
        PrepareAnswer::read(h)
    }
}

impl Message for Final {
    fn read_from<H: Headers + ?Sized>(h: &H) -> std::result::Result<Self, MessageError> {
        Final::read(h)
    }
}

/// One answer to a control request, as the application's HTTP client saw
/// it: the status, the markers, and on a 2xx the message read from the
/// headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Response<T> {
    /// The HTTP status.
    pub status: u16,
    /// `x-amz-rdma-protocol: hipobj-rc-v2` was present.
    pub echo: bool,
    /// `x-amz-rdma-protocol-status: unsupported` was present.
    pub unsupported: bool,
    /// `x-amz-rdma-max-size` (a 413's cap), if present and a number.
    pub max_size: Option<u64>,
    /// On a 2xx: the message, or why it could not be read. `None` otherwise.
    pub message: Option<std::result::Result<T, MessageError>>,
    /// What the server said in words (an S3 error code and message), for
    /// the error text; may be empty.
    pub detail: String,
}

impl<T: Message> V2Response<T> {
    /// Reads an answer's status and headers (names lowercase or not).
    pub fn from_headers<H: Headers + ?Sized>(status: u16, h: &H) -> V2Response<T> {
        V2Response {
            status,
            echo: h.get(H_PROTOCOL) == Some(PROTOCOL),
            unsupported: h
                .get(H_PROTOCOL_STATUS)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case(UNSUPPORTED)),
            max_size: h.get(H_MAX_SIZE).and_then(|v| v.trim().parse().ok()),
            message: (200..300).contains(&status).then(|| T::read_from(h)),
            detail: String::new(),
        }
    }
}

impl<T> V2Response<T> {
    /// An answer without a message (a refusal), for tests and adapters.
    pub fn status_only(status: u16) -> V2Response<T> {
        V2Response {
            status,
            echo: false,
            unsupported: false,
            max_size: None,
            message: None,
            detail: String::new(),
        }
    }
}

/// The application's side of a v2 transfer: each call is one signed,
/// body-less `POST` to the control path, answered synchronously. An `Err`
/// carries the application's (negative) code: the request could not be
/// sent or its answer not read.
pub trait V2Ops {
    /// `POST /.hipobj-rc/prepare` with `req.headers()`; `remaining` is what
    /// is left of the transfer's deadline.
    fn prepare(
        &mut self,
        req: &Prepare,
        remaining: Duration,
    ) -> std::result::Result<V2Response<PrepareAnswer>, i32>;
    /// `POST /.hipobj-rc/ready` with `req.headers()`; the answer is FINAL.
    fn ready(
        &mut self,
        req: &Ready,
        remaining: Duration,
    ) -> std::result::Result<V2Response<Final>, i32>;
    /// `POST /.hipobj-rc/cancel` with [`cancel_headers`]; only the status
    /// matters (and not much: CANCEL is best effort).
    fn cancel(
        &mut self,
        session: SessionId,
        cookie: Cookie,
        remaining: Duration,
    ) -> std::result::Result<u16, i32>;
}

/// CANCEL's headers: the protocol, the session and the cookie.
pub fn cancel_headers(session: SessionId, cookie: Cookie) -> Vec<(&'static str, String)> {
    vec![
        (H_PROTOCOL, PROTOCOL.to_string()),
        (H_SESSION, session.to_string()),
        (H_COOKIE, cookie.to_string()),
    ]
}

/// What to move: `size` bytes between `buffer_offset` in the buffer and
/// `object_offset` in the object (or part) the target names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Transfer {
    /// The object, and for parts the query (`partNumber=N` for a GET,
    /// `uploadId=U&partNumber=N` for a PUT).
    pub target: Target,
    /// Where in the object the bytes start (0 for a PUT).
    pub object_offset: u64,
    /// Where in the buffer they are.
    pub buffer_offset: u64,
    /// How many (1 to 2^31 - 1).
    pub size: u64,
}

/// Random bytes from the OS; a failure fails the transfer (no fixed
/// fallback value).
fn random_u32() -> Result<u32> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| {
        Error::new(
            OpError::InternalError,
            format!("the OS gave no random bytes: {e}"),
        )
    })?;
    Ok(u32::from_ne_bytes(b))
}

/// A random non-zero 24-bit PSN.
fn random_psn() -> Result<Psn> {
    loop {
        if let Some(p) = Psn::new(random_u32()? & 0xff_ffff) {
            return Ok(p);
        }
    }
}

/// A random non-zero cookie.
fn random_cookie() -> Result<Cookie> {
    loop {
        let c = random_u32()?;
        if c != 0 {
            return Ok(Cookie(c));
        }
    }
}

/// A QP of the transfer's own, destroyed (after a move to ERR, which
/// flushes anything outstanding) when dropped.
struct V2Qp {
    qp: QueuePair,
    cq: CompletionQueue,
}

impl Drop for V2Qp {
    fn drop(&mut self) {
        if let Err(e) = rc::to_error(&self.qp) {
            tracing::debug!(error = %e, "moving a v2 QP to ERR failed");
        }
    }
}

/// The error of a refused control request.
fn refusal<T>(what: &str, r: &V2Response<T>) -> Error {
    let detail = if r.detail.is_empty() {
        String::new()
    } else {
        format!(": {}", r.detail)
    };
    let status = r.status;
    let (op, why) = match status {
        501 if r.unsupported => (
            OpError::NotSupported,
            "the server does not speak hipobj-rc-v2 (501, unsupported)",
        ),
        400 | 403 => (OpError::InvalidValue, "the server refused the request"),
        409 | 429 | 503 => (
            OpError::Busy,
            "the server is busy or the session conflicts: retry with a new PREPARE",
        ),
        413 => (
            OpError::SizeTooLarge,
            "the transfer is larger than the server stages at once",
        ),
        502 => (OpError::RdmaError, "the server's data phase failed"),
        _ => (OpError::S3Error, "the server did not report success"),
    };
    let mut e = Error::new(op, format!("{what} answered {status}: {why}{detail}"));
    e.reply = Some(status.to_string());
    e
}

fn callback_failed(what: &str, rc: i32) -> Error {
    Error::s3(format!("the {what} callback failed ({rc})"), None)
}

pub use crate::crc64nvme::crc64nvme;

/// The CRC of the host memory a transfer moved, or `None` where the CPU
/// cannot read it (GPU memory registered directly).
fn host_crc(entry: &BufEntry, off: u64, size: u64) -> Option<u64> {
    if matches!(entry.kind, Registration::GpuDirect { .. }) {
        return None;
    }
    let base = entry.token_addr() as usize + off as usize;
    // SAFETY: `entry` is registered host memory (the buffer itself, or its
    // pinned staging memory), which stays allocated while the entry lives
    // (the caller holds its Arc); `[off, off + size)` was checked against
    // its size by `lookup`. The transfer is over (its completions and
    // FINAL came), so nothing writes it while it is read.
    let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, size as usize) };
    Some(crc64nvme(bytes))
}

/// A transfer's clock.
struct Clock {
    deadline: Instant,
    total: Duration,
}

impl Clock {
    fn remaining(&self, what: &str) -> Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::hip(
                OpError::Busy,
                DIAG_DEADLINE_EXPIRED,
                format!(
                    "the transfer deadline ({} ms) expired before {what}",
                    self.total.as_millis()
                ),
            ));
        }
        Ok(left)
    }
}

/// Runs one v2 transfer of a registered buffer (host memory, GPU memory
/// registered directly, or GPU memory staged through pinned host memory).
pub(crate) fn run(
    inst: &Instance,
    op: Op,
    addr: usize,
    t: &V2Transfer,
    ops: &mut dyn V2Ops,
) -> Result<Final> {
    let total = inst.options.transfer_timeout;
    let clock = Clock {
        deadline: Instant::now() + total,
        total,
    };
    if t.size > MAX_TRANSFER {
        return Err(Error::new(
            OpError::SizeTooLarge,
            format!("{} bytes is over hipobj-rc-v2's 2^31 - 1", t.size),
        ));
    }
    let span =
        Span::new(t.object_offset, t.size).map_err(|e| Error::invalid(format!("the span: {e}")))?;
    if op == Op::Put && t.object_offset != 0 {
        return Err(Error::invalid("a v2 PUT starts at offset 0 of its object"));
    }
    let size = t.size as usize;
    let buf_off = i64::try_from(t.buffer_offset)
        .map_err(|_| Error::invalid(format!("offset {} is too large", t.buffer_offset)))?;
    let (entry, off) = lookup(inst, addr, size, buf_off)?;
    if entry.kind == Registration::Staged && op == Op::Put {
        stage_copy(inst, &entry, SyncDirection::ToHost, off, size)?;
    }

    // A QP of its own. A GET's lets the server write (and the receive
    // place); a PUT's allows the peer nothing.
    let dev = &inst.device;
    let access = match op {
        Op::Get => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        Op::Put => AccessFlags::EMPTY,
    };
    let (qp, cq) = rc::init_qp(&dev.device, &dev.pd, 16, dev.port, access)?;
    let qp = V2Qp { qp, cq };

    let psn = random_psn()?;
    let cookie = random_cookie()?;
    let prepare = Prepare {
        token: Token {
            transport: Transport::Rc,
            qp_num: qp.qp.qp_num(),
            gid: dev.gid,
            rkey: 0,
            addr: 0,
            len: 0,
            port: dev.port,
            lid: 0,
        },
        psn,
        cookie,
        op,
        target: t.target.clone(),
        span,
    };
    let answer = ops
        .prepare(&prepare, clock.remaining("PREPARE")?)
        .map_err(|rc| callback_failed("PREPARE", rc))?;
    if answer.status != 200 {
        return Err(refusal("PREPARE", &answer));
    }
    let answer = match answer.message {
        Some(Ok(a)) => a,
        Some(Err(e)) => {
            return Err(Error::rdma(format!("PREPARE's answer is malformed: {e}")));
        }
        None => return Err(Error::rdma("PREPARE's answer has no message")),
    };
    let session = answer.session;
    let outcome = with_session(
        inst, op, &entry, off, t.size, &qp, &prepare, &answer, ops, &clock,
    );
    match outcome {
        Ok(f) => {
            if entry.kind == Registration::Staged && op == Op::Get {
                stage_copy(inst, &entry, SyncDirection::ToDevice, off, size)?;
            }
            if let (Registration::GpuDirect { .. }, Some(gpu)) = (entry.kind, entry.gpu()) {
                gpu.device_synchronize().map_err(|h| {
                    Error::hip(
                        OpError::RdmaError,
                        h,
                        "device synchronize after a v2 transfer failed",
                    )
                })?;
            }
            Ok(f)
        }
        Err(e) => {
            // One best-effort CANCEL, with its own small budget.
            let budget = clock
                .deadline
                .saturating_duration_since(Instant::now())
                .max(DEFAULT_CANCEL_BUDGET);
            match ops.cancel(session, cookie, budget) {
                Ok(s) => tracing::debug!(status = s, "v2 CANCEL answered"),
                Err(rc) => tracing::debug!(rc, "v2 CANCEL callback failed"),
            }
            Err(e)
        }
    }
}

/// Everything after PREPARE's 200: connect, move, READY, FINAL.
#[allow(clippy::too_many_arguments)]
fn with_session(
    inst: &Instance,
    op: Op,
    entry: &Arc<BufEntry>,
    off: u64,
    size: u64,
    qp: &V2Qp,
    prepare: &Prepare,
    answer: &PrepareAnswer,
    ops: &mut dyn V2Ops,
    clock: &Clock,
) -> Result<Final> {
    let dev = &inst.device;
    let cookie = prepare.cookie;
    let staging = match (op, answer.staging) {
        (Op::Put, None) => {
            return Err(Error::rdma(
                "PREPARE's answer to a PUT names no staging region",
            ))
        }
        (_, s) => s,
    };
    let params = hipobj_fabric::rc::RcParams {
        sq_psn: prepare.psn.0,
        rq_psn: answer.psn.0,
        ..dev.rc_params()
    };
    let peer = RcPeer {
        qp_num: answer.server.qp_num,
        gid: answer.server.gid,
        lid: answer.server.lid,
    };
    rc::connect(&qp.qp, &peer, &params).map_err(|e| {
        Error::rdma(format!(
            "connecting to the server's QP {:#x}: {e}",
            peer.qp_num
        ))
    })?;
    let local = entry.token_addr() + off;
    let buffer = match op {
        Op::Get => {
            // The receive the server's last WRITE_WITH_IMM consumes; its
            // bytes go where the WRITE says, so it needs no SGE.
            qp.qp.post_recv(&RecvWr {
                wr_id: 2,
                sg_list: Vec::new(),
            })?;
            Some(Staging {
                addr: local,
                rkey: entry.mr(Direction::Get).rkey(),
            })
        }
        Op::Put => {
            let Some(s) = staging else {
                return Err(Error::rdma("no staging region"));
            };
            let mr = entry.mr(Direction::Put);
            qp.qp.post_send(&SendWr {
                wr_id: 1,
                op: SendOp::RdmaWriteWithImm(
                    RemoteAddr {
                        addr: s.addr,
                        rkey: s.rkey,
                    },
                    cookie.0,
                ),
                sg_list: vec![Sge {
                    addr: local,
                    length: size as u32,
                    lkey: mr.lkey(),
                }],
                signaled: true,
                dc: None,
            })?;
            let wc = qp
                .cq
                .wait_one(clock.remaining("the PUT's write completed")?)?;
            match wc {
                Some(wc) if wc.status == WcStatus::Success && wc.opcode == WcOpcode::RdmaWrite => {}
                Some(wc) => {
                    return Err(Error::rdma(format!(
                        "the PUT's RDMA WRITE_WITH_IMM failed: {:?} (vendor error {})",
                        wc.status, wc.vendor_err
                    )))
                }
                None => {
                    return Err(Error::hip(
                        OpError::Busy,
                        DIAG_DEADLINE_EXPIRED,
                        format!(
                            "the PUT's RDMA write did not complete within the transfer deadline ({} ms)",
                            clock.total.as_millis()
                        ),
                    ))
                }
            }
            None
        }
    };
    let ready = Ready {
        session: answer.session,
        cookie,
        qpn: qp.qp.qp_num(),
        buffer,
    };
    let fin = ops
        .ready(&ready, clock.remaining("READY")?)
        .map_err(|rc| callback_failed("READY", rc))?;
    let ok = fin.status == 200 || (op == Op::Put && fin.status == 204);
    if !ok {
        return Err(refusal("READY", &fin));
    }
    let fin = match fin.message {
        Some(Ok(f)) => f,
        Some(Err(e)) => return Err(Error::rdma(format!("FINAL is malformed: {e}"))),
        None => return Err(Error::rdma("FINAL has no message")),
    };
    if fin.cookie != cookie {
        return Err(Error::rdma(format!(
            "FINAL echoes cookie {}, not this transfer's {}",
            fin.cookie, cookie
        )));
    }
    if fin.bytes != size {
        return Err(Error::rdma(format!(
            "FINAL reports {} bytes moved, not {size}",
            fin.bytes
        )));
    }
    if op == Op::Get {
        // The server's last write has completed at the server before it
        // answered; its receive completion is here or about to be.
        let wc = qp.cq.wait_one(clock.remaining("the GET's data arrived")?)?;
        match wc {
            Some(wc)
                if wc.status == WcStatus::Success
                    && wc.opcode == WcOpcode::RecvRdmaWithImm
                    && wc.imm_data == Some(cookie.0) => {}
            Some(wc) => {
                return Err(Error::rdma(format!(
                    "the GET's receive completed with {:?}, opcode {:?}, immediate {:?}, not success with cookie {cookie}",
                    wc.status, wc.opcode, wc.imm_data
                )))
            }
            None => {
                return Err(Error::rdma(format!(
                    "the GET's data did not arrive within the transfer deadline ({} ms)",
                    clock.total.as_millis()
                )))
            }
        }
    }
    if let Some(want) = fin.checksum {
        if let Some(got) = host_crc(entry, off, size) {
            if got != want {
                return Err(Error::rdma(format!(
                    "the bytes' CRC-64/NVME is {got:#018x}, FINAL says {want:#018x}"
                )));
            }
        }
    }
    Ok(fin)
}

/// A v2 GET with the instance's buffers (the C API's and the Rust API's).
pub(crate) fn get(
    inst: &Instance,
    addr: usize,
    t: &V2Transfer,
    ops: &mut dyn V2Ops,
) -> Result<Final> {
    run(inst, Op::Get, addr, t, ops)
}

/// A v2 PUT.
pub(crate) fn put(
    inst: &Instance,
    addr: usize,
    t: &V2Transfer,
    ops: &mut dyn V2Ops,
) -> Result<Final> {
    run(inst, Op::Put, addr, t, ops)
}

#[cfg(test)]
pub(crate) mod tests;
