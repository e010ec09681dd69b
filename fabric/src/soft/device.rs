//! A software device's verbs objects: the device, its protection domains
//! and memory regions. The device's tables (live keys and QPs, TCP
//! listeners whose ports name its QPs) are in [`super::shared`].

use super::config::SoftConfig;
use super::cq::{soft_cq, CqInner, SoftCq};
use super::dct::SoftDct;
use super::hooks;
use super::memory::MrInner;
use super::qp::SoftQp;
use super::responder;
use super::shared::{DctInner, DeviceShared, QpInner};
use super::stats::{Gauge, SoftStats};
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, QpInit, QpOps};
use crate::types::{
    AccessFlags, DeviceInfo, GidEntry, GidType, LinkLayer, Mtu, PortAttr, PortState,
};
use std::net::Ipv4Addr;
use std::os::fd::RawFd;
use std::sync::Arc;

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
            dc_unavailable: None,
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
        };
        SoftDevice {
            shared: Arc::new(DeviceShared::new(ip, config, info, responder::serve)),
        }
    }

    /// A handle on the device's counters.
    pub fn stats(&self) -> SoftStats {
        SoftStats(self.shared.stats.clone())
    }
}

impl Drop for SoftDevice {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl DeviceOps for SoftDevice {
    fn info(&self) -> &DeviceInfo {
        self.shared.info()
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
            inner: Arc::new(CqInner::new(cqe as usize, self.shared.config.cq_spin)),
        }))
    }
}

/// A protection domain: an id that keys and QPs are checked against.
#[derive(Debug)]
pub(crate) struct SoftPd {
    dev: Arc<DeviceShared>,
    id: u64,
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
        let inner = self
            .dev
            .insert_mr(|key| MrInner::new(key, self.id, addr, len, access));
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
        self.dev.remove_mr(self.inner.key);
        let _waiting = self.dev.stats.up(Gauge::DeregistrationsWaiting);
        hooks::retiring(&self.inner);
        self.inner.retire();
    }
}
