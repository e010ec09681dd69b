//! Where DC QPs of a PD send from: [`Route`].

use super::super::inner::DeviceInner;
use crate::error::{FabricError, Result};
use crate::gid_table::pick_best_gid;
use crate::types::Mtu;

/// Where DC QPs of a PD send from: the port, its best GID and its MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) port: u8,
    pub(crate) sgid_index: u8,
    pub(crate) mtu: Mtu,
}

impl Route {
    /// The route of `port`: the GID hipObject would pick
    /// ([`pick_best_gid`]) and the active MTU.
    pub(crate) fn of(dev: &DeviceInner, port: u8) -> Result<Route> {
        let attr = dev.query_port_raw(port)?;
        let mtu = Mtu::from_raw(attr.active_mtu).unwrap_or_default();
        let index = pick_best_gid(&dev.gid_table(port)?);
        let sgid_index = u8::try_from(index).map_err(|_| {
            FabricError::invalid("ibv_create_ah", format!("GID index {index} over 255"))
        })?;
        Ok(Route {
            port,
            sgid_index,
            mtu,
        })
    }
}
