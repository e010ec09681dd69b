//! The `<infiniband/mlx5dv.h>` ABI the DC support uses, declared by the
//! project (the crate includes no header), checked field by field and
//! constant by constant against Debian's header by `tests/mlx5dv_abi.rs`.
//!
//! `mlx5dv_wr_set_dc_addr` is a `static inline` wrapper over the
//! `wr_set_dc_addr` pointer of `struct mlx5dv_qp_ex`: the provider calls
//! the pointer, as the wrapper does.

#![allow(non_camel_case_types, missing_docs)]

use crate::ibverbs::abi::{ibv_context, ibv_device, ibv_qp, AnyFn};
use crate::ibverbs::abi_ex::{ibv_ah, ibv_qp_ex, ibv_qp_init_attr_ex};
use std::fmt;

/// `MLX5DV_QP_INIT_ATTR_MASK_DC`: `dc_init_attr` is set.
pub const MLX5DV_QP_INIT_ATTR_MASK_DC: u64 = 1 << 1;
/// `MLX5DV_DCTYPE_DCT`: a DC target.
pub const MLX5DV_DCTYPE_DCT: u32 = 1;
/// `MLX5DV_DCTYPE_DCI`: a DC initiator.
pub const MLX5DV_DCTYPE_DCI: u32 = 2;

/// `struct mlx5dv_dci_streams` (never used here: no DCI streams).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_dci_streams {
    pub log_num_concurent: u8,
    pub log_num_errored: u8,
}

/// The anonymous union of `struct mlx5dv_dc_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union mlx5dv_dc_init_attr_u {
    /// The DC key a DCT is created with.
    pub dct_access_key: u64,
    pub dci_streams: mlx5dv_dci_streams,
}

impl fmt::Debug for mlx5dv_dc_init_attr_u {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: the union is 8 bytes of integers; any bits are a valid u64.
        let key = unsafe { self.dct_access_key };
        write!(f, "{{ dct_access_key: {key:#x} }}")
    }
}

/// `struct mlx5dv_dc_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_dc_init_attr {
    /// `enum mlx5dv_dc_type`.
    pub dc_type: u32,
    pub u: mlx5dv_dc_init_attr_u,
}

/// `struct mlx5dv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_qp_init_attr {
    /// `enum mlx5dv_qp_init_attr_mask` bits.
    pub comp_mask: u64,
    pub create_flags: u32,
    pub dc_init_attr: mlx5dv_dc_init_attr,
    pub send_ops_flags: u64,
}

impl mlx5dv_qp_init_attr {
    /// The attributes of a DC QP of `dc_type`, with `key` in the union
    /// (the DCT's access key; 0 for a DCI, whose key goes with each work
    /// request).
    pub fn dc(dc_type: u32, key: u64) -> mlx5dv_qp_init_attr {
        mlx5dv_qp_init_attr {
            comp_mask: MLX5DV_QP_INIT_ATTR_MASK_DC,
            create_flags: 0,
            dc_init_attr: mlx5dv_dc_init_attr {
                dc_type,
                u: mlx5dv_dc_init_attr_u {
                    dct_access_key: key,
                },
            },
            send_ops_flags: 0,
        }
    }
}

/// `mlx5dv_qp_ex::wr_set_dc_addr`.
pub type WrSetDcAddrFn = unsafe extern "C" fn(
    mqp: *mut mlx5dv_qp_ex,
    ah: *mut ibv_ah,
    remote_dctn: u32,
    remote_dc_key: u64,
);

/// `struct mlx5dv_qp_ex`.
#[repr(C)]
pub struct mlx5dv_qp_ex {
    pub comp_mask: u64,
    pub wr_set_dc_addr: Option<WrSetDcAddrFn>,
    pub wr_mr_interleaved: AnyFn,
    pub wr_mr_list: AnyFn,
    pub wr_mkey_configure: AnyFn,
    pub wr_set_mkey_access_flags: AnyFn,
    pub wr_set_mkey_layout_list: AnyFn,
    pub wr_set_mkey_layout_interleaved: AnyFn,
    pub wr_set_mkey_sig_block: AnyFn,
    pub wr_raw_wqe: AnyFn,
    pub wr_set_dc_addr_stream: AnyFn,
    pub wr_memcpy: AnyFn,
    pub wr_set_mkey_crypto: AnyFn,
}

impl fmt::Debug for mlx5dv_qp_ex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mlx5dv_qp_ex")
            .field("comp_mask", &self.comp_mask)
            .finish_non_exhaustive()
    }
}

/// `mlx5dv_create_qp`.
pub type CreateQpFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    qp_attr: *mut ibv_qp_init_attr_ex,
    mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
) -> *mut ibv_qp;
/// `mlx5dv_qp_ex_from_ibv_qp_ex`.
pub type QpExFromIbvQpExFn = unsafe extern "C" fn(qp: *mut ibv_qp_ex) -> *mut mlx5dv_qp_ex;
/// `mlx5dv_is_supported`.
pub type IsSupportedFn = unsafe extern "C" fn(device: *mut ibv_device) -> bool;
