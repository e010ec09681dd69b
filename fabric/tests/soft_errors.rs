//! The soft provider is as strict as a NIC: every violation ends in the
//! completion status hardware would report. Every case runs twice (see
//! `both_paths!`): with the same-host path (cross-memory attach) and with
//! the TCP stream alone.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::rc::{self, RcParams};
use hipobj_fabric::soft::testing::Gate;
use hipobj_fabric::{
    pattern, AccessFlags, FabricError, QpAttr, QpAttrMask, QpState, RecvWr, RemoteAddr, SendOp,
    SendWr, WcOpcode, WcStatus,
};
use std::collections::HashSet;

/// Posts a 4 KiB write through `rkey`/`addr` and returns the completion.
fn write_with(a: &End, rkey: u32, addr: u64, len: u32) -> hipobj_fabric::WorkCompletion {
    let src = a.buffer(len.max(1) as usize, RW);
    let wr = SendWr {
        wr_id: 5,
        op: SendOp::RdmaWrite(RemoteAddr { addr, rkey }),
        sg_list: vec![src.sge(0, len).unwrap()],
        signaled: true,
        dc: None,
    };
    a.qp.post_send(&wr).unwrap();
    a.wait()
}

fn assert_remote_access_error(a: &End, b: &End, wc: hipobj_fabric::WorkCompletion) {
    assert_eq!(wc.status, WcStatus::RemAccessErr, "{wc:?}");
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    // The responder moved to ERR when it refused the request.
    assert_eq!(b.qp.state().unwrap(), QpState::Err);
}

fn unknown_rkey_is_a_remote_access_error() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let wc = write_with(
        &a,
        remote.mr().rkey() ^ 0x5a5a_0001,
        remote.mr().addr(),
        4096,
    );
    assert_remote_access_error(&a, &b, wc);
}

fn rkey_from_another_pd_is_a_remote_access_error() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let other_pd = b.dev.alloc_pd().unwrap();
    let foreign = other_pd.alloc_buffer(4096, RW).unwrap();
    let wc = write_with(&a, foreign.mr().rkey(), foreign.mr().addr(), 4096);
    assert_remote_access_error(&a, &b, wc);
    assert_eq!(foreign.buf().to_vec(), vec![0u8; 4096]);
}

fn range_outside_the_region_is_a_remote_access_error() {
    for (off, len) in [(1u64, 4096u32), (4096, 1), (u64::MAX - 10, 4096)] {
        let p = fast_provider();
        let (a, b) = (End::new(&p), End::new(&p));
        connect(&a, &b);
        let remote = b.buffer(4096, RW);
        let wc = write_with(
            &a,
            remote.mr().rkey(),
            remote.mr().addr().wrapping_add(off),
            len,
        );
        assert_remote_access_error(&a, &b, wc);
    }
    // An address below the region, too.
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let wc = write_with(&a, remote.mr().rkey(), remote.mr().addr() - 1, 16);
    assert_remote_access_error(&a, &b, wc);
}

fn region_without_remote_write_refuses_writes() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let read_only = b.buffer(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ);
    let wc = write_with(&a, read_only.mr().rkey(), read_only.mr().addr(), 4096);
    assert_remote_access_error(&a, &b, wc);
}

fn region_without_remote_read_refuses_reads() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let write_only = b.buffer(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE);
    let back = a.buffer(4096, RW);
    a.qp.post_send(&read_wr(1, back.sge(0, 4096).unwrap(), &write_only, 0))
        .unwrap();
    assert_remote_access_error(&a, &b, a.wait());
}

fn qp_without_remote_write_access_refuses_writes() {
    let p = fast_provider();
    let a = End::new(&p);
    let b = End::with_access(&p, AccessFlags::REMOTE_READ);
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let wc = write_with(&a, remote.mr().rkey(), remote.mr().addr(), 4096);
    assert_remote_access_error(&a, &b, wc);
    assert_eq!(remote.buf().to_vec(), vec![0u8; 4096]);
}

fn later_requests_are_flushed_after_an_error() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let src = a.buffer(4096, RW);
    let bad = SendWr {
        wr_id: 1,
        op: SendOp::RdmaWrite(RemoteAddr {
            addr: remote.mr().addr(),
            rkey: 0,
        }),
        sg_list: vec![src.sge(0, 4096).unwrap()],
        signaled: true,
        dc: None,
    };
    a.qp.post_send(&bad).unwrap();
    a.qp.post_send(&write_wr(2, src.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::RemAccessErr);
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::WrFlushErr));
    // Posting in ERR is accepted and flushed at once.
    a.qp.post_send(&write_wr(3, src.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::WrFlushErr));
}

