//! DC targets: reachable by any initiator with the right DC key.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::{
    pattern, rc, AccessFlags, DcAddr, QpCap, QpState, QpType, RemoteAddr, SendOp, SendWr, WcStatus,
};
use std::net::Ipv4Addr;
use std::time::Duration;

const KEY: u64 = 0x1234_5678_9abc_def0;

fn dci(end: &End) -> hipobj_fabric::QueuePair {
    let qp = end
        .pd
        .create_qp(QpType::DcInitiator, &end.cq, &end.cq, QpCap::default())
        .unwrap();
    let p = rc::RcParams {
        max_rd_atomic: 4,
        ..rc::RcParams::default()
    };
    hipobj_fabric::dc::initiator_to_rts(&qp, &p).unwrap();
    qp
}

#[test]
fn dc_write_and_read_with_the_right_key_and_refusal_with_a_wrong_one() {
    let p = fast_provider();
    let client = End::new(&p);
    let server = End::new(&p);
    // The client exposes a buffer through a DC target; the server's DC
    // initiator writes and reads it, as a cuObject server does.
    let dct = client
        .pd
        .create_dct(
            &client.cq,
            AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
            KEY,
        )
        .unwrap();
    let target = client.buffer(3 << 20, RW);
    let initiator = dci(&server);
    let mut src = server.buffer(3 << 20, RW);
    let back = server.buffer(3 << 20, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 3 << 20, 21).unwrap();
    let gid = client.dev.gid_table(1).unwrap()[0].gid;
    assert_eq!(gid.ipv4(), Some(Ipv4Addr::LOCALHOST));
    let to = DcAddr {
        gid,
        lid: 0,
        dct_num: dct.dct_num(),
        dc_key: KEY,
    };
    assert!(dct.dct_num() <= 0xff_ffff);
    let remote = RemoteAddr {
        addr: target.mr().addr(),
        rkey: target.mr().rkey(),
    };
    initiator
        .post_send(&SendWr {
            wr_id: 1,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 3 << 20).unwrap()],
            signaled: true,
            dc: Some(to),
        })
        .unwrap();
    assert_eq!(server.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(target.buf(), 0, 3 << 20, 21).unwrap(),
        None
    );
    initiator
        .post_send(&SendWr {
            wr_id: 2,
            op: SendOp::RdmaRead(remote),
            sg_list: vec![back.sge(0, 3 << 20).unwrap()],
            signaled: true,
            dc: Some(to),
        })
        .unwrap();
    assert_eq!(server.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(back.buf(), 0, 3 << 20, 21).unwrap(),
        None
    );
    assert_eq!(dct.key_violations(), 0);

    // A wrong key is dropped: the initiator times out.
    let wrong = DcAddr {
        dc_key: KEY ^ 1,
        ..to
    };
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 22).unwrap();
    initiator
        .post_send(&SendWr {
            wr_id: 3,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 4096).unwrap()],
            signaled: true,
            dc: Some(wrong),
        })
        .unwrap();
    let wc = server
        .cq
        .wait_one(Duration::from_secs(30))
        .unwrap()
        .unwrap();
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::RetryExcErr));
    assert!(dct.key_violations() >= 1);
    assert_eq!(
        pattern::first_mismatch(target.buf(), 0, 4096, 21).unwrap(),
        None,
        "a wrong key wrote memory"
    );
}

#[test]
fn dc_bad_rkey_is_a_remote_access_error() {
    let p = fast_provider();
    let client = End::new(&p);
    let server = End::new(&p);
    let dct = client
        .pd
        .create_dct(&client.cq, AccessFlags::REMOTE_WRITE, KEY)
        .unwrap();
    let target = client.buffer(4096, RW);
    let initiator = dci(&server);
    let src = server.buffer(4096, RW);
    let to = DcAddr {
        gid: client.dev.gid_table(1).unwrap()[0].gid,
        lid: 0,
        dct_num: dct.dct_num(),
        dc_key: KEY,
    };
    let remote = RemoteAddr {
        addr: target.mr().addr(),
        rkey: target.mr().rkey() ^ 0x100,
    };
    initiator
        .post_send(&SendWr {
            wr_id: 1,
            op: SendOp::RdmaWrite(remote),
            sg_list: vec![src.sge(0, 4096).unwrap()],
            signaled: true,
            dc: Some(to),
        })
        .unwrap();
    assert_eq!(server.wait().status, WcStatus::RemAccessErr);
    assert_eq!(initiator.state().unwrap(), QpState::Err);
}
