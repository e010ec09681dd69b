//! Transfers: `get` and `put` through the application's callbacks, and the
//! calls of application-driven transfers (tokens, syncs, the handshake).
//!
//! The flow is connect-first (docs/protocol.md): a leased connection that
//! is not connected sends a handshake token (RC, length 0) and connects to
//! the server QP the reply names; then the transfer token names the
//! connected QP and the buffer range, and the server's reply is the only
//! thing the client waits for. A reply of 421 (the server does not know the
//! pair) resets the connection, repeats the handshake and retries once.

use crate::buffer::{BufEntry, Direction, Registration};
use crate::connection::RcConnection;
use crate::error::{Error, OpError, Result};
use crate::instance::Instance;
use crate::pool::AcquireError;
use hipobj_fabric::rc::RcPeer;
use hipobj_wire::{Reply, Token, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Room for a reply, as hipObject's 512-byte buffer.
pub const REPLY_CAPACITY: usize = 512;
/// The reply that asks a client to reconnect and retry.
pub const REPLY_RECONNECT: u16 = 421;
/// The reply of a server at its RDMA capacity: a handshake finding no QP
/// pair free, or a transfer finding no staging buffer free (HTTP 503
/// SlowDown). The transfer fails with [`OpError::S3Error`] and the reply
/// `503` ([`Error::reply`]); the transfer did not complete, and the connection stays
/// usable: the application may retry later or use plain HTTP.
pub const REPLY_BUSY: u16 = 503;

/// The application's S3 side of a transfer (`hipObjOps_t`).
pub trait S3Ops {
    /// Sends the S3 request with `token` in `x-amz-rdma-token`. An `Err`
    /// carries the application's (negative) code.
    fn send_request(&mut self, token: &str) -> std::result::Result<(), i32>;
    /// Writes the response's `x-amz-rdma-reply` value into `reply` and
    /// returns its length.
    fn recv_reply(&mut self, reply: &mut [u8]) -> std::result::Result<usize, i32>;
}

/// Which way `hipObjBufSync` copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncDirection {
    /// Device to staging, before a PUT.
    ToHost,
    /// Staging to device, after a GET.
    ToDevice,
}

fn check_args(addr: usize, size: usize, offset: i64) -> Result<u64> {
    if addr == 0 {
        return Err(Error::invalid("null buffer address"));
    }
    if size == 0 {
        return Err(Error::invalid("size 0"));
    }
    u64::try_from(offset).map_err(|_| Error::invalid(format!("negative offset {offset}")))
}

/// Finds the buffer and checks the range and any copy still running.
pub(crate) fn lookup(
    inst: &Instance,
    addr: usize,
    size: usize,
    offset: i64,
) -> Result<(Arc<BufEntry>, u64)> {
    let off = check_args(addr, size, offset)?;
    let entry = inst.buffers.find(addr)?;
    entry.check_range(off, size as u64)?;
    if entry.kind == Registration::Staged && inst.abandoned.is_busy(&entry) {
        return Err(Error::busy(format!(
            "a timed-out staging copy of {addr:#x} is still running"
        )));
    }
    Ok((entry, off))
}

