//! The verbs provider against a fake libibverbs (`tests/abi/fake_libibverbs.c`,
//! compiled here against the real `<infiniband/verbs.h>`), which logs every
//! call with its arguments. Without a NIC this is how the provider's side
//! of the ABI is checked end to end: what it passes to each verb (QP
//! attributes and masks, work requests, access flags), how it reaches the
//! provider entries (`query_port` through `verbs_context`, `poll_cq`,
//! `post_send` and `post_recv` through the context's ops table), how it
//! maps results and errors back, and that it destroys everything, children
//! first.
//!
//! Skipped (with a message) without the header or a C compiler, unless
//! `REQUIRE_IBVERBS_HEADERS` is set.

mod abi;
mod fakelib;

use abi::Fake;
use fakelib::FakeLib;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::{
    AccessFlags, Device, FabricError, Gid, GidType, LinkLayer, Mtu, PortState, QpAttr, QpAttrMask,
    QpCap, QpState, QpType, RecvWr, RemoteAddr, SendOp, SendWr, WcOpcode, WcStatus,
};
use std::net::Ipv4Addr;
use std::time::Duration;

const RW: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0,
);

fn no_device_message(r: hipobj_fabric::Result<Vec<String>>) -> String {
    match r {
        Err(FabricError::NoDevice(m)) => m,
        other => panic!("expected NoDevice, got {other:?}"),
    }
}

#[test]
fn device_list_failures_are_no_device_with_the_reason() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    fake.set_mode(2);
    assert_eq!(
        no_device_message(p.device_names()),
        "libibverbs found no RDMA devices: the kernel has no InfiniBand support (ENOSYS)"
    );
    fake.set_mode(3);
    let m = no_device_message(p.device_names());
    assert!(
        m.contains("ibv_get_device_list failed") && m.contains("Permission denied"),
        "{m}"
    );
    fake.set_mode(1);
    let m = no_device_message(p.device_names());
    assert!(m.contains("found no RDMA devices: none is present"), "{m}");
    assert!(matches!(
        p.open_device("fake0"),
        Err(FabricError::NoDevice(_))
    ));
    // The empty lists were freed.
    assert_eq!(fake.live_objects(), 0);
    fake.set_mode(0);
    assert_eq!(p.device_names().unwrap(), vec!["fake0".to_string()]);
    let e = p.open_device("mlx5_0").unwrap_err();
    assert!(
        e.to_string()
            .contains("no RDMA device named \"mlx5_0\" (libibverbs lists: fake0)"),
        "{e}"
    );
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn a_library_without_a_required_symbol_is_refused() {
    let Some(fake) = FakeLib::get(Fake::NoCreateQp) else {
        return;
    };
    let m = no_device_message(fake.provider().device_names());
    assert!(m.contains("has no symbol ibv_create_qp"), "{m}");
}

