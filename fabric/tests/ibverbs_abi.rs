//! The crate's own libibverbs ABI declarations (`hipobj_fabric::ibverbs::abi`)
//! against the real `<infiniband/verbs.h>`: a C program generated into a
//! temporary directory prints the size, alignment and every field offset
//! of every declared structure, and the values of the constants and enums
//! the provider passes through (the seam's `types` use libibverbs' values),
//! and each is compared with the Rust side.
//!
//! Without the header (package `libibverbs-dev`) or a C compiler the test
//! is skipped with a message, unless `REQUIRE_IBVERBS_HEADERS` is set (as
//! `.ci/run` does), when it fails instead.

#![forbid(unsafe_code)]

use crate::abi;

use abi::checks::Checks;

use hipobj_fabric::ibverbs::abi::*;
use hipobj_fabric::{AccessFlags, QpAttrMask, QpState, SendOp, WcStatus};
use hipobj_fabric::{RemoteAddr, WcOpcode};
use std::mem::{align_of, offset_of, size_of};

/// Layout of a named C type and the offsets of fields whose names are
/// the same on both sides.
macro_rules! same {
    ($c:ident, $t:ty, $cname:expr, [$($f:ident),* $(,)?]) => {{
        $c.layout($cname, size_of::<$t>(), align_of::<$t>());
        $($c.offset($cname, stringify!($f), offset_of!($t, $f));)*
    }};
}

