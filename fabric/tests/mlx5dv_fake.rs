//! DC through the verbs provider against a fake libmlx5
//! (`tests/abi/fake_libmlx5.c`) linked to the fake libibverbs, both
//! compiled here against the real `<infiniband/mlx5dv.h>` and
//! `<infiniband/verbs.h>`, logging every call with its arguments in one
//! log. Without a ConnectX this is how the DC side of the ABI is checked:
//! the exact attributes and masks of `mlx5dv_create_qp` for a DC initiator
//! and a DC target, the DCT's SRQ and its INIT/RTR, the DCI's modifies,
//! the address handle made from the target's GID and LID (and reused), the
//! work-request builder calls with the rkey, remote address, DCT number, DC
//! key and SGE, the completions, errno mapping, and teardown order; also
//! that DC is declined with the reason when libmlx5 is absent, the device
//! is not mlx5's, or libibverbs lacks the extended functions.
//!
//! Skipped (with a message) without the headers or a C compiler, unless
//! `REQUIRE_IBVERBS_HEADERS` is set.

mod abi;
mod fakelib;

use abi::Fake;
use fakelib::FakeLib;
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::{
    dc, AccessFlags, DcAddr, Device, FabricError, Gid, QpCap, QpType, RecvWr, RemoteAddr, SendOp,
    SendWr, WcOpcode, WcStatus,
};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

const RW: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0,
);

/// DCI capacities as the gateway asks for them.
const DCI_CAP: QpCap = QpCap {
    max_send_wr: 64,
    max_recv_wr: 0,
    max_send_sge: 1,
    max_recv_sge: 0,
};

/// A sysfs tree in which GID 2 of fake0 (`::ffff:10.0.0.1`) is RoCE v2, so
/// that the provider's best GID is index 2.
fn sysfs() -> PathBuf {
    let root = abi::temp_dir("fake-sysfs-dc");
    let types = root.join("fake0/ports/1/gid_attrs/types");
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(types.join("0"), "IB/RoCE v1\n").unwrap();
    std::fs::write(types.join("2"), "RoCE v2\n").unwrap();
    root
}

#[test]
fn without_libmlx5_dc_is_declined_with_the_reason() {
    let Some(fake) = FakeLib::get(Fake::Full) else {
        return;
    };
    let p = fake
        .provider()
        .mlx5_library("/nonexistent/libmlx5.so.1")
        .sysfs_root(sysfs());
    let dev = Device::open(&p, "fake0").unwrap();
    assert!(!dev.info().supports_dc);
    let why = dev.info().dc_unavailable.clone().unwrap();
    assert!(
        why.starts_with("DC needs libmlx5: /nonexistent/libmlx5.so.1 could not be loaded"),
        "{why}"
    );
    assert!(why.contains("ibverbs-providers"), "{why}");
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16).unwrap();
    let e = pd
        .create_qp(QpType::DcInitiator, &cq, &cq, DCI_CAP)
        .unwrap_err();
    assert!(matches!(e, FabricError::NotAvailable { .. }), "{e:?}");
    assert_eq!(e.errno(), libc::EOPNOTSUPP);
    assert_eq!(
        e.to_string(),
        format!("create_qp (DC initiator): not available: {why}")
    );
    let e = pd.create_dct(&cq, RW, 7).unwrap_err();
    assert_eq!(e.to_string(), format!("create_dct: not available: {why}"));
    // RC is unaffected.
    let _rc = pd
        .create_qp(QpType::Rc, &cq, &cq, QpCap::default())
        .unwrap();
}

#[test]
fn a_device_that_is_not_mlx5_has_no_dc() {
    let Some(fake) = FakeLib::get_dc(Fake::Full) else {
        return;
    };
    fake.mlx5_call_int("fake_mlx5_set_supported", 0);
    let dev = Device::open(&fake.provider(), "fake0").unwrap();
    assert_eq!(
        fake.line("mlx5dv_is_supported"),
        "mlx5dv_is_supported dev=fake0"
    );
    assert!(!dev.info().supports_dc);
    assert_eq!(
        dev.info().dc_unavailable.as_deref(),
        Some("fake0 is not an mlx5 device (DC needs a ConnectX NIC and its mlx5 driver)")
    );
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(4).unwrap();
    assert!(matches!(
        pd.create_dct(&cq, RW, 7),
        Err(FabricError::NotAvailable { .. })
    ));
    assert!(fake.lines("mlx5dv_create_qp").is_empty());
}

