//! A software device: an IPv4 address, its IPv4-mapped GID, TCP listeners
//! whose ports name its QPs, and the tables of live keys and QPs that
//! incoming requests are checked against.

use super::cq::{CqInner, SoftCq};
use super::dct::{DctInner, SoftDct};
use super::memory::MrInner;
use super::qp::{QpInner, SoftQp};
use super::responder;
use super::SoftConfig;
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, QpInit, QpOps};
use crate::types::{
    AccessFlags, DeviceInfo, GidEntry, GidType, LinkLayer, Mtu, PortAttr, PortState,
};
use hipobj_wire::Gid;
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

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
    info: DeviceInfo,
    mrs: RwLock<HashMap<u32, Arc<MrInner>>>,
    targets: RwLock<HashMap<u32, Target>>,
    listeners: Mutex<Vec<ListenerSlots>>,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl DeviceShared {
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
                let spawned = std::thread::Builder::new()
                    .name("soft-responder".into())
                    .spawn(move || responder::serve(d, stream, id));
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

/// The provider object behind a [`Device`](crate::Device).
#[derive(Debug)]
pub(crate) struct SoftDevice {
    pub shared: Arc<DeviceShared>,
}

impl SoftDevice {
    pub fn new(name: String, ip: Ipv4Addr, config: SoftConfig) -> SoftDevice {
        let info = DeviceInfo {
            name,
            vendor_id: 0,
            vendor_part_id: 0,
            phys_port_cnt: 1,
            max_mr_size: u64::MAX,
            supports_dmabuf: false,
            supports_dc: true,
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
        };
        SoftDevice {
            shared: Arc::new(DeviceShared {
                ip,
                gid: Gid::from_ipv4(ip),
                config,
                info,
                mrs: RwLock::new(HashMap::new()),
                targets: RwLock::new(HashMap::new()),
                listeners: Mutex::new(Vec::new()),
                conns: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                closed: AtomicBool::new(false),
            }),
        }
    }
}

impl Drop for SoftDevice {
    fn drop(&mut self) {
        let d = &self.shared;
        d.closed.store(true, Ordering::Release);
        for l in d.listeners.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: `fd` is the listening socket owned by its accept thread,
            // which only closes it after accept() fails, and accept() cannot
            // fail before this shutdown wakes it. shutdown() on a listening
            // socket makes a blocked accept() return EINVAL on Linux.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        for c in d.conns.lock().unwrap_or_else(|e| e.into_inner()).values() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl DeviceOps for SoftDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(FabricError::invalid(
                "query_port",
                format!("port {port} (soft devices have port 1)"),
            ));
        }
        Ok(PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu4096,
            gid_tbl_len: 1,
            max_msg_sz: 1 << 31,
            lid: 0,
            link_layer: LinkLayer::Ethernet,
        })
    }

    fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        self.query_port(port)?;
        Ok(vec![GidEntry {
            index: 0,
            gid: self.shared.gid,
            gid_type: GidType::RoceV2,
        }])
    }

    fn alloc_pd(&self) -> Result<Arc<dyn PdOps>> {
        Ok(Arc::new(SoftPd {
            dev: self.shared.clone(),
            id: self.shared.next_id(),
        }))
    }

    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn CqOps>> {
        if cqe == 0 || cqe > 1 << 22 {
            return Err(FabricError::invalid("create_cq", format!("{cqe} entries")));
        }
        Ok(Arc::new(SoftCq {
            inner: Arc::new(CqInner::new(cqe as usize)),
        }))
    }
}

/// A protection domain: an id that keys and QPs are checked against.
#[derive(Debug)]
pub(crate) struct SoftPd {
    dev: Arc<DeviceShared>,
    id: u64,
}

/// Recovers the software CQ behind a seam CQ.
pub(crate) fn soft_cq(cq: &Arc<dyn CqOps>, verb: &'static str) -> Result<Arc<CqInner>> {
    cq.as_any()
        .downcast_ref::<SoftCq>()
        .map(|c| c.inner.clone())
        .ok_or_else(|| FabricError::invalid(verb, "the CQ belongs to another provider"))
}

fn random_key() -> u32 {
    let mut b = [0u8; 4];
    // The OS random source; failure would be an unusable system.
    if getrandom::fill(&mut b).is_err() {
        tracing::error!("getrandom failed; rkeys would be predictable");
    }
    u32::from_ne_bytes(b)
}

