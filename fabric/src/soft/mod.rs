//! The software RDMA provider ("soft"): RC and DC semantics over TCP.
//!
//! A soft device is bound to an IPv4 address and has one port whose only
//! GID is that address, IPv4-mapped (`::ffff:a.b.c.d`), as a RoCE v2 NIC's
//! would be. Requests travel over TCP between devices, and the responder
//! side runs inside the process that registered the memory, on threads of
//! the device.
//!
//! # Finding a peer from a token
//!
//! A token names a GID (hence an IPv4 address) and a QP number, nothing
//! else. The soft provider makes the QP number carry the rest: every QP and
//! DCT number is `port << 8 | slot`, where `port` is the TCP port of the
//! device listener that serves it and `slot` one of that listener's 256
//! slots. A requester connects to `gid's IPv4 : qpn >> 8`. Each device binds
//! its own listeners on an ephemeral port, so any number of processes on
//! one host, or devices in one process, coexist with no configuration, and
//! tokens stay in the standard formats.
//!
//! # As strict as hardware
//!
//! See [`responder`] and [`requester`] for the rules: requests to a QP that
//! is not in RTR/RTS, or from a peer it is not connected to, are dropped and
//! time out on the requester (RETRY_EXC_ERR); key, protection-domain,
//! bounds and access violations are remote access errors that move both
//! QPs to ERR; keys are random and never reused while live; deregistration
//! waits for placements in flight; a wrong DC key is dropped.
//!
//! # The same-host path
//!
//! Between two devices on one host, RC WRITEs and READs move their payload
//! by cross-memory attach (`cma`): the responder checks each request as
//! above, grants the range, and the requester copies it straight between
//! the two processes' memory, one copy instead of two through a socket.
//! Every rule holds on both paths; `HIPOBJ_SOFT_CMA=0` turns it off.
//!
//! # Observing it
//!
//! Each device counts what a NIC's hardware counters would show (requests
//! dropped and why, accesses to registered memory in flight, same-host
//! grants outstanding: [`SoftCounters`], read through the [`SoftStats`] of
//! [`SoftProvider::open_ip_observed`]). With the cargo feature `testing`,
//! the module `testing` adds gates that stop the provider's threads at a named
//! point, for tests that must force the path they name.

// In dependency order: each module uses only those above it.
mod cma;
mod completion;
mod config;
mod cq;
mod dct;
mod device;
mod hooks;
mod memory;
pub mod packet;
mod psn;
mod qp;
mod qp_state;
pub mod requester;
pub mod responder;
mod shared;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod timers;

pub use completion::vendor_err;
pub use config::{
    cma_bytes, SoftConfig, CMA_DONE_TIMEOUT, CQ_SPIN, ENV_ADDRS, ENV_CMA, ENV_CQ_SPIN_US,
    ENV_TIMEOUT_SCALE,
};
pub use stats::{SoftCounters, SoftStats};

use crate::error::{FabricError, Result};
use crate::seam::{DeviceOps, Provider};
use crate::verbs::Device;
use device::SoftDevice;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The software provider: one device per configured IPv4 address, named
/// `soft0`, `soft1`, ...; `soft:<ipv4>` opens a device on any local address.
#[derive(Clone, Debug)]
pub struct SoftProvider {
    addrs: Vec<Ipv4Addr>,
    config: SoftConfig,
}

impl Default for SoftProvider {
    fn default() -> SoftProvider {
        SoftProvider::new(vec![Ipv4Addr::LOCALHOST], SoftConfig::default())
    }
}

impl SoftProvider {
    /// A provider with devices on `addrs`.
    pub fn new(addrs: Vec<Ipv4Addr>, config: SoftConfig) -> SoftProvider {
        SoftProvider { addrs, config }
    }

    /// From `HIPOBJ_SOFT_ADDRS` (default `127.0.0.1`) and
    /// `HIPOBJ_SOFT_TIMEOUT_SCALE`.
    pub fn from_env() -> Result<SoftProvider> {
        let addrs = match std::env::var(ENV_ADDRS) {
            Ok(v) if !v.trim().is_empty() => v
                .split(',')
                .map(|a| {
                    a.trim().parse::<Ipv4Addr>().map_err(|_| {
                        FabricError::invalid(
                            "soft provider",
                            format!("{ENV_ADDRS}: {a:?} is not an IPv4 address"),
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            _ => vec![Ipv4Addr::LOCALHOST],
        };
        Ok(SoftProvider::new(addrs, SoftConfig::from_env()))
    }

    /// Opens a soft device bound to `ip`.
    pub fn open_ip(&self, ip: Ipv4Addr) -> Device {
        self.open_ip_observed(ip).0
    }

    /// Opens a soft device bound to `ip`, with a handle on its counters
    /// (requests dropped and why, accesses in flight, same-host grants:
    /// [`SoftCounters`]).
    pub fn open_ip_observed(&self, ip: Ipv4Addr) -> (Device, SoftStats) {
        let name = match self.addrs.iter().position(|a| *a == ip) {
            Some(i) => format!("soft{i}"),
            None => format!("soft:{ip}"),
        };
        let dev = SoftDevice::new(name, ip, self.config);
        let stats = dev.stats();
        (Device::from_ops(Arc::new(dev)), stats)
    }

    /// The provider's settings.
    pub fn config(&self) -> SoftConfig {
        self.config
    }
}

impl Provider for SoftProvider {
    fn name(&self) -> &'static str {
        "soft"
    }

    fn device_names(&self) -> Result<Vec<String>> {
        Ok((0..self.addrs.len()).map(|i| format!("soft{i}")).collect())
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        let ip = if let Some(ip) = name.strip_prefix("soft:") {
            ip.parse::<Ipv4Addr>()
                .map_err(|_| FabricError::NoDevice(format!("{name}: not an IPv4 address")))?
        } else {
            name.strip_prefix("soft")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| self.addrs.get(i).copied())
                .ok_or_else(|| FabricError::NoDevice(format!("no soft device named {name:?}")))?
        };
        Ok(Arc::new(SoftDevice::new(name.to_string(), ip, self.config)))
    }
}