#[test]
fn a_libibverbs_without_the_extended_functions_has_no_dc() {
    let Some(fake) = FakeLib::get_dc(Fake::NoOptional) else {
        return;
    };
    let lib = fake.provider().library().unwrap();
    assert!(!lib.has_dc_verbs());
    assert!(lib.symbols().contains(&("ibv_qp_to_qp_ex", false)));
    let dev = Device::open(&fake.provider(), "fake0").unwrap();
    let why = dev.info().dc_unavailable.clone().unwrap();
    assert!(
        why.ends_with(
            "lacks the functions DC needs (ibv_create_ah, ibv_create_srq, ibv_qp_to_qp_ex: \
             rdma-core 22 or later)"
        ),
        "{why}"
    );
    // libmlx5 is not even asked.
    assert!(fake.lines("mlx5dv_is_supported").is_empty());
}

#[test]
fn a_dci_is_created_moved_to_rts_and_posts_writes_and_reads_to_a_dc_address() {
    let Some(fake) = FakeLib::get_dc(Fake::Full) else {
        return;
    };
    let p = fake.provider().sysfs_root(sysfs());
    assert!(p.library().unwrap().has_dc_verbs());
    let dev = Device::open(&p, "fake0").unwrap();
    assert!(dev.info().supports_dc, "{:?}", dev.info().dc_unavailable);
    assert_eq!(dev.info().dc_unavailable, None);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(64).unwrap();
    fake.clear_log();
    let qp = pd
        .create_qp(QpType::DcInitiator, &cq, &cq, DCI_CAP)
        .unwrap();
    // IBV_QPT_DRIVER; comp_mask PD | SEND_OPS_FLAGS; send ops RDMA WRITE |
    // RDMA READ; mlx5dv comp_mask DC; DCTYPE_DCI; no key (it goes with
    // each work request).
    assert_eq!(
        fake.line("mlx5dv_create_qp"),
        "mlx5dv_create_qp qp_type=255 comp_mask=0x41 pd=set send_cq=set recv_cq=set same_cq=1 \
         srq=null send_wr=64 recv_wr=0 send_sge=1 recv_sge=0 inline=0 sq_sig_all=0 \
         create_flags=0 send_ops=0x11 dv_comp_mask=0x2 dv_create_flags=0 dc_type=2 \
         dct_access_key=0 dv_send_ops=0"
    );
    assert_eq!(qp.qp_type(), QpType::DcInitiator);
    let qpn = qp.qp_num();

    // RESET -> INIT -> RTR -> RTS as the gateway does it.
    fake.clear_log();
    let params = RcParams {
        gid_index: 2,
        ..RcParams::default()
    };
    dc::initiator_to_rts(&qp, &params).unwrap();
    let m = fake.lines("modify_qp");
    assert_eq!(m.len(), 3, "{m:#?}");
    // INIT: STATE | PKEY_INDEX | PORT.
    assert!(
        m[0].starts_with(
            "modify_qp mask=0x31 state=1 mtu=3 dest_qpn=0 rq_psn=0 sq_psn=0 access=0 pkey=0 port=1 "
        ),
        "{}",
        m[0]
    );
    // RTR: STATE | AV | PATH_MTU; the AV names only the port and source GID.
    assert_eq!(
        m[1],
        "modify_qp mask=0x181 state=2 mtu=5 dest_qpn=0 rq_psn=0 sq_psn=0 access=0 pkey=0 port=0 \
         is_global=1 dgid=00000000000000000000000000000000 sgid_index=2 hop=64 tclass=0 flow=0 \
         dlid=0 sl=0 ah_port=1 timeout=0 retry=0 rnr_retry=0 min_rnr=0 rd_atomic=0 \
         dest_rd_atomic=0"
    );
    // RTS: STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC.
    assert!(
        m[2].starts_with("modify_qp mask=0x12e01 state=3 "),
        "{}",
        m[2]
    );
    assert!(
        m[2].ends_with("timeout=14 retry=7 rnr_retry=7 min_rnr=0 rd_atomic=16 dest_rd_atomic=0"),
        "{}",
        m[2]
    );

    let buf = pd.alloc_buffer(8192, RW).unwrap();
    let lkey = buf.mr().lkey();
    let base = buf.mr().addr();
    let to = DcAddr {
        gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 7, 9)),
        lid: 0x12,
        dct_num: 0xab_cdef,
        dc_key: 0x1234_5678_9abc_def0,
    };
    let remote = RemoteAddr {
        addr: 0x1122_3344_5566,
        rkey: 0x99,
    };
    fake.clear_log();
    qp.post_send(&SendWr {
        wr_id: 1,
        op: SendOp::RdmaWrite(remote),
        sg_list: vec![buf.sge(64, 4000).unwrap()],
        signaled: true,
        dc: Some(to),
    })
    .unwrap();
    assert_eq!(
        fake.log(),
        vec![
            "create_ah is_global=1 dgid=00000000000000000000ffffc0a80709 sgid_index=2 hop=64 \
             tclass=0 flow=0 dlid=18 sl=0 src_path_bits=0 rate=0 port=1"
                .to_string(),
            format!("wr_start qpn={qpn:#x} open=0"),
            "wr_rdma_write wr_id=0x1 flags=0x2 rkey=0x99 remote=0x112233445566".to_string(),
            "wr_set_dc_addr ah=1 dctn=0xabcdef key=0x123456789abcdef0".to_string(),
            format!("wr_set_sge lkey={lkey:#x} addr={:#x} len=4000", base + 64),
            "wr_complete rc=0".to_string(),
        ]
    );
    // A READ to the same target reuses the handle; unsignaled, it
    // completes nothing.
    fake.clear_log();
    let read = |wr_id, signaled, to| {
        qp.post_send(&SendWr {
            wr_id,
            op: SendOp::RdmaRead(RemoteAddr {
                addr: 0x7f00_0000_0000,
                rkey: 0x4242,
            }),
            sg_list: vec![buf.sge(0, 512).unwrap()],
            signaled,
            dc: Some(to),
        })
    };
    read(2, true, to).unwrap();
    read(3, false, to).unwrap();
    assert!(fake.lines("create_ah").is_empty(), "{:#?}", fake.log());
    assert_eq!(
        fake.lines("wr_rdma_read"),
        vec![
            "wr_rdma_read wr_id=0x2 flags=0x2 rkey=0x4242 remote=0x7f0000000000",
            "wr_rdma_read wr_id=0x3 flags=0 rkey=0x4242 remote=0x7f0000000000",
        ]
    );
    assert_eq!(
        fake.lines("wr_set_dc_addr"),
        vec!["wr_set_dc_addr ah=1 dctn=0xabcdef key=0x123456789abcdef0"; 2]
    );
    // Another target (InfiniBand LID, no IPv4): a second handle.
    let other = DcAddr {
        gid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]),
        lid: 7,
        dct_num: 0x42,
        dc_key: 9,
    };
    fake.clear_log();
    read(4, true, other).unwrap();
    assert_eq!(
        fake.line("create_ah"),
        "create_ah is_global=1 dgid=fe800000000000000000000000000007 sgid_index=2 hop=64 \
         tclass=0 flow=0 dlid=7 sl=0 src_path_bits=0 rate=0 port=1"
    );
    assert_eq!(
        fake.line("wr_set_dc_addr"),
        "wr_set_dc_addr ah=2 dctn=0x42 key=0x9"
    );

    // The completions: 1 write, 2 signaled reads.
    let wcs = cq.wait_n(3, Duration::from_secs(5)).unwrap();
    let got: Vec<_> = wcs
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::Success, WcOpcode::RdmaWrite, 4000, qpn),
            (2, WcStatus::Success, WcOpcode::RdmaRead, 512, qpn),
            (4, WcStatus::Success, WcOpcode::RdmaRead, 512, qpn),
        ]
    );
    let mut more = Vec::new();
    assert_eq!(cq.poll(&mut more, 4).unwrap(), 0);

    // Refused before the builder is touched.
    fake.clear_log();
    let e = qp
        .post_send(&SendWr {
            wr_id: 5,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![buf.sge(0, 8).unwrap()],
            signaled: true,
            dc: None,
        })
        .unwrap_err();
    assert!(matches!(e, FabricError::Invalid { .. }), "{e:?}");
    let e = qp
        .post_send(&SendWr {
            wr_id: 6,
            op: SendOp::Send,
            sg_list: vec![],
            signaled: true,
            dc: Some(to),
        })
        .unwrap_err();
    assert!(matches!(e, FabricError::Unsupported { .. }), "{e:?}");
    let big = DcAddr {
        dct_num: 1 << 24,
        ..to
    };
    assert!(matches!(
        read(7, true, big),
        Err(FabricError::Invalid { .. })
    ));
    let e = qp
        .post_recv(&RecvWr {
            wr_id: 8,
            sg_list: vec![],
        })
        .unwrap_err();
    assert!(matches!(e, FabricError::Unsupported { .. }), "{e:?}");
    assert!(fake.log().is_empty(), "{:#?}", fake.log());
    // wr_complete's error comes back with its errno.
    fake.mlx5_call_int("fake_mlx5_set_complete_rc", libc::ENOMEM);
    let e = read(9, true, to).unwrap_err();
    assert_eq!(e.errno(), libc::ENOMEM);
    assert!(e.to_string().starts_with("ibv_wr_complete: "), "{e}");
    fake.mlx5_call_int("fake_mlx5_set_complete_rc", 0);

    // Teardown, in an order that would be wrong without the handles
    // holding their parents: the PD and device first.
    fake.clear_log();
    drop(dev);
    drop(pd);
    drop(cq);
    assert!(fake.log().is_empty(), "{:#?}", fake.log());
    drop(qp);
    drop(buf);
    let log = fake.log();
    let at = |what: &str| fakelib::at(&log, what);
    assert_eq!(
        log[at("destroy_qp")],
        format!("destroy_qp qpn={qpn:#x} type=255")
    );
    assert_eq!(fake.lines("destroy_ah").len(), 2, "{log:#?}");
    assert!(at("destroy_qp") < at("destroy_cq"), "{log:#?}");
    assert!(at("destroy_ah") < at("dealloc_pd"), "{log:#?}");
    assert!(at("dealloc_pd") < at("close_device"), "{log:#?}");
    assert_eq!(fake.live_objects(), 0, "{log:#?}");
}

