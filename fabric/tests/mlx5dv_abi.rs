//! The crate's declarations of the DC ABI against the real headers:
//! `hipobj_fabric::ibverbs::abi_ex` (extended QP, address handle, SRQ,
//! from `<infiniband/verbs.h>`) and `hipobj_fabric::ibverbs::mlx5dv::abi`
//! (from `<infiniband/mlx5dv.h>`): every size, alignment and field offset,
//! and every constant the provider passes. Also: the real `libmlx5.so.1`,
//! where installed, exports every symbol the provider resolves.
//!
//! Without the headers (package `libibverbs-dev`) or a C compiler the test
//! is skipped with a message, unless `REQUIRE_IBVERBS_HEADERS` is set (as
//! `.ci/run` does), when it fails instead.

#![forbid(unsafe_code)]

use crate::abi;

use abi::checks::Checks;
use hipobj_fabric::ibverbs::abi_ex::*;
use hipobj_fabric::ibverbs::mlx5dv::abi::*;
use hipobj_fabric::ibverbs::mlx5dv::{loader, Mlx5Lib};
use std::mem::{align_of, offset_of, size_of};

/// Layout of a named C type and the offsets of fields whose names are the
/// same on both sides.
macro_rules! same {
    ($c:ident, $t:ty, $cname:expr, [$($f:ident),* $(,)?]) => {{
        $c.layout($cname, size_of::<$t>(), align_of::<$t>());
        $($c.offset($cname, stringify!($f), offset_of!($t, $f));)*
    }};
}

fn verbs_checks() -> Checks {
    let mut c = Checks::default();
    same!(
        c,
        ibv_rx_hash_conf,
        "struct ibv_rx_hash_conf",
        [
            rx_hash_function,
            rx_hash_key_len,
            rx_hash_key,
            rx_hash_fields_mask
        ]
    );
    same!(
        c,
        ibv_qp_init_attr_ex,
        "struct ibv_qp_init_attr_ex",
        [
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all,
            comp_mask,
            pd,
            xrcd,
            create_flags,
            max_tso_header,
            rwq_ind_tbl,
            rx_hash_conf,
            source_qpn,
            send_ops_flags,
        ]
    );
    same!(c, ibv_ah, "struct ibv_ah", [context, pd, handle]);
    same!(
        c,
        ibv_srq_attr,
        "struct ibv_srq_attr",
        [max_wr, max_sge, srq_limit]
    );
    same!(
        c,
        ibv_srq_init_attr,
        "struct ibv_srq_init_attr",
        [srq_context, attr]
    );
    same!(
        c,
        ibv_srq,
        "struct ibv_srq",
        [
            context,
            srq_context,
            pd,
            handle,
            mutex,
            cond,
            events_completed
        ]
    );
    same!(
        c,
        ibv_qp_ex,
        "struct ibv_qp_ex",
        [
            qp_base,
            comp_mask,
            wr_id,
            wr_flags,
            wr_atomic_cmp_swp,
            wr_atomic_fetch_add,
            wr_bind_mw,
            wr_local_inv,
            wr_rdma_read,
            wr_rdma_write,
            wr_rdma_write_imm,
            wr_send,
            wr_send_imm,
            wr_send_inv,
            wr_send_tso,
            wr_set_ud_addr,
            wr_set_xrc_srqn,
            wr_set_inline_data,
            wr_set_inline_data_list,
            wr_set_sge,
            wr_set_sge_list,
            wr_start,
            wr_complete,
            wr_abort,
            wr_atomic_write,
        ]
    );
    c.constant("IBV_QPT_DRIVER", IBV_QPT_DRIVER.into());
    c.constant("IBV_QP_INIT_ATTR_PD", IBV_QP_INIT_ATTR_PD.into());
    c.constant(
        "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
        IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.into(),
    );
    c.constant("IBV_QP_EX_WITH_RDMA_WRITE", IBV_QP_EX_WITH_RDMA_WRITE);
    c.constant("IBV_QP_EX_WITH_RDMA_READ", IBV_QP_EX_WITH_RDMA_READ);
    c
}

fn mlx5dv_checks() -> Checks {
    let mut c = Checks::default();
    same!(
        c,
        mlx5dv_dci_streams,
        "struct mlx5dv_dci_streams",
        [log_num_concurent, log_num_errored]
    );
    c.layout(
        "struct mlx5dv_dc_init_attr",
        size_of::<mlx5dv_dc_init_attr>(),
        align_of::<mlx5dv_dc_init_attr>(),
    );
    c.offset(
        "struct mlx5dv_dc_init_attr",
        "dc_type",
        offset_of!(mlx5dv_dc_init_attr, dc_type),
    );
    // The anonymous union's members, by their C names.
    c.offset(
        "struct mlx5dv_dc_init_attr",
        "dct_access_key",
        offset_of!(mlx5dv_dc_init_attr, u.dct_access_key),
    );
    c.offset(
        "struct mlx5dv_dc_init_attr",
        "dci_streams",
        offset_of!(mlx5dv_dc_init_attr, u.dci_streams),
    );
    c.member_layout(
        "struct mlx5dv_dc_init_attr",
        "dct_access_key",
        size_of::<u64>(),
        align_of::<u64>(),
    );
    same!(
        c,
        mlx5dv_qp_init_attr,
        "struct mlx5dv_qp_init_attr",
        [comp_mask, create_flags, dc_init_attr, send_ops_flags]
    );
    same!(
        c,
        mlx5dv_qp_ex,
        "struct mlx5dv_qp_ex",
        [
            comp_mask,
            wr_set_dc_addr,
            wr_mr_interleaved,
            wr_mr_list,
            wr_mkey_configure,
            wr_set_mkey_access_flags,
            wr_set_mkey_layout_list,
            wr_set_mkey_layout_interleaved,
            wr_set_mkey_sig_block,
            wr_raw_wqe,
            wr_set_dc_addr_stream,
            wr_memcpy,
            wr_set_mkey_crypto,
        ]
    );
    c.constant("MLX5DV_QP_INIT_ATTR_MASK_DC", MLX5DV_QP_INIT_ATTR_MASK_DC);
    c.constant("MLX5DV_DCTYPE_DCT", MLX5DV_DCTYPE_DCT.into());
    c.constant("MLX5DV_DCTYPE_DCI", MLX5DV_DCTYPE_DCI.into());
    c
}

#[test]
fn extended_verbs_declarations_match_the_real_header() {
    abi::checks::run(&verbs_checks(), "infiniband/verbs.h", "verbs-ex-abi");
}

#[test]
fn mlx5dv_declarations_match_the_real_header() {
    abi::checks::run(&mlx5dv_checks(), "infiniband/mlx5dv.h", "mlx5dv-abi");
}

/// The real libmlx5 (package `ibverbs-providers`) exports every symbol the
/// provider resolves, under the names it resolves them by.
#[test]
fn the_real_libmlx5_exports_what_the_provider_resolves() {
    match Mlx5Lib::open(loader::SONAME) {
        Ok(lib) => assert_eq!(lib.path(), "libmlx5.so.1"),
        Err(why) if why.contains("could not be loaded") => {
            abi::skip_or_fail("mlx5dv_abi (libmlx5)", &why);
        }
        Err(why) => panic!("{why}"),
    }
    assert_eq!(
        loader::SYMBOLS,
        [
            "mlx5dv_is_supported",
            "mlx5dv_create_qp",
            "mlx5dv_qp_ex_from_ibv_qp_ex"
        ]
    );
}
