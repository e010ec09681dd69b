//! Whether a device can do DC: [`support`].

use super::super::abi::ibv_device;
use super::super::loader::IbvLib;
use super::loader::Mlx5Lib;
use std::sync::Arc;

/// A device's DC support: libmlx5, or why there is none.
pub(crate) type DcSupport = std::result::Result<Arc<Mlx5Lib>, String>;

/// Whether `dev` (named `name`, from `lib`'s device list) can do DC with
/// `mlx5` (the library, or why it could not be loaded).
pub(crate) fn support(
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
