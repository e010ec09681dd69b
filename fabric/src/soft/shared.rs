//! The state a soft device's handles and threads share, in one leaf
//! module because its types refer to each other: the device's tables
//! ([`DeviceShared`]) say what a QP number leads to ([`Target`]), a QP
//! ([`QpInner`]) or a DC target ([`DctInner`]), and a QP reaches back to
//! its device. Only the data and the device's own tables live here; what
//! the objects do is in the modules above:
//!
//! - how a QP's work requests complete, and ERR: [`super::completion`];
//! - the requester and responder sides: [`super::requester`],
//!   [`super::responder`];
//! - QP creation, state changes and posting: [`super::qp`]; DC targets:
//!   [`super::dct`]; the verbs objects: [`super::device`].

use super::config::SoftConfig;
use super::cq::CqInner;
use super::memory::MrInner;
use super::packet::SEGMENT;
use super::psn;
use super::stats::Counters;
use crate::error::{FabricError, Result};
use crate::types::{
    AccessFlags, DcAddr, DeviceInfo, QpAttr, QpCap, QpState, QpType, RecvWr, SendOp, SendWr,
    WorkCompletion,
};
use hipobj_wire::Gid;
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, Weak};

/// QP numbers per listener: the low 8 bits of a QP number.
const SLOTS_PER_LISTENER: u32 = 256;

/// What a QP number leads to.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Rc(Weak<QpInner>),
    Dct(Weak<DctInner>),
}

#[derive(Debug)]
struct ListenerSlots {
    port: u16,
    fd: RawFd,
    free: VecDeque<u32>,
}

/// State shared by a device's objects and its threads.
#[derive(Debug)]
pub(crate) struct DeviceShared {
    pub ip: Ipv4Addr,
    pub gid: Gid,
    pub config: SoftConfig,
    /// What the device counts (see [`super::stats`]).
    pub stats: Arc<Counters>,
    info: DeviceInfo,
    mrs: RwLock<HashMap<u32, Arc<MrInner>>>,
    targets: RwLock<HashMap<u32, Target>>,
    listeners: Mutex<Vec<ListenerSlots>>,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    /// Serves an accepted connection (the responder, which sits above this
    /// module): handed in by the device so the accept loop need not name it.
    serve: Serve,
}

/// What the accept loop runs, on a thread of its own, for each connection.
pub(crate) type Serve = fn(Arc<DeviceShared>, TcpStream, u64);

impl DeviceShared {
    pub fn new(ip: Ipv4Addr, config: SoftConfig, info: DeviceInfo, serve: Serve) -> DeviceShared {
        DeviceShared {
            ip,
            gid: Gid::from_ipv4(ip),
            config,
            stats: Arc::new(Counters::default()),
            info,
            mrs: RwLock::new(HashMap::new()),
            targets: RwLock::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            serve,
        }
    }

    /// The device's attributes.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// A fresh id for a PD or a connection.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The live region with key `key`.
    pub fn mr(&self, key: u32) -> Option<Arc<MrInner>> {
        self.mrs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
    }

    /// Registers the region `make` builds under a fresh key: random, never
    /// zero, never one that is live.
    pub fn insert_mr(&self, make: impl FnOnce(u32) -> MrInner) -> Arc<MrInner> {
        let mut table = self.mrs.write().unwrap_or_else(|e| e.into_inner());
        let key = loop {
            let k = random_key();
            if k != 0 && !table.contains_key(&k) {
                break k;
            }
        };
        let inner = Arc::new(make(key));
        table.insert(key, inner.clone());
        inner
    }

    /// Forgets the region with key `key`: new requests stop finding it.
    pub fn remove_mr(&self, key: u32) {
        self.mrs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// What QP number `qpn` leads to.
    pub fn target(&self, qpn: u32) -> Option<Target> {
        self.targets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&qpn)
            .cloned()
    }

    /// Allocates a QP number for `target`: the port of a listener with a
    /// free slot, times 256, plus the slot. A new listener is bound when
    /// every slot is taken.
    pub fn alloc_qpn(self: &Arc<Self>, target: impl FnOnce(u32) -> Target) -> Result<u32> {
        let mut ls = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        let qpn = match ls
            .iter_mut()
            .find_map(|l| l.free.pop_front().map(|s| (l.port, s)))
        {
            Some((port, slot)) => (u32::from(port) << 8) | slot,
            None => {
                let listener = TcpListener::bind(SocketAddrV4::new(self.ip, 0)).map_err(|e| {
                    FabricError::Os {
                        verb: "create_qp (bind soft listener)",
                        source: e,
                    }
                })?;
                let port = listener
                    .local_addr()
                    .map_err(|e| FabricError::Os {
                        verb: "create_qp",
                        source: e,
                    })?
                    .port();
                let mut free: VecDeque<u32> = (1..SLOTS_PER_LISTENER).collect();
                free.push_back(0);
                let slot = free.pop_front().unwrap_or(0);
                ls.push(ListenerSlots {
                    port,
                    fd: listener.as_raw_fd(),
                    free,
                });
                let dev = Arc::downgrade(self);
                std::thread::Builder::new()
                    .name(format!("soft-listen-{port}"))
                    .spawn(move || accept_loop(dev, listener))
                    .map_err(|e| FabricError::Os {
                        verb: "create_qp (spawn)",
                        source: e,
                    })?;
                tracing::debug!(ip = %self.ip, port, "soft device listening");
                (u32::from(port) << 8) | slot
            }
        };
        drop(ls);
        self.targets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(qpn, target(qpn));
        Ok(qpn)
    }