fn responder_in_init_makes_the_requester_fail_with_retry_exceeded() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    // Only the requester connects; the responder stays in INIT, as in the
    // seed's flow, where the client connects only after the reply.
    rc::connect(&a.qp, &b.peer(), &RcParams::default()).unwrap();
    let remote = b.buffer(4096, RW);
    let wc = write_with(&a, remote.mr().rkey(), remote.mr().addr(), 4096);
    assert_eq!(wc.status, WcStatus::RetryExcErr);
    assert_eq!(wc.vendor_err, hipobj_fabric::soft::vendor_err::NO_ACK);
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    assert_eq!(b.qp.state().unwrap(), QpState::Init);
    assert_eq!(
        remote.buf().to_vec(),
        vec![0u8; 4096],
        "a QP in INIT accepted data"
    );
    // The responder dropped the request and each of its 7 retransmissions
    // (retry_cnt 7), and nothing else.
    let dropped = b
        .stats()
        .wait_for(LONG, |c| c.dropped_not_ready >= 8)
        .unwrap_or_else(|c| panic!("the responder did not drop 8 requests: {c:?}"));
    assert_eq!(
        (dropped.dropped_not_ready, dropped.dropped_other_peer),
        (8, 0)
    );
}

fn responder_connected_to_another_peer_drops_requests() {
    let p = fast_provider();
    let (a, b, c) = (End::new(&p), End::new(&p), End::new(&p));
    rc::connect(&b.qp, &c.peer(), &RcParams::default()).unwrap();
    rc::connect(&a.qp, &b.peer(), &RcParams::default()).unwrap();
    let remote = b.buffer(4096, RW);
    let wc = write_with(&a, remote.mr().rkey(), remote.mr().addr(), 4096);
    assert_eq!(wc.status, WcStatus::RetryExcErr);
    assert_eq!(b.qp.state().unwrap(), QpState::Rts);
    assert_eq!(remote.buf().to_vec(), vec![0u8; 4096]);
    // Dropped as from another peer: the request and its 7 retransmissions.
    let dropped = b
        .stats()
        .wait_for(LONG, |c| c.dropped_other_peer >= 8)
        .unwrap_or_else(|c| panic!("the responder did not drop 8 requests: {c:?}"));
    assert_eq!(
        (dropped.dropped_other_peer, dropped.dropped_not_ready),
        (8, 0)
    );
}

fn peer_that_does_not_exist_fails_with_retry_exceeded() {
    let p = fast_provider();
    let a = End::new(&p);
    let b = End::new(&p);
    let peer = b.peer();
    drop(b);
    rc::connect(&a.qp, &peer, &RcParams::default()).unwrap();
    let wc = write_with(&a, 1, 4096, 16);
    assert_eq!(wc.status, WcStatus::RetryExcErr);
}

fn responder_that_moves_to_rtr_late_is_reached_by_retransmission() {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    // 268 ms per attempt, 8 attempts: the responder connects long before
    // the requester could give up.
    let params = RcParams {
        timeout: 16,
        ..RcParams::default()
    };
    rc::connect(&a.qp, &b.peer(), &params).unwrap();
    let remote = b.buffer(8 << 20, RW);
    let mut src = a.buffer(8 << 20, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 8 << 20, 5).unwrap();
    a.qp.post_send(&write_wr(1, src.sge(0, 8 << 20).unwrap(), &remote, 0))
        .unwrap();
    // The first transmission reaches the responder in INIT and is dropped.
    b.stats()
        .wait_for(LONG, |c| c.dropped_not_ready >= 1)
        .unwrap_or_else(|c| panic!("the first transmission was never dropped: {c:?}"));
    assert_eq!(remote.buf().to_vec(), vec![0u8; 8 << 20]);
    // Only now does the responder connect: a retransmission lands.
    rc::connect(&b.qp, &a.peer(), &RcParams::default()).unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, 8 << 20, 5).unwrap(),
        None
    );
}

fn invalid_local_key_is_a_local_protection_error() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let src = a.buffer(4096, RW);
    let mut sge = src.sge(0, 4096).unwrap();
    sge.lkey ^= 1;
    a.qp.post_send(&write_wr(1, sge, &remote, 0)).unwrap();
    let wc = a.wait();
    assert_eq!(wc.status, WcStatus::LocProtErr);
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    // A READ into memory without local write is refused too.
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let no_write = a.buffer(4096, AccessFlags::REMOTE_READ);
    a.qp.post_send(&read_wr(2, no_write.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::LocProtErr);
}