fn checks() -> Checks {
    let mut c = Checks::default();

    // union ibv_gid
    same!(c, ibv_gid, "union ibv_gid", [raw, global]);
    c.member_layout(
        "union ibv_gid",
        "global",
        size_of::<ibv_gid_global>(),
        align_of::<ibv_gid_global>(),
    );
    c.offset(
        "union ibv_gid",
        "global.subnet_prefix",
        offset_of!(ibv_gid, global.subnet_prefix),
    );
    c.offset(
        "union ibv_gid",
        "global.interface_id",
        offset_of!(ibv_gid, global.interface_id),
    );

    same!(
        c,
        ibv_device_attr,
        "struct ibv_device_attr",
        [
            fw_ver,
            node_guid,
            sys_image_guid,
            max_mr_size,
            page_size_cap,
            vendor_id,
            vendor_part_id,
            hw_ver,
            max_qp,
            max_qp_wr,
            device_cap_flags,
            max_sge,
            max_sge_rd,
            max_cq,
            max_cqe,
            max_mr,
            max_pd,
            max_qp_rd_atom,
            max_ee_rd_atom,
            max_res_rd_atom,
            max_qp_init_rd_atom,
            max_ee_init_rd_atom,
            atomic_cap,
            max_ee,
            max_rdd,
            max_mw,
            max_raw_ipv6_qp,
            max_raw_ethy_qp,
            max_mcast_grp,
            max_mcast_qp_attach,
            max_total_mcast_qp_attach,
            max_ah,
            max_fmr,
            max_map_per_fmr,
            max_srq,
            max_srq_wr,
            max_srq_sge,
            max_pkeys,
            local_ca_ack_delay,
            phys_port_cnt,
        ]
    );
    c.member_layout("struct ibv_device_attr", "fw_ver", 64, 1);

    same!(
        c,
        ibv_port_attr,
        "struct ibv_port_attr",
        [
            state,
            max_mtu,
            active_mtu,
            gid_tbl_len,
            port_cap_flags,
            max_msg_sz,
            bad_pkey_cntr,
            qkey_viol_cntr,
            pkey_tbl_len,
            lid,
            sm_lid,
            lmc,
            max_vl_num,
            sm_sl,
            subnet_timeout,
            init_type_reply,
            active_width,
            active_speed,
            phys_state,
            link_layer,
            flags,
            port_cap_flags2,
        ]
    );

    same!(
        c,
        ibv_wc,
        "struct ibv_wc",
        [
            wr_id,
            status,
            opcode,
            vendor_err,
            byte_len,
            qp_num,
            src_qp,
            wc_flags,
            pkey_index,
            slid,
            sl,
            dlid_path_bits,
        ]
    );
    // The anonymous union.
    c.offset(
        "struct ibv_wc",
        "imm_data",
        offset_of!(ibv_wc, imm.imm_data),
    );
    c.offset(
        "struct ibv_wc",
        "invalidated_rkey",
        offset_of!(ibv_wc, imm.invalidated_rkey),
    );
    c.member_layout(
        "struct ibv_wc",
        "imm_data",
        size_of::<ibv_imm>(),
        align_of::<ibv_imm>(),
    );

    same!(c, ibv_pd, "struct ibv_pd", [context, handle]);
    same!(
        c,
        ibv_gid_entry,
        "struct ibv_gid_entry",
        [gid, gid_index, port_num, gid_type, ndev_ifindex]
    );
    same!(
        c,
        ibv_mr,
        "struct ibv_mr",
        [context, pd, addr, length, handle, lkey, rkey]
    );
    same!(
        c,
        ibv_global_route,
        "struct ibv_global_route",
        [dgid, flow_label, sgid_index, hop_limit, traffic_class]
    );
    same!(
        c,
        ibv_ah_attr,
        "struct ibv_ah_attr",
        [
            grh,
            dlid,
            sl,
            src_path_bits,
            static_rate,
            is_global,
            port_num
        ]
    );
    same!(
        c,
        ibv_qp_cap,
        "struct ibv_qp_cap",
        [
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data
        ]
    );
    same!(
        c,
        ibv_qp_init_attr,
        "struct ibv_qp_init_attr",
        [qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all]
    );
    same!(
        c,
        ibv_qp_attr,
        "struct ibv_qp_attr",
        [
            qp_state,
            cur_qp_state,
            path_mtu,
            path_mig_state,
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num,
            qp_access_flags,
            cap,
            ah_attr,
            alt_ah_attr,
            pkey_index,
            alt_pkey_index,
            en_sqd_async_notify,
            sq_draining,
            max_rd_atomic,
            max_dest_rd_atomic,
            min_rnr_timer,
            port_num,
            timeout,
            retry_cnt,
            rnr_retry,
            alt_port_num,
            alt_timeout,
            rate_limit,
        ]
    );
    same!(c, ibv_sge, "struct ibv_sge", [addr, length, lkey]);

    // struct ibv_send_wr, with its unions.
    same!(
        c,
        ibv_send_wr,
        "struct ibv_send_wr",
        [wr_id, next, sg_list, num_sge, opcode, send_flags, wr, qp_type]
    );
    let sw = "struct ibv_send_wr";
    c.offset(sw, "imm_data", offset_of!(ibv_send_wr, imm.imm_data));
    c.offset(
        sw,
        "invalidate_rkey",
        offset_of!(ibv_send_wr, imm.invalidated_rkey),
    );
    c.member_layout(sw, "imm_data", size_of::<ibv_imm>(), align_of::<ibv_imm>());
    c.member_layout(
        sw,
        "wr",
        size_of::<ibv_send_wr_wr>(),
        align_of::<ibv_send_wr_wr>(),
    );
    c.member_layout(
        sw,
        "wr.rdma",
        size_of::<ibv_send_wr_rdma>(),
        align_of::<ibv_send_wr_rdma>(),
    );
    c.member_layout(
        sw,
        "wr.atomic",
        size_of::<ibv_send_wr_atomic>(),
        align_of::<ibv_send_wr_atomic>(),
    );
    c.member_layout(
        sw,
        "wr.ud",
        size_of::<ibv_send_wr_ud>(),
        align_of::<ibv_send_wr_ud>(),
    );
    c.offset(
        sw,
        "wr.rdma.remote_addr",
        offset_of!(ibv_send_wr, wr.rdma.remote_addr),
    );
    c.offset(sw, "wr.rdma.rkey", offset_of!(ibv_send_wr, wr.rdma.rkey));
    c.offset(
        sw,
        "wr.atomic.remote_addr",
        offset_of!(ibv_send_wr, wr.atomic.remote_addr),
    );
    c.offset(
        sw,
        "wr.atomic.compare_add",
        offset_of!(ibv_send_wr, wr.atomic.compare_add),
    );
    c.offset(
        sw,
        "wr.atomic.swap",
        offset_of!(ibv_send_wr, wr.atomic.swap),
    );
    c.offset(
        sw,
        "wr.atomic.rkey",
        offset_of!(ibv_send_wr, wr.atomic.rkey),
    );
    c.offset(sw, "wr.ud.ah", offset_of!(ibv_send_wr, wr.ud.ah));
    c.offset(
        sw,
        "wr.ud.remote_qpn",
        offset_of!(ibv_send_wr, wr.ud.remote_qpn),
    );
    c.offset(
        sw,
        "wr.ud.remote_qkey",
        offset_of!(ibv_send_wr, wr.ud.remote_qkey),
    );
    c.member_layout(
        sw,
        "qp_type",
        size_of::<ibv_send_wr_qp_type>(),
        align_of::<ibv_send_wr_qp_type>(),
    );
    c.offset(
        sw,
        "qp_type.xrc.remote_srqn",
        offset_of!(ibv_send_wr, qp_type.xrc.remote_srqn),
    );
    c.member_layout(
        sw,
        "bind_mw",
        size_of::<ibv_send_wr_bind_mw>(),
        align_of::<ibv_send_wr_bind_mw>(),
    );
    c.member_layout(
        sw,
        "tso",
        size_of::<ibv_send_wr_tso>(),
        align_of::<ibv_send_wr_tso>(),
    );
    c.offset(sw, "bind_mw", offset_of!(ibv_send_wr, ext));
    c.offset(sw, "bind_mw.mw", offset_of!(ibv_send_wr, ext.bind_mw.mw));
    c.offset(
        sw,
        "bind_mw.rkey",
        offset_of!(ibv_send_wr, ext.bind_mw.rkey),
    );
    c.offset(
        sw,
        "bind_mw.bind_info",
        offset_of!(ibv_send_wr, ext.bind_mw.bind_info),
    );
    c.offset(sw, "tso", offset_of!(ibv_send_wr, ext.tso));
    c.offset(sw, "tso.hdr", offset_of!(ibv_send_wr, ext.tso.hdr));
    c.offset(sw, "tso.hdr_sz", offset_of!(ibv_send_wr, ext.tso.hdr_sz));
    c.offset(sw, "tso.mss", offset_of!(ibv_send_wr, ext.tso.mss));
    same!(
        c,
        ibv_mw_bind_info,
        "struct ibv_mw_bind_info",
        [mr, addr, length, mw_access_flags]
    );

    same!(
        c,
        ibv_recv_wr,
        "struct ibv_recv_wr",
        [wr_id, next, sg_list, num_sge]
    );
    same!(
        c,
        ibv_qp,
        "struct ibv_qp",
        [
            context,
            qp_context,
            pd,
            send_cq,
            recv_cq,
            srq,
            handle,
            qp_num,
            state,
            qp_type,
            mutex,
            cond,
            events_completed,
        ]
    );
    same!(
        c,
        ibv_comp_channel,
        "struct ibv_comp_channel",
        [context, fd, refcnt]
    );
    same!(
        c,
        ibv_cq,
        "struct ibv_cq",
        [
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed,
        ]
    );
    same!(
        c,
        _ibv_device_ops,
        "struct _ibv_device_ops",
        [_dummy1, _dummy2]
    );
    same!(
        c,
        ibv_device,
        "struct ibv_device",
        [
            _ops,
            node_type,
            transport_type,
            name,
            dev_name,
            dev_path,
            ibdev_path
        ]
    );
    same!(
        c,
        ibv_context_ops,
        "struct ibv_context_ops",
        [
            _compat_query_device,
            _compat_query_port,
            _compat_alloc_pd,
            _compat_dealloc_pd,
            _compat_reg_mr,
            _compat_rereg_mr,
            _compat_dereg_mr,
            alloc_mw,
            bind_mw,
            dealloc_mw,
            _compat_create_cq,
            poll_cq,
            req_notify_cq,
            _compat_cq_event,
            _compat_resize_cq,
            _compat_destroy_cq,
            _compat_create_srq,
            _compat_modify_srq,
            _compat_query_srq,
            _compat_destroy_srq,
            post_srq_recv,
            _compat_create_qp,
            _compat_query_qp,
            _compat_modify_qp,
            _compat_destroy_qp,
            post_send,
            post_recv,
            _compat_create_ah,
            _compat_destroy_ah,
            _compat_attach_mcast,
            _compat_detach_mcast,
            _compat_async_event,
        ]
    );
    same!(
        c,
        ibv_context,
        "struct ibv_context",
        [
            device,
            ops,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex,
            abi_compat
        ]
    );
    // Reached the way the inline functions reach them.
    c.offset(
        "struct ibv_context",
        "ops.poll_cq",
        offset_of!(ibv_context, ops.poll_cq),
    );
    c.offset(
        "struct ibv_context",
        "ops.post_send",
        offset_of!(ibv_context, ops.post_send),
    );
    c.offset(
        "struct ibv_context",
        "ops.post_recv",
        offset_of!(ibv_context, ops.post_recv),
    );
    same!(
        c,
        verbs_context,
        "struct verbs_context",
        [
            query_port,
            advise_mr,
            alloc_null_mr,
            read_counters,
            attach_counters_point_flow,
            create_counters,
            destroy_counters,
            reg_dm_mr,
            alloc_dm,
            free_dm,
            modify_flow_action_esp,
            destroy_flow_action,
            create_flow_action_esp,
            modify_qp_rate_limit,
            alloc_parent_domain,
            dealloc_td,
            alloc_td,
            modify_cq,
            post_srq_ops,
            destroy_rwq_ind_table,
            create_rwq_ind_table,
            destroy_wq,
            modify_wq,
            create_wq,
            query_rt_values,
            create_cq_ex,
            query_device_ex,
            ibv_destroy_flow,
            ABI_placeholder2,
            ibv_create_flow,
            ABI_placeholder1,
            open_qp,
            create_qp_ex,
            get_srq_num,
            create_srq_ex,
            open_xrcd,
            close_xrcd,
            _ABI_placeholder3,
            sz,
            context,
        ]
    );
    c.offset(
        "struct verbs_context",
        "priv",
        offset_of!(verbs_context, priv_),
    );
    // What verbs_get_ctx_op(ctx, query_port) computes.
    c.add(
        "query_port reach",
        "sizeof(struct verbs_context) - offsetof(struct verbs_context, query_port)",
        (size_of::<verbs_context>() - offset_of!(verbs_context, query_port)) as u64,
    );

    constants(&mut c);
    c
}