    /// Forgets QP number `qpn`: later requests for it are dropped, and its
    /// slot is reused last.
    pub fn free_qpn(&self, qpn: u32) {
        self.targets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&qpn);
        let port = (qpn >> 8) as u16;
        let mut ls = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = ls.iter_mut().find(|l| l.port == port) {
            l.free.push_back(qpn & 0xff);
        }
    }

    fn register_conn(&self, id: u64, stream: &TcpStream) {
        if let Ok(clone) = stream.try_clone() {
            self.conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, clone);
        }
    }

    pub fn unregister_conn(&self, id: u64) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// Closes the device: the accept loops end, and every connection is
    /// shut down (its responder thread then ends).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for l in self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            // SAFETY: `fd` is the listening socket owned by its accept thread,
            // which only closes it after accept() fails, and accept() cannot
            // fail before this shutdown wakes it. shutdown() on a listening
            // socket makes a blocked accept() return EINVAL on Linux.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn random_key() -> u32 {
    let mut b = [0u8; 4];
    // The OS random source; failure would be an unusable system.
    if getrandom::fill(&mut b).is_err() {
        tracing::error!("getrandom failed; rkeys would be predictable");
    }
    u32::from_ne_bytes(b)
}

fn accept_loop(dev: Weak<DeviceShared>, listener: TcpListener) {
    loop {
        let accepted = listener.accept();
        let Some(d) = dev.upgrade() else { return };
        if d.closed.load(Ordering::Acquire) {
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let id = d.next_id();
                d.register_conn(id, &stream);
                let serve = d.serve;
                let spawned = std::thread::Builder::new()
                    .name("soft-responder".into())
                    .spawn(move || serve(d, stream, id));
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "soft device could not start a responder");
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "soft listener accept failed");
                if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EBADF)) {
                    return;
                }
            }
        }
    }
}

/// A DC target shared by its handle and the device's responder threads
/// (created in [`super::dct`]).
#[derive(Debug)]
pub(crate) struct DctInner {
    pub dctn: u32,
    pub pd_id: u64,
    pub access: AccessFlags,
    pub key: u64,
    /// Kept for the completions a DCT with a receive queue would report.
    pub _cq: Arc<CqInner>,
    pub violations: AtomicU64,
}

impl DctInner {
    pub fn count_violation(&self) {
        let n = self.violations.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            dctn = format_args!("{:#x}", self.dctn),
            violations = n,
            "soft DCT: request with a wrong DC key dropped"
        );
    }
}

/// A posted send work request and the PSNs it occupies.
#[derive(Debug, Clone)]
pub(crate) struct ActiveWr {
    pub wr: SendWr,
    pub first_psn: u32,
    pub nsegs: u32,
    pub len: u64,
    /// A READ whose data the same-host path has copied: it completes with
    /// the acknowledgement of its last PSN.
    pub cma_read_done: bool,
}

impl ActiveWr {
    /// The PSN after this request's last.
    pub fn end_psn(&self) -> u32 {
        psn::add(self.first_psn, self.nsegs)
    }

    /// Whether `p` is one of this request's PSNs.
    pub fn holds(&self, p: u32) -> bool {
        let d = psn::diff(p, self.first_psn);
        d >= 0 && (d as u32) < self.nsegs
    }

    /// Offset and length of segment `k`.
    pub fn segment(&self, k: u32) -> (u64, u32) {
        let off = u64::from(k) * u64::from(SEGMENT);
        let len = (self.len - off.min(self.len)).min(u64::from(SEGMENT)) as u32;
        (off, len)
    }

    pub fn is_read(&self) -> bool {
        matches!(self.wr.op, SendOp::RdmaRead(_))
    }
}

/// Segments a message of `len` bytes occupies (at least one).
pub(crate) fn segments(len: u64) -> u32 {
    len.div_ceil(u64::from(SEGMENT)).max(1) as u32
}

/// The requester's connection to its responder.
#[derive(Debug)]
pub(crate) struct ReqConn {
    pub id: u64,
    pub stream: TcpStream,
    /// The responder's process, where the same-host path is open (offered
    /// by the responder, checked as `cma::verify_peer` says, held by a
    /// pidfd).
    pub cma_peer: Option<super::cma::PeerProcess>,
    /// Cleared when the kernel refuses a copy: the path is not used on
    /// this connection again.
    pub cma_live: std::sync::atomic::AtomicBool,
}