fn reset_and_reconnect_to_a_new_peer() {
    let p = fast_provider();
    let (a, b, c) = (End::new(&p), End::new(&p), End::new(&p));
    connect(&a, &b);
    let mut src = a.buffer(4096, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 1).unwrap();
    let rb = b.buffer(4096, RW);
    let rc_buf = c.buffer(4096, RW);
    a.qp.post_send(&write_wr(1, src.sge(0, 4096).unwrap(), &rb, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);

    // RESET, INIT, RTR, RTS towards C.
    rc::reset_to_init(&a.qp, 1, REMOTE_RW).unwrap();
    assert_eq!(a.qp.state().unwrap(), QpState::Init);
    connect(&a, &c);
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 2).unwrap();
    a.qp.post_send(&write_wr(2, src.sge(0, 4096).unwrap(), &rc_buf, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(rc_buf.buf(), 0, 4096, 2).unwrap(),
        None
    );
    // B is still connected to A's QP number, but A now talks to C: B's
    // memory still holds the first write only.
    assert_eq!(pattern::first_mismatch(rb.buf(), 0, 4096, 1).unwrap(), None);
}

fn state_machine_refuses_illegal_use() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    let src = a.buffer(16, RW);
    let remote = b.buffer(16, RW);
    // Posting sends before RTS.
    let e =
        a.qp.post_send(&write_wr(1, src.sge(0, 16).unwrap(), &remote, 0))
            .unwrap_err();
    assert!(matches!(e, FabricError::Invalid { .. }), "{e}");
    assert_eq!(e.errno(), libc_einval());
    // INIT straight to RTS.
    let attr = QpAttr {
        qp_state: QpState::Rts,
        ..QpAttr::default()
    };
    let e =
        a.qp.modify(
            &attr,
            QpAttrMask::STATE
                | QpAttrMask::SQ_PSN
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
        .unwrap_err();
    assert!(e.to_string().contains("not allowed"), "{e}");
    // RTR without the address vector.
    let attr = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    assert!(a
        .qp
        .modify(&attr, QpAttrMask::STATE | QpAttrMask::PATH_MTU)
        .is_err());
    assert_eq!(a.qp.state().unwrap(), QpState::Init);
    // Receives are refused in RESET.
    rc::reset(&a.qp).unwrap();
    let e =
        a.qp.post_recv(&RecvWr {
            wr_id: 1,
            sg_list: vec![src.sge(0, 16).unwrap()],
        })
        .unwrap_err();
    assert_eq!(e.errno(), libc_einval());
}

fn libc_einval() -> i32 {
    22
}

fn send_queue_depth_is_enforced() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    // Only A connects, so nothing completes before the queue fills.
    rc::connect(
        &a.qp,
        &b.peer(),
        &RcParams {
            timeout: 20,
            ..RcParams::default()
        },
    )
    .unwrap();
    let src = a.buffer(16, RW);
    let remote = b.buffer(16, RW);
    for i in 0..16 {
        a.qp.post_send(&write_wr(i, src.sge(0, 16).unwrap(), &remote, 0))
            .unwrap();
    }
    let e =
        a.qp.post_send(&write_wr(99, src.sge(0, 16).unwrap(), &remote, 0))
            .unwrap_err();
    assert_eq!(e.errno(), 12, "{e}");
}

fn rkeys_are_random_unique_and_dead_after_deregistration() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    let mut keys = HashSet::new();
    let mut bufs = Vec::new();
    for _ in 0..512 {
        let buf = b.buffer(64, RW);
        assert_ne!(buf.mr().rkey(), 0);
        assert!(keys.insert(buf.mr().rkey()), "rkey reused while live");
        bufs.push(buf);
    }
    // Not a counter: consecutive keys are not consecutive numbers.
    let sequential = bufs
        .windows(2)
        .filter(|w| w[1].mr().rkey() == w[0].mr().rkey().wrapping_add(1))
        .count();
    assert!(sequential < 4);
    connect(&a, &b);
    let (rkey, addr) = (bufs[0].mr().rkey(), bufs[0].mr().addr());
    let (mr, _mem) = bufs.remove(0).into_parts();
    drop(mr);
    let wc = write_with(&a, rkey, addr, 64);
    assert_remote_access_error(&a, &b, wc);
}

