//! The open RDMA device: its context, protection domain, port, GID, and the
//! vendor whose QP attributes apply.

use crate::error::{Error, Result};
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::{Device, Gid, ProtectionDomain};

pub use crate::select::{VENDOR_BROADCOM, VENDOR_PENSANDO};

/// The device init opened.
#[derive(Debug)]
pub struct RdmaDevice {
    /// Protection domain every buffer and QP lives in.
    pub pd: ProtectionDomain,
    /// The context.
    pub device: Device,
    /// Port (always 1, as hipObject).
    pub port: u8,
    /// The chosen GID and its index.
    pub gid: Gid,
    /// Index of `gid` in the port's table.
    pub gid_index: u8,
    /// PCI vendor id, read once.
    pub vendor_id: u32,
}

impl RdmaDevice {
    /// Opens `name`, on port 1, choosing the best GID.
    pub(crate) fn open(provider: &dyn Provider, name: &str) -> Result<RdmaDevice> {
        let device = Device::open(provider, name)?;
        let port = 1;
        let attr = device.query_port(port)?;
        if attr.state != hipobj_fabric::PortState::Active {
            tracing::warn!(device = name, state = ?attr.state, "port 1 is not active");
        }
        let table = device.gid_table(port)?;
        let index = crate::select::pick_best_gid(&table);
        let gid = table
            .iter()
            .find(|e| e.index == index)
            .map(|e| e.gid)
            .ok_or_else(|| {
                Error::new(
                    crate::OpError::NicNotFound,
                    format!("{name} has no GID at index {index}"),
                )
            })?;
        let gid_index = u8::try_from(index)
            .map_err(|_| Error::rdma(format!("GID index {index} exceeds 255")))?;
        let pd = device.alloc_pd()?;
        let vendor_id = device.info().vendor_id;
        tracing::info!(device = name, provider = provider.name(), gid = ?gid, gid_index, vendor = format_args!("{vendor_id:#06x}"), "RDMA device open");
        Ok(RdmaDevice {
            pd,
            device,
            port,
            gid,
            gid_index,
            vendor_id,
        })
    }

    /// The attributes a QP of this device connects with: hipObject's, with
    /// the vendor's adjustments (today bnxt and ionic use the same values).
    pub fn rc_params(&self) -> RcParams {
        // READ depth as deep as the device allows, at most hipObject's 16.
        let p = RcParams {
            port: self.port,
            gid_index: self.gid_index,
            ..RcParams::default()
        }
        .within(self.device.info());
        match self.vendor_id {
            VENDOR_BROADCOM => bnxt_params(p),
            VENDOR_PENSANDO => ionic_params(p),
            _ => p,
        }
    }
}

/// Broadcom bnxt_re: the generic values (timeout 14, 7 retries, MTU 4096).
fn bnxt_params(p: RcParams) -> RcParams {
    p
}

/// AMD Pensando ionic: the generic values.
fn ionic_params(p: RcParams) -> RcParams {
    p
}