#[test]
fn optional_symbols_absent_mean_no_dmabuf_and_the_plain_reg_mr() {
    let Some(fake) = FakeLib::get(Fake::NoOptional) else {
        return;
    };
    let p = fake.provider();
    let lib = p.library().unwrap();
    assert!(!lib.has_reg_dmabuf_mr() && !lib.has_reg_mr_iova2());
    assert!(!lib.has_comp_channel());
    assert!(lib.symbols().contains(&("ibv_reg_dmabuf_mr", false)));
    assert!(lib.symbols().contains(&("ibv_get_cq_event", false)));
    assert!(lib.symbols().contains(&("ibv_reg_mr_iova2", false)));
    let dev = Device::open(&p, "fake0").unwrap();
    assert!(!dev.info().supports_dmabuf);
    let pd = dev.alloc_pd().unwrap();
    let e = pd.reg_dmabuf_mr(3, 0, 4096, 0x1000, RW).unwrap_err();
    assert!(matches!(e, FabricError::Unsupported { .. }), "{e:?}");
    let buf = pd
        .alloc_buffer(4096, RW | AccessFlags::RELAXED_ORDERING)
        .unwrap();
    // Without ibv_reg_mr_iova2 the optional-range flag goes to ibv_reg_mr.
    assert_eq!(fake.line("reg_mr"), "reg_mr len=4096 access=0x100007");
    drop(buf);
    drop(pd);
    drop(dev);
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn optional_symbols_present_give_dmabuf_and_iova2_for_optional_flags() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    let lib = p.library().unwrap();
    assert!(lib.has_reg_dmabuf_mr() && lib.has_reg_mr_iova2());
    let dev = Device::open(&p, "fake0").unwrap();
    assert!(dev.info().supports_dmabuf);
    let pd = dev.alloc_pd().unwrap();
    let mr = pd
        .reg_dmabuf_mr(7, 4096, 8192, 0x7f00_0000_1000, RW)
        .unwrap();
    assert_eq!(
        fake.line("reg_dmabuf_mr"),
        "reg_dmabuf_mr offset=4096 len=8192 iova=0x7f0000001000 fd=7 access=0x7"
    );
    // The seam's addr is the iova (libibverbs puts the offset in mr->addr).
    assert_eq!(mr.addr(), 0x7f00_0000_1000);
    assert_eq!(mr.len(), 8192);
    assert_eq!(mr.rkey(), mr.lkey() + 0x800);
    let e = pd.reg_dmabuf_mr(-1, 0, 4096, 0, RW).unwrap_err();
    assert_eq!(e.errno(), libc::EBADF, "{e:?}");
    assert!(e.to_string().starts_with("ibv_reg_dmabuf_mr: "), "{e}");
    let plain = pd.alloc_buffer(4096, RW).unwrap();
    assert_eq!(fake.line("reg_mr "), "reg_mr len=4096 access=0x7");
    let relaxed = pd
        .alloc_buffer(4096, RW | AccessFlags::RELAXED_ORDERING)
        .unwrap();
    assert_eq!(
        fake.line("reg_mr_iova2"),
        "reg_mr_iova2 len=4096 iova_is_addr=1 access=0x100007"
    );
    assert_eq!(plain.mr().addr(), plain.buf().as_ptr() as u64);
    // A failed registration carries libibverbs' errno.
    // SAFETY: a zero-length registration touches no memory (the fake
    // refuses it with EINVAL, as libibverbs would).
    let e = unsafe { pd.reg_mr(plain.buf().as_ptr(), 0, RW) }.unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    drop((mr, plain, relaxed, pd, dev));
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn port_queries_go_through_verbs_context_or_the_exported_function() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    let dev = Device::open(&p, "fake0").unwrap();
    let port = dev.query_port(1).unwrap();
    assert_eq!(fake.line("query_port"), "query_port_ex port=1 len=52");
    assert_eq!(port.state, PortState::Active);
    assert_eq!(port.max_mtu, Mtu::Mtu4096);
    assert_eq!(port.active_mtu, Mtu::Mtu1024);
    assert_eq!(port.gid_tbl_len, 4);
    assert_eq!(port.max_msg_sz, 1 << 31);
    assert_eq!(port.link_layer, LinkLayer::Ethernet);
    let e = dev.query_port(2).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(e.to_string().starts_with("ibv_query_port: "), "{e}");
    drop(dev);

    // A context that is not a verbs_context: the exported ibv_query_port.
    fake.set_extended(0);
    fake.clear_log();
    let dev = Device::open(&p, "fake0").unwrap();
    let port = dev.query_port(1).unwrap();
    assert_eq!(fake.line("query_port"), "query_port_compat port=1");
    assert_eq!(port.active_mtu, Mtu::Mtu2048);
    drop(dev);
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn the_gid_table_skips_unconfigured_entries_and_reads_types_from_sysfs() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let root = abi::temp_dir("fake-sysfs");
    let types = root.join("fake0/ports/1/gid_attrs/types");
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(types.join("0"), "IB/RoCE v1\n").unwrap();
    std::fs::write(types.join("2"), "RoCE v2\n").unwrap();
    let p = fake.provider().sysfs_root(&root);
    let dev = Device::open(&p, "fake0").unwrap();
    let table = dev.gid_table(1).unwrap();
    assert_eq!(table.len(), 2, "{table:?}");
    assert_eq!(table[0].index, 0);
    assert_eq!(table[0].gid_type, GidType::RoceV1);
    assert!(table[0].gid.is_link_local());
    assert_eq!(table[1].index, 2);
    assert_eq!(table[1].gid_type, GidType::RoceV2);
    assert_eq!(table[1].gid, Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)));
    // Without the sysfs files the types are unknown, the GIDs still there.
    let p = fake.provider().sysfs_root(root.join("nowhere"));
    let dev2 = Device::open(&p, "fake0").unwrap();
    let table = dev2.gid_table(1).unwrap();
    assert!(table.iter().all(|g| g.gid_type == GidType::Unknown));
    drop((dev, dev2));
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn an_rc_qp_is_created_connected_used_and_torn_down_as_libibverbs_expects() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    assert_eq!(p.name(), "verbs");
    let dev = Device::open(&p, "fake0").unwrap();
    let info = dev.info().clone();
    assert_eq!(
        (info.vendor_id, info.vendor_part_id, info.phys_port_cnt),
        (0x14e4, 0x1750, 1)
    );
    assert!(!info.supports_dc);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16).unwrap();
    assert_eq!(
        fake.line("create_cq"),
        "create_cq cqe=16 channel=set vector=0"
    );
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq, QpCap::default())
        .unwrap();
    assert_eq!(
        fake.line("create_qp"),
        "create_qp type=2 send_wr=8 recv_wr=8 send_sge=1 recv_sge=1 inline=0 sq_sig_all=0 \
         same_cq=1 srq=null"
    );
    assert_eq!(qp.qp_type(), QpType::Rc);
    let qpn = qp.qp_num();
    assert!(qpn >= 0x100);
    // No libmlx5 goes with this libibverbs: no DC, and the reason.
    let why = info.dc_unavailable.clone().expect("a reason");
    assert!(
        why.starts_with("DC needs libmlx5: no libmlx5 is named for the libibverbs at "),
        "{why}"
    );
    assert!(why.ends_with("(VerbsProvider::mlx5_library)"), "{why}");
    let e = pd
        .create_qp(QpType::DcInitiator, &cq, &cq, QpCap::default())
        .unwrap_err();
    assert_eq!(e.errno(), libc::EOPNOTSUPP);
    assert_eq!(
        e.to_string(),
        format!("create_qp (DC initiator): not available: {why}")
    );
    let e = pd.create_dct(&cq, RW, 1).unwrap_err();
    assert_eq!(e.to_string(), format!("create_dct: not available: {why}"));

    // RESET -> INIT -> RTR -> RTS with hipObject's attributes.
    fake.clear_log();
    rc::to_init(&qp, 1, AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE).unwrap();
    let peer = RcPeer {
        qp_num: 0xabcdef,
        gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 7, 9)),
        lid: 0,
    };
    let params = RcParams {
        gid_index: 3,
        ..RcParams::default()
    };
    rc::connect(&qp, &peer, &params).unwrap();
    let log: Vec<String> = fake.lines("modify_qp");
    assert_eq!(log.len(), 3, "{log:#?}");
    // INIT: STATE | ACCESS_FLAGS | PKEY_INDEX | PORT.
    assert!(
        log[0].starts_with(
            "modify_qp mask=0x39 state=1 mtu=3 dest_qpn=0 rq_psn=0 sq_psn=0 access=0x6 pkey=0 \
             port=1 is_global=0 "
        ),
        "{}",
        log[0]
    );
    // RTR: STATE | AV | PATH_MTU | RQ_PSN | MIN_RNR_TIMER | MAX_DEST_RD_ATOMIC | DEST_QPN.
    assert_eq!(
        log[1],
        "modify_qp mask=0x129181 state=2 mtu=5 dest_qpn=0xabcdef rq_psn=0 sq_psn=0 access=0 \
         pkey=0 port=0 is_global=1 dgid=00000000000000000000ffffc0a80709 sgid_index=3 hop=64 \
         tclass=0 flow=0 dlid=0 sl=0 ah_port=1 timeout=0 retry=0 rnr_retry=0 min_rnr=12 \
         rd_atomic=0 dest_rd_atomic=16"
    );
    // RTS: STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC.
    assert!(
        log[2].starts_with("modify_qp mask=0x12e01 state=3 "),
        "{}",
        log[2]
    );
    assert!(
        log[2].ends_with("timeout=14 retry=7 rnr_retry=7 min_rnr=0 rd_atomic=16 dest_rd_atomic=0"),
        "{}",
        log[2]
    );
    let q = qp.query().unwrap();
    assert_eq!(q.qp_state, QpState::Rts);
    assert_eq!(q.dest_qp_num, 0xabcdef);
    assert_eq!(q.path_mtu, Mtu::Mtu4096);
    assert_eq!(q.ah_attr.grh.unwrap().dgid, peer.gid);
    assert_eq!(q.ah_attr.grh.unwrap().sgid_index, 3);
    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 7, 7));
    assert_eq!(qp.state().unwrap(), QpState::Rts);

    // Bits QpAttr has no field for are refused before libibverbs sees them.
    let e = qp
        .modify(
            &QpAttr::default(),
            QpAttrMask::STATE | QpAttrMask::CUR_STATE,
        )
        .unwrap_err();
    assert!(matches!(e, FabricError::Invalid { .. }), "{e:?}");
    // libibverbs' own refusal comes back with its errno.
    let e = rc::to_rts(&qp, &params).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(e.to_string().starts_with("ibv_modify_qp: "), "{e}");

    // Work requests, through the context's ops table.
    let buf = pd.alloc_buffer(4096, RW).unwrap();
    let lkey = buf.mr().lkey();
    let base = buf.mr().addr();
    let remote = RemoteAddr {
        addr: 0x1122_3344_5566,
        rkey: 0x99,
    };
    fake.clear_log();
    let ops = [
        (1u64, SendOp::RdmaWrite(remote), 0, WcOpcode::RdmaWrite),
        (
            2,
            SendOp::RdmaWriteWithImm(remote, 0xdead_beef),
            1,
            WcOpcode::RdmaWrite,
        ),
        (3, SendOp::Send, 2, WcOpcode::Send),
        (4, SendOp::SendWithImm(0x0102_0304), 3, WcOpcode::Send),
        (5, SendOp::RdmaRead(remote), 4, WcOpcode::RdmaRead),
    ];
    for (wr_id, op, _, _) in &ops {
        qp.post_send(&SendWr {
            wr_id: *wr_id,
            op: *op,
            sg_list: vec![buf.sge(64, 128).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap();
    }
    let posted: Vec<String> = fake.lines("post_send");
    for ((wr_id, op, opcode, _), line) in ops.iter().zip(&posted) {
        let imm = match op {
            SendOp::RdmaWriteWithImm(_, i) | SendOp::SendWithImm(i) => i.to_be(),
            _ => 0,
        };
        let (raddr, rkey) = match op {
            SendOp::Send | SendOp::SendWithImm(_) => (0, 0),
            _ => (remote.addr, remote.rkey),
        };
        assert_eq!(
            *line,
            format!(
                "post_send qpn={qpn:#x} wr_id={wr_id:#x} opcode={opcode} flags=0x2 num_sge=1 \
                 sge0={:#x}/128/{lkey:#x} imm={imm:#x} remote={raddr:#x} rkey={rkey:#x} next=null",
                base + 64
            )
        );
    }
    // An unsignaled write completes nothing; a failed one always does.
    qp.post_send(&SendWr {
        wr_id: 6,
        op: SendOp::RdmaWrite(remote),
        sg_list: vec![buf.sge(0, 8).unwrap()],
        signaled: false,
        dc: None,
    })
    .unwrap();
    assert!(fake
        .lines("post_send")
        .iter()
        .any(|l| l.contains("wr_id=0x6 opcode=0 flags=0x0 ")));
    qp.post_send(&SendWr {
        wr_id: 0xbad,
        op: SendOp::RdmaWrite(remote),
        sg_list: vec![buf.sge(0, 8).unwrap()],
        signaled: false,
        dc: None,
    })
    .unwrap();
    let e = qp
        .post_send(&SendWr {
            wr_id: 0xf011,
            op: SendOp::Send,
            sg_list: vec![],
            signaled: true,
            dc: None,
        })
        .unwrap_err();
    assert_eq!(e.errno(), libc::ENOMEM);
    assert!(e.to_string().starts_with("ibv_post_send: "), "{e}");
    qp.post_recv(&RecvWr {
        wr_id: 0x77,
        sg_list: vec![buf.sge(256, 512).unwrap()],
    })
    .unwrap();
    assert_eq!(
        fake.line("post_recv"),
        format!(
            "post_recv qpn={qpn:#x} wr_id=0x77 num_sge=1 sge0={:#x}/512/{lkey:#x} next=null",
            base + 256
        )
    );

    // Completions: 5 sends, 2 receives carrying the immediates, 1 error.
    let wcs = cq.wait_n(8, Duration::from_secs(5)).unwrap();
    assert_eq!(wcs.len(), 8, "{wcs:#?}");
    let mut more = Vec::new();
    assert_eq!(cq.poll(&mut more, 16).unwrap(), 0);
    let sends: Vec<_> = wcs.iter().filter(|w| w.wr_id <= 5).collect();
    for ((wr_id, _, _, opcode), wc) in ops.iter().zip(&sends) {
        assert_eq!(wc.wr_id, *wr_id);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.opcode, *opcode);
        assert_eq!(wc.byte_len, 128);
        assert_eq!(wc.qp_num, qpn);
        assert_eq!(wc.imm_data, None);
    }
    let recvs: Vec<_> = wcs.iter().filter(|w| w.wr_id == 0x7ec).collect();
    assert_eq!(recvs.len(), 2);
    assert_eq!(recvs[0].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(recvs[0].imm_data, Some(0xdead_beef));
    assert_eq!(recvs[1].opcode, WcOpcode::Recv);
    assert_eq!(recvs[1].imm_data, Some(0x0102_0304));
    assert_eq!(recvs[1].byte_len, 128);
    assert_eq!(recvs[1].src_qp, 0x4242);
    let bad = wcs.iter().find(|w| w.wr_id == 0xbad).unwrap();
    assert_eq!(bad.status, WcStatus::RetryExcErr);
    assert_eq!(bad.vendor_err, 0x81);

    // Teardown in an order that would be wrong if handles didn't hold
    // their parents: the device first, the QP last.
    fake.clear_log();
    drop(dev);
    drop(pd);
    drop(cq);
    assert!(
        fake.log().is_empty(),
        "nothing may be released yet: {:#?}",
        fake.log()
    );
    drop(qp);
    drop(buf);
    let log = fake.log();
    let at = |what: &str| fakelib::at(&log, what);
    assert!(at("destroy_qp") < at("destroy_cq"), "{log:#?}");
    assert!(at("destroy_qp") < at("dealloc_pd"), "{log:#?}");
    assert!(at("dereg_mr") < at("dealloc_pd"), "{log:#?}");
    assert!(at("dealloc_pd") < at("close_device"), "{log:#?}");
    assert!(at("destroy_cq") < at("close_device"), "{log:#?}");
    assert_eq!(fake.live_objects(), 0, "{log:#?}");
}

#[test]
fn a_cq_has_a_nonblocking_completion_channel_that_signals_once_per_arming() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    assert!(p.library().unwrap().has_comp_channel());
    let dev = Device::open(&p, "fake0").unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16).unwrap();
    let fd = cq.event_fd().expect("a completion channel");
    // SAFETY: fcntl on the channel's live descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert_ne!(flags & libc::O_NONBLOCK, 0);
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq, QpCap::default())
        .unwrap();
    let buf = pd.alloc_buffer(4096, RW).unwrap();
    let send = |wr_id| {
        qp.post_send(&SendWr {
            wr_id,
            op: SendOp::Send,
            sg_list: vec![buf.sge(0, 8).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap()
    };
    // Not armed: a completion raises no event.
    send(1);
    assert_eq!(cq.take_events().unwrap(), 0);
    fake.clear_log();
    cq.arm().unwrap();
    assert_eq!(fake.line("req_notify_cq"), "req_notify_cq solicited_only=0");
    send(2);
    send(3);
    // One event for the arming, taken and acknowledged together.
    assert_eq!(cq.take_events().unwrap(), 1);
    assert_eq!(fake.line("ack_cq_events"), "ack_cq_events n=1");
    assert_eq!(cq.take_events().unwrap(), 0);
    assert_eq!(cq.wait_n(3, Duration::from_secs(1)).unwrap().len(), 3);
    fake.clear_log();
    drop((qp, buf, pd, cq));
    // Every event was acknowledged before the CQ went, and the channel
    // went after it.
    assert_eq!(fake.line("destroy_cq"), "destroy_cq cqe=17 unacked=0");
    let log = fake.log();
    let at = |p: &str| fakelib::at(&log, p);
    assert!(at("destroy_cq") < at("destroy_comp_channel"), "{log:#?}");
    assert_eq!(
        log[at("destroy_comp_channel")],
        "destroy_comp_channel nonblocking=1"
    );
    drop(dev);
    assert_eq!(fake.live_objects(), 0);
}

#[test]
fn opening_and_closing_repeatedly_leaks_nothing() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake.provider();
    for _ in 0..200 {
        let dev = Device::open(&p, "fake0").unwrap();
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(4).unwrap();
        let _qp = pd
            .create_qp(QpType::Rc, &cq, &cq, QpCap::default())
            .unwrap();
        let _buf = pd.alloc_buffer(64, RW).unwrap();
        fake.clear_log();
    }
    assert_eq!(fake.live_objects(), 0);
}