/// The constants and enum values the provider passes through unchanged.
fn constants(c: &mut Checks) {
    c.constant("__VERBS_ABI_IS_EXTENDED", VERBS_ABI_IS_EXTENDED as u64);
    c.constant("IBV_QPT_RC", IBV_QPT_RC.into());
    c.constant("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED.into());
    c.constant("IBV_WC_WITH_IMM", IBV_WC_WITH_IMM.into());
    c.constant(
        "IBV_ACCESS_OPTIONAL_RANGE",
        IBV_ACCESS_OPTIONAL_RANGE.into(),
    );
    c.constant(
        "IBV_LINK_LAYER_INFINIBAND",
        IBV_LINK_LAYER_INFINIBAND.into(),
    );
    c.constant("IBV_LINK_LAYER_ETHERNET", IBV_LINK_LAYER_ETHERNET.into());
    c.constant("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX as u64);
    c.constant("IBV_SYSFS_PATH_MAX", IBV_SYSFS_PATH_MAX as u64);

    for (name, v) in [
        ("IBV_ACCESS_LOCAL_WRITE", AccessFlags::LOCAL_WRITE),
        ("IBV_ACCESS_REMOTE_WRITE", AccessFlags::REMOTE_WRITE),
        ("IBV_ACCESS_REMOTE_READ", AccessFlags::REMOTE_READ),
        ("IBV_ACCESS_REMOTE_ATOMIC", AccessFlags::REMOTE_ATOMIC),
        ("IBV_ACCESS_MW_BIND", AccessFlags::MW_BIND),
        ("IBV_ACCESS_ZERO_BASED", AccessFlags::ZERO_BASED),
        ("IBV_ACCESS_ON_DEMAND", AccessFlags::ON_DEMAND),
        ("IBV_ACCESS_RELAXED_ORDERING", AccessFlags::RELAXED_ORDERING),
    ] {
        c.constant(name, v.bits().into());
    }
    for (name, v) in [
        ("IBV_QP_STATE", QpAttrMask::STATE),
        ("IBV_QP_CUR_STATE", QpAttrMask::CUR_STATE),
        ("IBV_QP_ACCESS_FLAGS", QpAttrMask::ACCESS_FLAGS),
        ("IBV_QP_PKEY_INDEX", QpAttrMask::PKEY_INDEX),
        ("IBV_QP_PORT", QpAttrMask::PORT),
        ("IBV_QP_QKEY", QpAttrMask::QKEY),
        ("IBV_QP_AV", QpAttrMask::AV),
        ("IBV_QP_PATH_MTU", QpAttrMask::PATH_MTU),
        ("IBV_QP_TIMEOUT", QpAttrMask::TIMEOUT),
        ("IBV_QP_RETRY_CNT", QpAttrMask::RETRY_CNT),
        ("IBV_QP_RNR_RETRY", QpAttrMask::RNR_RETRY),
        ("IBV_QP_RQ_PSN", QpAttrMask::RQ_PSN),
        ("IBV_QP_MAX_QP_RD_ATOMIC", QpAttrMask::MAX_QP_RD_ATOMIC),
        ("IBV_QP_MIN_RNR_TIMER", QpAttrMask::MIN_RNR_TIMER),
        ("IBV_QP_SQ_PSN", QpAttrMask::SQ_PSN),
        ("IBV_QP_MAX_DEST_RD_ATOMIC", QpAttrMask::MAX_DEST_RD_ATOMIC),
        ("IBV_QP_DEST_QPN", QpAttrMask::DEST_QPN),
    ] {
        c.constant(name, v.bits().into());
    }
    for (name, v) in [
        ("IBV_QPS_RESET", QpState::Reset),
        ("IBV_QPS_INIT", QpState::Init),
        ("IBV_QPS_RTR", QpState::Rtr),
        ("IBV_QPS_RTS", QpState::Rts),
        ("IBV_QPS_SQD", QpState::Sqd),
        ("IBV_QPS_SQE", QpState::Sqe),
        ("IBV_QPS_ERR", QpState::Err),
    ] {
        c.constant(name, v as u64);
    }
    let ra = RemoteAddr { addr: 0, rkey: 0 };
    for (name, op) in [
        ("IBV_WR_RDMA_WRITE", SendOp::RdmaWrite(ra)),
        (
            "IBV_WR_RDMA_WRITE_WITH_IMM",
            SendOp::RdmaWriteWithImm(ra, 0),
        ),
        ("IBV_WR_SEND", SendOp::Send),
        ("IBV_WR_SEND_WITH_IMM", SendOp::SendWithImm(0)),
        ("IBV_WR_RDMA_READ", SendOp::RdmaRead(ra)),
    ] {
        c.constant(name, op.raw().into());
    }
    for (name, v) in [
        ("IBV_WC_SEND", WcOpcode::Send),
        ("IBV_WC_RDMA_WRITE", WcOpcode::RdmaWrite),
        ("IBV_WC_RDMA_READ", WcOpcode::RdmaRead),
        ("IBV_WC_RECV", WcOpcode::Recv),
        ("IBV_WC_RECV_RDMA_WITH_IMM", WcOpcode::RecvRdmaWithImm),
    ] {
        c.constant(name, v as u64);
    }
    for (name, v) in [
        ("IBV_WC_SUCCESS", WcStatus::Success),
        ("IBV_WC_LOC_LEN_ERR", WcStatus::LocLenErr),
        ("IBV_WC_LOC_QP_OP_ERR", WcStatus::LocQpOpErr),
        ("IBV_WC_LOC_PROT_ERR", WcStatus::LocProtErr),
        ("IBV_WC_WR_FLUSH_ERR", WcStatus::WrFlushErr),
        ("IBV_WC_LOC_ACCESS_ERR", WcStatus::LocAccessErr),
        ("IBV_WC_REM_INV_REQ_ERR", WcStatus::RemInvReqErr),
        ("IBV_WC_REM_ACCESS_ERR", WcStatus::RemAccessErr),
        ("IBV_WC_REM_OP_ERR", WcStatus::RemOpErr),
        ("IBV_WC_RETRY_EXC_ERR", WcStatus::RetryExcErr),
        ("IBV_WC_RNR_RETRY_EXC_ERR", WcStatus::RnrRetryExcErr),
        ("IBV_WC_FATAL_ERR", WcStatus::FatalErr),
        ("IBV_WC_RESP_TIMEOUT_ERR", WcStatus::RespTimeoutErr),
        ("IBV_WC_GENERAL_ERR", WcStatus::GeneralErr),
        ("IBV_WC_TM_ERR", WcStatus::TmErr),
        ("IBV_WC_TM_RNDV_INCOMPLETE", WcStatus::TmRndvIncomplete),
    ] {
        c.constant(name, v as u64);
    }
    for (name, v) in [
        ("IBV_MTU_256", 1u64),
        ("IBV_MTU_1024", 3),
        ("IBV_MTU_4096", 5),
        ("IBV_PORT_DOWN", 1),
        ("IBV_PORT_ACTIVE", 4),
    ] {
        c.constant(name, v);
    }
}

#[test]
fn rust_declarations_match_the_real_header() {
    abi::checks::run(&checks(), "infiniband/verbs.h", "ibverbs_abi");
}