impl PdOps for SoftPd {
    unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        let known = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::RELAXED_ORDERING;
        if access.bits() & !known.bits() != 0 {
            return Err(FabricError::invalid(
                "reg_mr",
                format!("unsupported access {access:?}"),
            ));
        }
        // As in libibverbs: remote write or atomic access needs local write.
        if (access.contains(AccessFlags::REMOTE_WRITE)
            || access.contains(AccessFlags::REMOTE_ATOMIC))
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(FabricError::invalid(
                "reg_mr",
                "remote write access requires local write",
            ));
        }
        if addr.is_null() || (addr as u64).checked_add(len as u64).is_none() {
            return Err(FabricError::invalid(
                "reg_mr",
                "null or wrapping address range",
            ));
        }
        let mut table = self.dev.mrs.write().unwrap_or_else(|e| e.into_inner());
        // Keys come from the OS's random source and are never reused while live.
        let key = loop {
            let k = random_key();
            if k != 0 && !table.contains_key(&k) {
                break k;
            }
        };
        let inner = Arc::new(MrInner::new(key, self.id, addr, len, access));
        table.insert(key, inner.clone());
        Ok(Box::new(SoftMr {
            dev: self.dev.clone(),
            inner,
        }))
    }

    fn reg_dmabuf_mr(
        &self,
        _fd: RawFd,
        _offset: u64,
        _len: usize,
        _iova: u64,
        _access: AccessFlags,
    ) -> Result<Box<dyn MrOps>> {
        Err(FabricError::Unsupported {
            verb: "reg_dmabuf_mr",
            provider: "soft",
        })
    }

    fn create_qp(&self, init: QpInit<'_>) -> Result<Box<dyn QpOps>> {
        let inner = QpInner::create(&self.dev, self.id, &init)?;
        Ok(Box::new(SoftQp { inner }))
    }

    fn create_dct(
        &self,
        cq: &Arc<dyn CqOps>,
        access: AccessFlags,
        dc_key: u64,
    ) -> Result<Box<dyn DctOps>> {
        let cq = soft_cq(cq, "create_dct")?;
        let inner = DctInner::create(&self.dev, self.id, cq, access, dc_key)?;
        Ok(Box::new(SoftDct {
            inner,
            dev: self.dev.clone(),
        }))
    }
}

/// A registered region; dropping it deregisters.
#[derive(Debug)]
pub(crate) struct SoftMr {
    dev: Arc<DeviceShared>,
    inner: Arc<MrInner>,
}

impl MrOps for SoftMr {
    fn lkey(&self) -> u32 {
        self.inner.key
    }
    fn rkey(&self) -> u32 {
        self.inner.key
    }
    fn addr(&self) -> u64 {
        self.inner.iova
    }
    fn length(&self) -> usize {
        self.inner.len
    }
    fn access(&self) -> AccessFlags {
        self.inner.access
    }
}

impl Drop for SoftMr {
    fn drop(&mut self) {
        // New requests stop finding the key, then placements in flight finish.
        self.dev
            .mrs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.inner.key);
        self.inner.retire();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small packets (ACKs, NAKs, a header before its payload) must never
    /// wait for Nagle's algorithm and the peer's delayed ACK: the responder
    /// side of every connection has `TCP_NODELAY` (the requester side sets
    /// it in `requester::connect`).
    #[test]
    fn accepted_connections_have_tcp_nodelay() {
        let dev = SoftDevice::new(
            "nodelay0".into(),
            Ipv4Addr::LOCALHOST,
            SoftConfig::default(),
        );
        let qpn = dev
            .shared
            .alloc_qpn(|_| Target::Rc(Weak::new()))
            .expect("a listener");
        let port = u16::try_from(qpn >> 8).expect("a port");
        let peer = TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
        // The accept thread registers the connection before serving it.
        let mut accepted = None;
        for _ in 0..10_000 {
            let conns = dev.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = conns.values().next() {
                accepted = Some(s.try_clone().unwrap());
                break;
            }
            drop(conns);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let accepted = accepted.expect("the connection was accepted");
        assert!(accepted.nodelay().unwrap());
        drop(peer);
    }
}