/// The memory split from its region (`RegisteredBuffer::into_parts`) stays
/// allocated while the region lives, whichever is dropped first: a WRITE
/// after the caller dropped its handle lands in live memory, and the
/// memory goes with the region's deregistration.
fn memory_split_from_its_region_lives_until_the_region_is_gone() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let (rkey, addr) = (remote.mr().rkey(), remote.mr().addr());
    let (mr, mem) = remote.into_parts();
    let kept = std::sync::Arc::downgrade(&mem);
    drop(mem);
    let mut src = a.buffer(64, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 64, 4).unwrap();
    let wr = SendWr {
        wr_id: 11,
        op: SendOp::RdmaWrite(RemoteAddr { addr, rkey }),
        sg_list: vec![src.sge(0, 64).unwrap()],
        signaled: true,
        dc: None,
    };
    a.qp.post_send(&wr).unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    let live = kept.upgrade().expect("the region keeps its memory");
    assert_eq!(pattern::first_mismatch(&live, 0, 64, 4).unwrap(), None);
    drop(live);
    drop(mr);
    assert!(kept.upgrade().is_none(), "the memory outlived its region");
}

fn deregistration_waits_for_placements_and_nothing_lands_after() {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    // An ACK timeout of 4.3 s: the requester waits for the responder held
    // below, it does not retransmit meanwhile.
    let params = RcParams {
        timeout: 20,
        ..RcParams::default()
    };
    rc::connect(&a.qp, &b.peer(), &params).unwrap();
    rc::connect(&b.qp, &a.peer(), &params).unwrap();
    let len = 32 << 20;
    let mut src = a.buffer(len, RW);
    pattern::fill_buffer(src.buf_mut(), 0, len, 9).unwrap();
    let remote = b.buffer(len, RW);
    // The responder stops at its third access to the region (a segment
    // from the stream, or a same-host grant), the region's guard held.
    let gate = Gate::responder(remote.mr().addr(), 3);
    a.qp.post_send(&write_wr(1, src.sge(0, len as u32).unwrap(), &remote, 0))
        .unwrap();
    let held = gate
        .reached(LONG)
        .expect("the responder never reached its third access");
    assert!(
        held.offset > 0 && held.offset + held.len < len as u64,
        "{held:?}"
    );
    assert_eq!(b.stats().now().accesses_in_flight, 1);

    let (mr, mem) = remote.into_parts();
    std::thread::scope(|s| {
        let deregistration = s.spawn(move || drop(mr));
        assert!(gate.deregistering(LONG), "the deregistration never started");
        // It waits for the placement in flight, which the gate holds.
        assert!(
            !deregistration.is_finished(),
            "deregistration returned while a placement was in flight"
        );
        assert_eq!(b.stats().now().deregistrations_waiting, 1);
        gate.open();
        deregistration.join().unwrap();
    });
    // Returned: the held access has ended, and nothing else touches the
    // region.
    let after = b.stats().now();
    assert_eq!(
        (after.accesses_in_flight, after.deregistrations_waiting),
        (0, 0)
    );
    let snapshot = mem.to_vec();
    // The next access meets the dead key: the write fails, the responder
    // goes to ERR.
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RemAccessErr), "{wc:?}");
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    assert_eq!(b.qp.state().unwrap(), QpState::Err);
    assert!(
        mem.to_vec() == snapshot,
        "memory changed after deregistration returned"
    );
    // Exactly what came before the deregistration landed: everything up to
    // the held access, and the held access itself (unless the kernel
    // refused the same-host copy, whose bytes then never came).
    let copied = b.stats().now().grants_failed == 0;
    let landed = (held.offset + if copied { held.len } else { 0 }) as usize;
    assert_eq!(pattern::first_mismatch(&mem, 0, landed, 9).unwrap(), None);
    assert!(
        snapshot[landed..].iter().all(|&x| x == 0),
        "bytes past the held access landed"
    );
}

fn write_with_immediate_and_send_consume_receives() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let mut src = a.buffer(8192, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 8192, 4).unwrap();
    let remote = b.buffer(8192, RW);
    let rbuf = b.buffer(8192, RW);
    b.qp.post_recv(&RecvWr {
        wr_id: 70,
        sg_list: vec![rbuf.sge(0, 8192).unwrap()],
    })
    .unwrap();
    b.qp.post_recv(&RecvWr {
        wr_id: 71,
        sg_list: vec![rbuf.sge(0, 8192).unwrap()],
    })
    .unwrap();
    let wr = write_imm_wr(1, src.sge(0, 4096).unwrap(), &remote, 0, 0xabcd);
    a.qp.post_send(&wr).unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    let wc = b.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.imm_data, wc.byte_len),
        (
            70,
            WcStatus::Success,
            WcOpcode::RecvRdmaWithImm,
            Some(0xabcd),
            4096
        )
    );
    assert_eq!(wc.src_qp, a.qp.qp_num());
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, 4096, 4).unwrap(),
        None
    );

    let send = SendWr {
        wr_id: 2,
        op: SendOp::SendWithImm(7),
        sg_list: vec![src.sge(0, 8192).unwrap()],
        signaled: true,
        dc: None,
    };
    a.qp.post_send(&send).unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    let wc = b.wait();
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.imm_data, wc.byte_len),
        (71, WcOpcode::Recv, Some(7), 8192)
    );
    assert_eq!(
        pattern::first_mismatch(rbuf.buf(), 0, 8192, 4).unwrap(),
        None
    );
}