#[test]
fn a_dct_is_created_with_its_key_over_an_srq_and_moved_to_rtr() {
    let Some(fake) = FakeLib::get_dc(Fake::Full) else {
        return;
    };
    let p = fake.provider().sysfs_root(sysfs());
    let dev = Device::open(&p, "fake0").unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16).unwrap();
    fake.clear_log();
    let dct = pd.create_dct(&cq, RW, 0xfeed_beef_cafe_f00d).unwrap();
    let log = fake.log();
    let at = |what: &str| fakelib::at(&log, what);
    assert_eq!(
        log[at("create_srq")],
        "create_srq max_wr=16 max_sge=1 limit=0"
    );
    assert!(at("create_srq") < at("mlx5dv_create_qp"));
    // IBV_QPT_DRIVER; comp_mask PD; mlx5dv comp_mask DC; DCTYPE_DCT with
    // the key; the SRQ the kernel requires.
    assert_eq!(
        log[at("mlx5dv_create_qp")],
        "mlx5dv_create_qp qp_type=255 comp_mask=0x1 pd=set send_cq=set recv_cq=set same_cq=1 \
         srq=set send_wr=0 recv_wr=0 send_sge=0 recv_sge=0 inline=0 sq_sig_all=0 \
         create_flags=0 send_ops=0 dv_comp_mask=0x2 dv_create_flags=0 dc_type=1 \
         dct_access_key=0xfeedbeefcafef00d dv_send_ops=0"
    );
    let m = fake.lines("modify_qp");
    assert_eq!(m.len(), 2, "{m:#?}");
    // INIT: STATE | ACCESS_FLAGS | PKEY_INDEX | PORT, remote access only.
    assert!(
        m[0].starts_with(
            "modify_qp mask=0x39 state=1 mtu=3 dest_qpn=0 rq_psn=0 sq_psn=0 access=0x6 pkey=0 \
             port=1 is_global=0 "
        ),
        "{}",
        m[0]
    );
    // RTR: STATE | AV | PATH_MTU | MIN_RNR_TIMER; the port's active MTU
    // (1024) and best GID (2).
    assert_eq!(
        m[1],
        "modify_qp mask=0x8181 state=2 mtu=3 dest_qpn=0 rq_psn=0 sq_psn=0 access=0 pkey=0 port=0 \
         is_global=1 dgid=00000000000000000000000000000000 sgid_index=2 hop=64 tclass=0 flow=0 \
         dlid=0 sl=0 ah_port=1 timeout=0 retry=0 rnr_retry=0 min_rnr=12 rd_atomic=0 \
         dest_rd_atomic=0"
    );
    assert!(dct.dct_num() >= 0x100 && dct.dct_num() < 1 << 24);
    assert_eq!(dct.key_violations(), 0);
    fake.clear_log();
    let n = dct.dct_num();
    drop(dct);
    assert_eq!(
        fake.log(),
        vec![
            format!("destroy_qp qpn={n:#x} type=255"),
            "destroy_srq".to_string()
        ]
    );
    drop((pd, cq, dev));
    assert_eq!(fake.live_objects(), 0);
}
