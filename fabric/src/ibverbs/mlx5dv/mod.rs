//! DC (Dynamic Connection) on NVIDIA ConnectX through `mlx5dv`:
//! `libmlx5.so.1` loaded with `dlopen()` ([`loader`]), never linked, its
//! structures declared in [`abi`] (checked against Debian's
//! `<infiniband/mlx5dv.h>` by `tests/mlx5dv_abi.rs`).
//!
//! - A **DC initiator** (`dci`) is `mlx5dv_create_qp` with
//!   `IBV_QPT_DRIVER`, `MLX5DV_DCTYPE_DCI` and the extended send
//!   operations RDMA WRITE and READ. It moves RESET → INIT → RTR → RTS with
//!   `ibv_modify_qp` like any QP ([`crate::dc::initiator_to_rts`]). Each
//!   work request goes through the `ibv_qp_ex` builder: `wr_start`, the
//!   opcode (`wr_rdma_write`/`wr_rdma_read` with the rkey and remote
//!   address), `mlx5dv_wr_set_dc_addr` (address handle, remote DCT number,
//!   DC key), `wr_set_sge`, `wr_complete`.
//! - The **address handle** of a target is `ibv_create_ah` from the
//!   target's GID and LID (`ah`): global route with this port's best
//!   GID as source, hop limit 64. Handles are cached per PD (mlx5 copies the
//!   address vector into each work request, so a handle may go as soon as
//!   the post returns; the cache only saves the kernel's address
//!   resolution).
//! - A **DC target** (`dct`) is `mlx5dv_create_qp` with
//!   `MLX5DV_DCTYPE_DCT` and the DC access key, over a small SRQ (the
//!   kernel requires one), moved to INIT (port, access) and RTR (path MTU,
//!   the port's best GID, minimum RNR timer 12), where a DCT stays.
//!
//! Whether a device has DC is decided when it is opened (`support`):
//! libibverbs must have the extended functions, libmlx5 must load, and
//! `mlx5dv_is_supported` must say the device is mlx5's; otherwise
//! [`DeviceInfo::dc_unavailable`](crate::DeviceInfo::dc_unavailable) says
//! which is missing, and creating a DCI or DCT fails with
//! [`FabricError::NotAvailable`] saying the same.

pub mod abi;
mod ah;
pub(super) mod dci;
pub(super) mod dct;
pub mod loader;

pub use dci::VerbsDci;
pub use dct::VerbsDct;
pub use loader::{libmlx5, Mlx5Lib, SONAME};

use super::abi::ibv_device;
use super::inner::{DeviceInner, PdInner};
use super::loader::{DcVerbsFns, IbvLib};
use crate::error::{FabricError, Result};
use crate::gid_table::pick_best_gid;
use crate::types::Mtu;
use ah::AhCache;
use std::fmt;
use std::sync::Arc;

/// A device's DC support: libmlx5, or why there is none.
pub(super) type DcSupport = std::result::Result<Arc<Mlx5Lib>, String>;

/// Whether `dev` (named `name`, from `lib`'s device list) can do DC with
/// `mlx5` (the library, or why it could not be loaded).
pub(super) fn support(
    lib: &IbvLib,
    mlx5: std::result::Result<Arc<Mlx5Lib>, String>,
    dev: *mut ibv_device,
    name: &str,
) -> DcSupport {
    if lib.dc.is_none() {
        return Err(format!(
            "{} lacks the functions DC needs (ibv_create_ah, ibv_create_srq, ibv_qp_to_qp_ex: \
             rdma-core 22 or later)",
            lib.path()
        ));
    }
    let mlx5 = mlx5.map_err(|e| format!("DC needs libmlx5: {e}"))?;
    // SAFETY: `dev` is a device of libibverbs' live list, and libmlx5 is
    // the driver library that libibverbs itself loads for mlx5 devices;
    // mlx5dv_is_supported only reads the device's driver ops.
    if !unsafe { (mlx5.is_supported)(dev) } {
        return Err(format!(
            "{name} is not an mlx5 device (DC needs a ConnectX NIC and its mlx5 driver)"
        ));
    }
    Ok(mlx5)
}

/// Where DC QPs of a PD send from: the port, its best GID and its MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Route {
    pub(super) port: u8,
    pub(super) sgid_index: u8,
    pub(super) mtu: Mtu,
}

impl Route {
    /// The route of `port`: the GID hipObject would pick
    /// ([`pick_best_gid`]) and the active MTU.
    pub(super) fn of(dev: &DeviceInner, port: u8) -> Result<Route> {
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

/// The DC side of one protection domain: libmlx5, the extended verbs and
/// the address-handle cache, shared by the PD's DCIs. Dropped after them
/// (each holds an `Arc`), so its handles go before the PD.
pub(super) struct DcPd {
    mlx5: Arc<Mlx5Lib>,
    fns: DcVerbsFns,
    ahs: AhCache,
    // Last: the PD outlives the handles the cache destroys in its drop.
    pd: Arc<PdInner>,
}

impl fmt::Debug for DcPd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DcPd")
            .field("device", &self.pd.dev.name)
            .field("mlx5", &self.mlx5)
            .field("ahs", &self.ahs)
            .finish()
    }
}

impl DcPd {
    /// The DC side of `pd`, when its device has DC.
    pub(super) fn new(support: &DcSupport, pd: &Arc<PdInner>) -> std::result::Result<DcPd, String> {
        let mlx5 = support.clone()?;
        let fns = pd
            .dev
            .lib
            .dc
            .ok_or_else(|| "libibverbs lacks the functions DC needs".to_string())?;
        Ok(DcPd {
            mlx5,
            fns,
            ahs: AhCache::default(),
            pd: pd.clone(),
        })
    }
}

/// The error for a DC verb on a device without DC.
pub(super) fn not_available(verb: &'static str, why: &str) -> FabricError {
    FabricError::NotAvailable {
        verb,
        why: why.to_string(),
    }
}