fn send_without_receive_exhausts_rnr_retries() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    rc::connect(
        &b.qp,
        &a.peer(),
        &RcParams {
            min_rnr_timer: 1,
            ..RcParams::default()
        },
    )
    .unwrap();
    rc::connect(
        &a.qp,
        &b.peer(),
        &RcParams {
            rnr_retry: 2,
            ..RcParams::default()
        },
    )
    .unwrap();
    let src = a.buffer(64, RW);
    a.qp.post_send(&SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sg_list: vec![src.sge(0, 64).unwrap()],
        signaled: true,
        dc: None,
    })
    .unwrap();
    assert_eq!(a.wait().status, WcStatus::RnrRetryExcErr);
}

fn send_longer_than_the_receive_is_an_invalid_request() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let src = a.buffer(4096, RW);
    let rbuf = b.buffer(4096, RW);
    b.qp.post_recv(&RecvWr {
        wr_id: 8,
        sg_list: vec![rbuf.sge(0, 100).unwrap()],
    })
    .unwrap();
    a.qp.post_send(&SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sg_list: vec![src.sge(0, 4096).unwrap()],
        signaled: true,
        dc: None,
    })
    .unwrap();
    assert_eq!(a.wait().status, WcStatus::RemInvReqErr);
    let wc = b.wait();
    assert_eq!((wc.wr_id, wc.status), (8, WcStatus::LocLenErr));
    assert_eq!(b.qp.state().unwrap(), QpState::Err);
}

/// A request the posting thread sent itself, the engine asleep, is still
/// under the ACK timer: when the responder stops answering (its QP moved to
/// ERR after a first request succeeded), the request is retransmitted and
/// fails with RETRY_EXC_ERR as any other.
fn an_unanswered_inline_request_is_retried_and_times_out() {
    let p = fast_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let remote = b.buffer(4096, RW);
    let first = write_with(&a, remote.mr().rkey(), remote.mr().addr(), 4096);
    assert_eq!(first.status, WcStatus::Success);
    // Long enough for the engine to fall asleep with nothing to send.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let to_err = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    b.qp.modify(&to_err, QpAttrMask::STATE).unwrap();
    let before = a.stats().now().sent_inline;
    let wc = write_with(&a, remote.mr().rkey(), remote.mr().addr(), 4096);
    assert_eq!(wc.status, WcStatus::RetryExcErr, "{wc:?}");
    assert_eq!(wc.vendor_err, hipobj_fabric::soft::vendor_err::NO_ACK);
    assert_eq!(a.stats().now().sent_inline, before + 1);
    // The request and each of its 7 retransmissions were dropped.
    b.stats()
        .wait_for(LONG, |c| c.dropped_not_ready >= 8)
        .unwrap_or_else(|c| panic!("the responder did not drop 8 requests: {c:?}"));
}

both_paths!(
    an_unanswered_inline_request_is_retried_and_times_out,
    unknown_rkey_is_a_remote_access_error,
    rkey_from_another_pd_is_a_remote_access_error,
    range_outside_the_region_is_a_remote_access_error,
    region_without_remote_write_refuses_writes,
    region_without_remote_read_refuses_reads,
    qp_without_remote_write_access_refuses_writes,
    later_requests_are_flushed_after_an_error,
    responder_in_init_makes_the_requester_fail_with_retry_exceeded,
    responder_connected_to_another_peer_drops_requests,
    peer_that_does_not_exist_fails_with_retry_exceeded,
    responder_that_moves_to_rtr_late_is_reached_by_retransmission,
    invalid_local_key_is_a_local_protection_error,
    reset_and_reconnect_to_a_new_peer,
    state_machine_refuses_illegal_use,
    send_queue_depth_is_enforced,
    rkeys_are_random_unique_and_dead_after_deregistration,
    deregistration_waits_for_placements_and_nothing_lands_after,
    memory_split_from_its_region_lives_until_the_region_is_gone,
    write_with_immediate_and_send_consume_receives,
    send_without_receive_exhausts_rnr_retries,
    send_longer_than_the_receive_is_an_invalid_request,
);
