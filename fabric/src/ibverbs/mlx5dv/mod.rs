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
mod dc_pd;
pub(super) mod dci;
pub(super) mod dct;
pub mod loader;
mod route;
mod support;

pub use dci::VerbsDci;
pub use dct::VerbsDct;
pub use loader::{libmlx5, Mlx5Lib, SONAME};

pub(super) use dc_pd::DcPd;
pub(super) use route::Route;
pub(super) use support::{support, DcSupport};

use crate::error::FabricError;

/// The error for a DC verb on a device without DC.
pub(super) fn not_available(verb: &'static str, why: &str) -> FabricError {
    FabricError::NotAvailable {
        verb,
        why: why.to_string(),
    }
}