impl ReqConn {
    /// The process to copy to and from, while the same-host path is open.
    /// The process must still be the one checked (its pidfd says it is
    /// alive): once it is gone, the path closes on this connection.
    pub fn cma(&self) -> Option<u32> {
        let peer = self
            .cma_peer
            .as_ref()
            .filter(|_| self.cma_live.load(std::sync::atomic::Ordering::Acquire))?;
        if !peer.alive() {
            self.cma_live
                .store(false, std::sync::atomic::Ordering::Release);
            return None;
        }
        Some(peer.pid)
    }
}

/// A same-host grant the receiver thread took off the stream, for the
/// engine waiting on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmaGrant {
    pub conn: u64,
    pub psn: u32,
    pub nonce: u32,
    pub addr: u64,
}

/// Everything about a QP that changes, under one lock.
#[derive(Debug, Default)]
pub(crate) struct QpCore {
    pub state: QpState,
    pub attr: QpAttr,
    /// Bumped whenever threads working for the previous state must stop.
    pub gen: u64,
    pub destroyed: bool,
    // Responder side.
    pub epsn: u32,
    pub nak_seq_sent: bool,
    pub rq: VecDeque<RecvWr>,
    // Requester side.
    pub sq: VecDeque<ActiveWr>,
    /// PSN the next posted request gets.
    pub next_psn: u32,
    /// Next PSN to transmit (moves back on a retransmission).
    pub send_psn: u32,
    /// Highest PSN transmitted, plus one.
    pub sent_hi: u32,
    /// Oldest PSN not yet acknowledged.
    pub una: u32,
    pub retry_left: u8,
    pub rnr_left: u8,
    pub timer: Option<std::time::Instant>,
    pub rnr_until: Option<std::time::Instant>,
    pub conn: Option<Arc<ReqConn>>,
    /// For DC initiators: where the current connection goes.
    pub dc_target: Option<DcAddr>,
    /// Threads now moving bytes between a socket and memory that one of
    /// this QP's work requests names, outside the lock.
    pub busy: u32,
    /// Completions not delivered yet because `busy` was not zero when they
    /// were made (see `QpInner::deliver` in [`super::completion`]): delivered, in order, when the
    /// last busy thread lets go.
    pub held: VecDeque<(CqSide, WorkCompletion)>,
    /// The latest same-host grant received.
    pub cma_grant: Option<CmaGrant>,
    /// The nonce of the next same-host request.
    pub cma_nonce: u32,
    /// The engine is copying by the same-host path: the connection must
    /// not close under it (the responder keeps the region registered until
    /// the stream says done, or ends).
    pub cma_copying: bool,
    /// A connection to close once the copy is over.
    pub cma_deferred_close: Option<Arc<ReqConn>>,
    /// A thread is writing one of this QP's packets to its connection
    /// outside the lock (the engine, or a posting thread sending inline):
    /// no other may start one, or their bytes would interleave.
    pub tx_active: bool,
    /// The engine is waiting with nothing to send: an acknowledgement that
    /// leaves nothing to send need not wake it.
    pub engine_idle: bool,
}

/// Which of a QP's completion queues a completion goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CqSide {
    Send,
    Recv,
}

/// A QP shared by its handle and the threads working for it.
#[derive(Debug)]
pub(crate) struct QpInner {
    pub dev: Arc<DeviceShared>,
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd_id: u64,
    pub send_cq: Arc<CqInner>,
    pub recv_cq: Arc<CqInner>,
    pub cap: QpCap,
    pub core: Mutex<QpCore>,
    pub wake: Condvar,
}

impl QpInner {
    pub fn lock(&self) -> MutexGuard<'_, QpCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Answers, to the peer, whether the accepted stream has `TCP_NODELAY`.
    fn answer_nodelay(_: Arc<DeviceShared>, stream: TcpStream, _: u64) {
        let on = stream.nodelay().unwrap_or(false);
        let _ = (&stream).write_all(&[u8::from(on)]);
    }

    /// Small packets (ACKs, NAKs, a header before its payload) must never
    /// wait for Nagle's algorithm and the peer's delayed ACK: the responder
    /// side of every connection has `TCP_NODELAY` (the requester side sets
    /// it in `requester::connect`).
    #[test]
    fn accepted_connections_have_tcp_nodelay() {
        let info = DeviceInfo {
            name: "nodelay0".into(),
            vendor_id: 0,
            vendor_part_id: 0,
            phys_port_cnt: 1,
            max_mr_size: u64::MAX,
            supports_dmabuf: false,
            supports_dc: true,
            dc_unavailable: None,
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
        };
        let dev = Arc::new(DeviceShared::new(
            Ipv4Addr::LOCALHOST,
            SoftConfig::default(),
            info,
            answer_nodelay,
        ));
        let qpn = dev
            .alloc_qpn(|_| Target::Rc(Weak::new()))
            .expect("a listener");
        let port = u16::try_from(qpn >> 8).expect("a port");
        let mut peer = TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
        let mut on = [0u8; 1];
        peer.read_exact(&mut on).expect("the accepted side answers");
        assert_eq!(on, [1], "the accepted stream has TCP_NODELAY");
        dev.close();
    }
}