/// Copies between a staged buffer and its staging memory, with the
/// deadline; a copy that misses it is handed to the abandoned list.
pub(crate) fn stage_copy(
    inst: &Instance,
    entry: &Arc<BufEntry>,
    dir: SyncDirection,
    off: u64,
    size: usize,
) -> Result<()> {
    let Some(staging) = entry.staging() else {
        return Ok(());
    };
    let off = off as usize;
    let (dst, src) = match dir {
        SyncDirection::ToHost => (staging + off, entry.addr + off),
        SyncDirection::ToDevice => (entry.addr + off, staging + off),
    };
    let gpu = entry.gpu().unwrap_or(&inst.platform.hip);
    let slot = inst.abandoned.reserve();
    let event = gpu.copy_async(dst, src, size).map_err(|h| {
        Error::hip(
            OpError::RdmaError,
            h,
            format!(
                "{} async copy (hipMemcpyAsync/cuMemcpy*Async) to or from the staging buffer failed",
                gpu.name()
            ),
        )
    })?;
    let deadline = Instant::now() + inst.options.stage_timeout;
    loop {
        match event.done() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(h) => {
                slot.add(event, entry.clone());
                return Err(Error::hip(
                    OpError::RdmaError,
                    h,
                    "waiting for a staging copy failed",
                ));
            }
        }
        if Instant::now() >= deadline {
            slot.add(event, entry.clone());
            return Err(Error::rdma(format!(
                "staging copy of {size} bytes did not finish within {} ms",
                inst.options.stage_timeout.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn token_for(inst: &Instance, qp_num: u32, rkey: u32, addr: u64, len: u64) -> String {
    Token {
        transport: Transport::Rc,
        qp_num,
        gid: inst.device.gid,
        rkey,
        addr,
        len,
        port: inst.device.port,
        lid: 0,
    }
    .encode()
}

/// One request/reply round trip through the callbacks.
fn call(ops: &mut dyn S3Ops, token: &str) -> Result<Reply> {
    let sent = ops.send_request(token);
    reply_of(sent, |b| ops.recv_reply(b))
}

/// The reply of one request, from what `sendRequest` returned and a
/// `recvReply`.
fn reply_of(
    sent: std::result::Result<(), i32>,
    recv: impl FnOnce(&mut [u8]) -> std::result::Result<usize, i32>,
) -> Result<Reply> {
    sent.map_err(|rc| Error::s3(format!("the sendRequest callback failed ({rc})"), None))?;
    let mut buf = [0u8; REPLY_CAPACITY];
    let n = recv(&mut buf)
        .map_err(|rc| Error::s3(format!("the recvReply callback failed ({rc})"), None))?;
    let raw = buf.get(..n).ok_or_else(|| {
        Error::s3(
            format!("recvReply reported {n} bytes, more than {REPLY_CAPACITY}"),
            None,
        )
    })?;
    Reply::parse(raw).map_err(|e| {
        Error::s3(
            format!("invalid x-amz-rdma-reply: {e}"),
            Some(String::from_utf8_lossy(raw).into_owned()),
        )
    })
}

/// Parses a handshake reply and connects `conn` to the server QP it names.
pub(crate) fn connect_from_reply(
    inst: &Instance,
    conn: &mut RcConnection,
    reply: &Reply,
) -> Result<()> {
    match reply {
        Reply::Peer(t) | Reply::PeerStatus(_, t) if t.transport == Transport::Rc => {
            conn.connect(&inst.device, RcPeer { qp_num: t.qp_num, gid: t.gid, lid: t.lid })
        }
        r if r.is_declined() => Err(Error::s3("the server declined RDMA (501)", Some(r.format()))),
        r if r.status() == Some(REPLY_BUSY) => Err(Error::s3(
            "the server refused the RDMA handshake for capacity (503: no QP pair is free now); \
             nothing was transferred: retry later or move the bytes over plain HTTP",
            Some(r.format()),
        )),
        r => Err(Error::s3(
            format!("the server answered the RDMA handshake with {r}, not 200:<server token>: it does not run the connect-first RC flow"),
            Some(r.format()),
        )),
    }
}

/// The connect-first flow of one transfer over one connection, request by
/// request: what [`transfer`] drives through the callbacks and
/// [`Stepwise`] hands to the application.
#[derive(Debug)]
struct Flow {
    entry: Arc<BufEntry>,
    dir: Direction,
    off: u64,
    size: usize,
    retried: bool,
    handshake: bool,
}

impl Flow {
    fn new(entry: Arc<BufEntry>, dir: Direction, off: u64, size: usize) -> Flow {
        Flow {
            entry,
            dir,
            off,
            size,
            retried: false,
            handshake: false,
        }
    }

    /// The next token: a handshake when `conn` is not connected, else the
    /// transfer's (the QP then allows the peer this direction only).
    fn next_token(&mut self, inst: &Instance, conn: &mut RcConnection) -> Result<String> {
        if !conn.is_connected() {
            if conn.peer.is_some() {
                conn.reset(&inst.device)?;
            }
            self.handshake = true;
            return Ok(token_for(inst, conn.qp.qp_num(), 0, 0, 0));
        }
        conn.allow(self.dir.qp_access())?;
        self.handshake = false;
        let mr = self.entry.mr(self.dir);
        Ok(token_for(
            inst,
            conn.qp.qp_num(),
            mr.rkey(),
            self.entry.token_addr() + self.off,
            self.size as u64,
        ))
    }

    /// Takes the reply to the token last asked for.
    fn advance(&mut self, inst: &Instance, conn: &mut RcConnection, reply: &Reply) -> Result<Step> {
        if self.handshake {
            connect_from_reply(inst, conn, reply)?;
            return self.next_token(inst, conn).map(Step::Send);
        }
        if reply.is_success() {
            return Ok(Step::Done);
        }
        if reply.status() == Some(REPLY_RECONNECT) && !self.retried {
            tracing::debug!(
                qpn = format_args!("{:#x}", conn.qp.qp_num()),
                "server does not know this QP pair; reconnecting"
            );
            self.retried = true;
            conn.reset(&inst.device)?;
            return self.next_token(inst, conn).map(Step::Send);
        }
        let what = if reply.is_declined() {
            "the server declined RDMA (501)".to_string()
        } else if reply.status() == Some(REPLY_BUSY) {
            "the server had no RDMA staging buffer free (503): retry later or move the bytes over plain HTTP".to_string()
        } else {
            format!("the server answered {reply}")
        };
        Err(Error::s3(what, Some(reply.format())))
    }
}

/// Runs `flow` to its end through the application's callbacks.
fn exchange(
    inst: &Instance,
    conn: &mut RcConnection,
    mut flow: Flow,
    ops: &mut dyn S3Ops,
) -> Result<()> {
    let mut token = flow.next_token(inst, conn)?;
    loop {
        let reply = call(ops, &token)?;
        match flow.advance(inst, conn, &reply)? {
            Step::Send(next) => token = next,
            Step::Done => return Ok(()),
        }
    }
}

/// What a [`Stepwise`] transfer needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send the S3 request with this token, then pass its outcome to
    /// [`Stepwise::advance`].
    Send(String),
    /// The transfer is complete (the server's success reply came).
    Done,
}

/// `hipObjGet` / `hipObjPut` of a host buffer, driven by the application one
/// request at a time instead of through blocking callbacks: the same
/// connect-first flow as `transfer` (handshake when the leased connection
/// is not connected, one reconnect and retry on reply 421), so that an
/// asynchronous application can send its requests without a blocking
/// thread. Holds a connection of the pool until dropped.
#[derive(Debug)]
pub struct Stepwise<'a> {
    inst: &'a Instance,
    lease: crate::pool::DetachedLease<'a>,
    flow: Flow,
    /// A transfer token is out and its reply has not been taken.
    outstanding: bool,
}

impl Drop for Stepwise<'_> {
    fn drop(&mut self) {
        if self.outstanding {
            // Dropped while the server may still be moving data: reset the
            // connection, so that nothing more reaches the buffer through it
            // (the server's pair fails; the next transfer reconnects).
            if let Some(conn) = self.lease.slot().as_mut() {
                if let Err(e) = conn.reset(&self.inst.device) {
                    tracing::warn!(error = %e, "resetting an abandoned transfer's connection failed");
                }
            }
        }
    }
}

impl<'a> Stepwise<'a> {
    /// Starts a transfer and returns the first token to send; `Ok(None)`
    /// when it cannot run this way now (no connection free, or a buffer that
    /// is not plain host memory): use [`transfer`] instead.
    pub(crate) fn start(
        inst: &'a Instance,
        dir: Direction,
        addr: usize,
        size: usize,
        offset: i64,
    ) -> Result<Option<(Stepwise<'a>, String)>> {
        let (entry, off) = lookup(inst, addr, size, offset)?;
        if entry.kind != Registration::Host {
            return Ok(None);
        }
        let lease = match inst.pool.try_detach() {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(None),
            Err(AcquireError::Closed) => {
                return Err(Error::new(
                    OpError::NotInitialized,
                    "the library was shut down",
                ))
            }
            Err(_) => return Err(Error::rdma("no RDMA connection is left in the pool")),
        };
        if !lease.healthy() {
            return Err(Error::rdma(
                "the RDMA connection broke and could not be replaced",
            ));
        }
        let mut s = Stepwise {
            inst,
            lease,
            flow: Flow::new(entry, dir, off, size),
            outstanding: false,
        };
        let token = s.next_token()?;
        Ok(Some((s, token)))
    }

    /// Whether the token last returned is a handshake.
    pub fn is_handshake(&self) -> bool {
        self.flow.handshake
    }

    /// Runs `f` on the flow and the leased connection.
    fn step<T>(
        &mut self,
        f: impl FnOnce(&mut Flow, &Instance, &mut RcConnection) -> Result<T>,
    ) -> Result<T> {
        let mut slot = self.lease.slot();
        let conn = slot
            .as_mut()
            .ok_or_else(|| Error::rdma("the RDMA connection was lost"))?;
        f(&mut self.flow, self.inst, conn)
    }

    /// The first token. A transfer token (not a handshake) is outstanding
    /// until its answer comes.
    fn next_token(&mut self) -> Result<String> {
        let token = self.step(|flow, inst, conn| flow.next_token(inst, conn))?;
        self.outstanding = !self.flow.handshake;
        Ok(token)
    }

    /// Takes the outcome of the request last asked for: `sent` as
    /// `sendRequest` would return it, and `recv` writing the response's
    /// `x-amz-rdma-reply` as `recvReply` would.
    pub fn advance(
        &mut self,
        sent: std::result::Result<(), i32>,
        recv: impl FnOnce(&mut [u8]) -> std::result::Result<usize, i32>,
    ) -> Result<Step> {
        // An answer (any answer) ends the server's work on the request; a
        // request that failed to be sent may still have reached it.
        if sent.is_ok() {
            self.outstanding = false;
        }
        let reply = reply_of(sent, recv)?;
        let step = self.step(|flow, inst, conn| flow.advance(inst, conn, &reply))?;
        if matches!(step, Step::Send(_)) {
            self.outstanding = !self.flow.handshake;
        }
        Ok(step)
    }
}

/// `hipObjGet` / `hipObjPut`.
pub(crate) fn transfer(
    inst: &Instance,
    dir: Direction,
    addr: usize,
    size: usize,
    offset: i64,
    ops: &mut dyn S3Ops,
) -> Result<()> {
    let (entry, off) = lookup(inst, addr, size, offset)?;
    let staged = entry.kind == Registration::Staged;
    if staged && dir == Direction::Put {
        stage_copy(inst, &entry, SyncDirection::ToHost, off, size)?;
    }
    {
        let mut lease = inst.pool.acquire().map_err(|e| match e {
            AcquireError::Busy => Error::busy("every connection is leased, and this thread holds one (a transfer started from a callback)"),
            AcquireError::Closed => Error::new(OpError::NotInitialized, "the library was shut down"),
            AcquireError::Empty => Error::rdma("no RDMA connection is left in the pool"),
        })?;
        let conn = lease
            .healthy()
            .ok_or_else(|| Error::rdma("the RDMA connection broke and could not be replaced"))?;
        exchange(inst, conn, Flow::new(entry.clone(), dir, off, size), ops)?;
    }
    if matches!(entry.kind, Registration::GpuDirect { .. }) {
        let gpu = entry.gpu().unwrap_or(&inst.platform.hip);
        gpu.device_synchronize().map_err(|h| {
            Error::hip(
                OpError::RdmaError,
                h,
                format!(
                    "{} device synchronize (hipDeviceSynchronize/cuCtxSynchronize) after the transfer failed",
                    gpu.name()
                ),
            )
        })?;
    }
    if staged && dir == Direction::Get {
        stage_copy(inst, &entry, SyncDirection::ToDevice, off, size)?;
    }
    Ok(())
}

/// `hipObjBufSync`: the staging copy `get`/`put` would make; nothing for a
/// buffer that is not staged.
pub(crate) fn buf_sync(
    inst: &Instance,
    addr: usize,
    size: usize,
    offset: i64,
    dir: SyncDirection,
) -> Result<()> {
    let (entry, off) = lookup(inst, addr, size, offset)?;
    stage_copy(inst, &entry, dir, off, size)
}

/// `hipObjGetRdmaToken` (and its ranged form): a token for `size` bytes at
/// `offset` into a registered buffer, naming the token connection.
pub(crate) fn rdma_token(
    inst: &Instance,
    addr: usize,
    offset: i64,
    size: usize,
    dir: Direction,
) -> Result<String> {
    let (entry, off) = lookup(inst, addr, size, offset)?;
    let mut conn = inst.token_conn();
    conn.allow(dir.qp_access())?;
    let mr = entry.mr(dir);
    Ok(token_for(
        inst,
        conn.qp.qp_num(),
        mr.rkey(),
        entry.token_addr() + off,
        size as u64,
    ))
}

/// The handshake extension, step 1: a handshake token for the token
/// connection (which is reset first if it was connected).
pub(crate) fn handshake_token(inst: &Instance) -> Result<String> {
    let mut conn = inst.token_conn();
    if conn.peer.is_some() || conn.is_broken() {
        conn.reset(&inst.device)?;
    }
    Ok(token_for(inst, conn.qp.qp_num(), 0, 0, 0))
}

/// The handshake-form token (RC, no buffer) naming QP `qp_num` of this
/// library: a handshake's, or a goodbye's.
pub(crate) fn handshake_token_for(inst: &Instance, qp_num: u32) -> String {
    token_for(inst, qp_num, 0, 0, 0)
}

/// The handshake extension, step 2: connects the token connection to the
/// server QP named by the handshake's reply.
pub(crate) fn complete_handshake(inst: &Instance, reply: &[u8]) -> Result<()> {
    let parsed = Reply::parse(reply)
        .map_err(|e| Error::invalid(format!("invalid x-amz-rdma-reply: {e}")))?;
    let mut conn = inst.token_conn();
    if conn.peer.is_some() || conn.is_broken() {
        conn.reset(&inst.device)?;
    }
    connect_from_reply(inst, &mut conn, &parsed)
}

/// `hipObjParseRdmaReply`: the HTTP status of a valid reply; `err`, a
/// failure with no status of its own, is -1 as in hipObject's library.
pub(crate) fn parse_reply(reply: &[u8]) -> Result<i32> {
    let r = Reply::parse(reply)
        .map_err(|e| Error::invalid(format!("invalid x-amz-rdma-reply: {e}")))?;
    Ok(r.status().map_or(-1, i32::from))
}

/// `hipObjTokenClientNic`: the dotted quad of an IPv4-mapped GID, or an
/// empty string for any other GID.
pub(crate) fn token_client_nic(token: &str) -> Result<String> {
    let t = Token::decode(token).map_err(|e| Error::invalid(format!("invalid token: {e}")))?;
    Ok(t.client_ip().map(|ip| ip.to_string()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::gpu::NoHip;
    use crate::platform::topology::NoTopology;
    use crate::platform::Platform;
    use crate::testing::ServerPeer;
    use crate::{Config, Hipobj, Options};
    use hipobj_fabric::soft::{SoftConfig, SoftProvider};
    use std::net::Ipv4Addr;
    use std::sync::atomic::Ordering;

    fn soft() -> Arc<SoftProvider> {
        Arc::new(SoftProvider::new(
            vec![Ipv4Addr::LOCALHOST],
            SoftConfig {
                timeout_scale: 0.1,
                ..SoftConfig::from_env()
            },
        ))
    }

    fn one_connection_lib() -> Hipobj {
        let platform = Platform {
            hip: Arc::new(NoHip),
            rdma: soft(),
            topology: Arc::new(NoTopology),
        };
        let options = Options {
            max_transfers: 1,
            ..Options::default()
        };
        Hipobj::with_platform(platform, options, &Config::with_nic("soft0")).unwrap()
    }

    /// Sends each token to the peer until the transfer is done; the tokens sent.
    fn drive(
        peer: &ServerPeer,
        method: &str,
        key: &str,
        t: &mut Stepwise<'_>,
        first: String,
    ) -> Result<Vec<String>> {
        let mut tokens = Vec::new();
        let mut token = first;
        loop {
            let reply = peer.serve(method, key, &token);
            tokens.push(token);
            let recv = |b: &mut [u8]| {
                b[..reply.len()].copy_from_slice(reply.as_bytes());
                Ok(reply.len())
            };
            match t.advance(Ok(()), recv)? {
                Step::Send(next) => token = next,
                Step::Done => return Ok(tokens),
            }
        }
    }

    #[test]
    fn stepwise_transfers_handshake_once_reuse_and_reconnect_on_421() {
        let lib = one_connection_lib();
        let peer = ServerPeer::new(soft().open_ip(Ipv4Addr::LOCALHOST)).unwrap();
        let want: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        peer.put_object("obj", want.clone());
        let mut mem = vec![0u8; 4096];
        {
            let buf = lib.register_host(&mut mem).unwrap();

            let (mut t, first) = buf
                .start_stepwise(Direction::Get, 0, 4096)
                .unwrap()
                .unwrap();
            assert!(t.is_handshake());
            // The pool's only connection is leased: a second transfer must
            // take the blocking path.
            assert!(buf
                .start_stepwise(Direction::Get, 0, 4096)
                .unwrap()
                .is_none());
            let tokens = drive(&peer, "GET", "obj", &mut t, first).unwrap();
            assert_eq!(tokens.len(), 2, "handshake, then the transfer");
            assert!(Token::decode(&tokens[0]).unwrap().is_handshake());
            assert_eq!(Token::decode(&tokens[1]).unwrap().len, 4096);
            drop(t);

            // The connection is back in the pool, connected: one request.
            let (mut t, first) = buf
                .start_stepwise(Direction::Put, 0, 4096)
                .unwrap()
                .unwrap();
            assert!(!t.is_handshake());
            assert_eq!(drive(&peer, "PUT", "copy", &mut t, first).unwrap().len(), 1);
            drop(t);

            // The server forgot the pair: 421, handshake, transfer again.
            peer.forget_pairs();
            let (mut t, first) = buf
                .start_stepwise(Direction::Get, 0, 4096)
                .unwrap()
                .unwrap();
            assert_eq!(drive(&peer, "GET", "obj", &mut t, first).unwrap().len(), 3);
        }
        assert!(mem == want);
        assert!(*peer.object("copy").unwrap() == want);
        assert_eq!(peer.stats.handshakes.load(Ordering::Relaxed), 2);
        assert_eq!(peer.stats.reconnects.load(Ordering::Relaxed), 1);
        assert_eq!(peer.stats.transfers.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_failed_request_fails_the_stepwise_transfer_and_returns_the_connection() {
        let lib = one_connection_lib();
        let mut mem = vec![0u8; 64];
        let buf = lib.register_host(&mut mem).unwrap();
        let (mut t, _) = buf.start_stepwise(Direction::Get, 0, 64).unwrap().unwrap();
        let e = t.advance(Err(-7), |_| Ok(0)).unwrap_err();
        assert_eq!(e.op, OpError::S3Error);
        assert!(e.message.contains("(-7)"), "{}", e.message);
        drop(t);
        assert_eq!(lib.instance().pool_free(), 1);
        assert!(buf.start_stepwise(Direction::Get, 0, 64).unwrap().is_some());
    }
}
