//! Provider-agnostic behaviour checks: each function takes a provider and
//! a device name and checks one thing any RDMA provider must do the same
//! way, soft or libibverbs (on rxe, mlx5, bnxt_re, ionic). Two QPs on the
//! one device talk to each other through the port's best GID, which every
//! RoCE NIC and Soft-RoCE loop back.
//!
//! Used by `tests/ibverbs_behaviour.rs` and `tests/dc_behaviour.rs`
//! through [`on_both_providers!`]: against the soft provider always, and
//! against libibverbs, on the device `HIPOBJ_TEST_IBV_DEVICE` names, in
//! tests ignored unless asked for (`-- --ignored`: they need an RDMA
//! device).
#![allow(dead_code)]

pub mod dc;

/// Names the libibverbs device the ignored tests run on.
pub const ENV_DEVICE: &str = "HIPOBJ_TEST_IBV_DEVICE";

/// The libibverbs provider and the device [`ENV_DEVICE`] names; a test
/// failure saying so when it names none.
pub fn verbs_device() -> (hipobj_fabric::ibverbs::VerbsProvider, String) {
    let device = std::env::var(ENV_DEVICE)
        .ok()
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| panic!("set {ENV_DEVICE} to the libibverbs device (e.g. rxe0)"));
    (hipobj_fabric::ibverbs::VerbsProvider::new(), device)
}

/// Runs `check` on `device` of `p`.
pub fn run(check: impl Fn(&dyn Provider, &str), p: &dyn Provider, device: &str) {
    check(p, device)
}

/// Declares each `name => check` twice: in `soft`, against the soft
/// provider's `soft0`; in `verbs`, ignored unless asked for, against the
/// libibverbs device [`ENV_DEVICE`] names. `check` takes the provider and
/// the device name.
#[macro_export]
macro_rules! on_both_providers {
    ($($name:ident => $check:expr;)*) => {
        mod soft {
            use super::*;
            $(
                #[test]
                fn $name() {
                    let p = hipobj_fabric::soft::SoftProvider::default();
                    behaviour::run($check, &p, "soft0");
                }
            )*
        }
        mod verbs {
            use super::*;
            $(
                #[test]
                #[ignore = "needs an RDMA device"]
                fn $name() {
                    let (p, device) = behaviour::verbs_device();
                    behaviour::run($check, &p, &device);
                }
            )*
        }
    };
}

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::{
    pattern, AccessFlags, CompletionQueue, Device, GidEntry, GidType, Mtu, ProtectionDomain,
    QpAttr, QpAttrMask, QpCap, QpState, QpType, QueuePair, RecvWr, RegisteredBuffer, RemoteAddr,
    SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use std::time::Duration;

/// Local write and remote read/write: what hipObject registers buffers with.
pub const RW: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0,
);
const REMOTE_RW: AccessFlags =
    AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
/// How long a completion may take (retry exhaustion included).
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(30);
/// The port every check uses (hipObject always opens port 1).
const PORT: u8 = 1;

/// The GID hipObject would pick (its `PickBestGid()`): RoCE v2
/// IPv4-mapped, then RoCE v2 global, RoCE v2 link-local, RoCE v1 global,
/// RoCE v1 link-local; IB entries after those; ties to the lowest index.
pub fn best_gid(table: &[GidEntry]) -> GidEntry {
    let rank = |g: &GidEntry| match (g.gid_type, g.gid.is_ipv4_mapped(), g.gid.is_link_local()) {
        (GidType::RoceV2, true, _) => 0,
        (GidType::RoceV2, false, false) => 1,
        (GidType::RoceV2, false, true) => 2,
        (GidType::RoceV1, _, false) => 3,
        (GidType::RoceV1, _, true) => 4,
        (GidType::Ib, ..) => 5,
        (GidType::Unknown, ..) => 6,
    };
    *table
        .iter()
        .min_by_key(|g| (rank(g), g.index))
        .expect("the port has no configured GID")
}

/// One side: a device, a PD, a CQ and an RC QP in INIT.
pub struct End {
    pub dev: Device,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    pub gid: GidEntry,
}

impl End {
    /// Opens `name` with `p` and builds an end whose QP allows `qp_access`.
    pub fn new(p: &dyn Provider, name: &str, qp_access: AccessFlags) -> End {
        let dev = Device::open(p, name).unwrap_or_else(|e| panic!("open {name}: {e}"));
        let pd = dev.alloc_pd().expect("alloc_pd");
        let cq = dev.create_cq(64).expect("create_cq");
        let cap = QpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
        };
        let qp = pd.create_qp(QpType::Rc, &cq, &cq, cap).expect("create_qp");
        rc::to_init(&qp, PORT, qp_access).expect("to INIT");
        let gid = best_gid(&dev.gid_table(PORT).expect("gid_table"));
        End {
            dev,
            pd,
            cq,
            qp,
            gid,
        }
    }

    /// How a peer reaches this end.
    pub fn peer(&self) -> RcPeer {
        RcPeer {
            qp_num: self.qp.qp_num(),
            gid: self.gid.gid,
            lid: 0,
        }
    }

    /// hipObject's connection attributes, with this end's GID index and an
    /// MTU the port supports.
    pub fn params(&self) -> RcParams {
        let port = self.dev.query_port(PORT).expect("query_port");
        let gid_index = u8::try_from(self.gid.index).expect("GID index fits u8");
        RcParams {
            gid_index,
            mtu: min_mtu(port.active_mtu, RcParams::default().mtu),
            ..RcParams::default()
        }
    }

    /// Waits for one completion.
    pub fn wait(&self) -> WorkCompletion {
        self.cq
            .wait_one(COMPLETION_TIMEOUT)
            .expect("poll")
            .unwrap_or_else(|| panic!("no completion within {COMPLETION_TIMEOUT:?}"))
    }
}

/// The smaller of two MTUs.
fn min_mtu(a: Mtu, b: Mtu) -> Mtu {
    if a.bytes() <= b.bytes() {
        a
    } else {
        b
    }
}

/// Connects both ends to each other.
pub fn connect(a: &End, b: &End) {
    rc::connect(&a.qp, &b.peer(), &a.params()).expect("connect a to b");
    rc::connect(&b.qp, &a.peer(), &b.params()).expect("connect b to a");
}

fn remote(buf: &RegisteredBuffer, off: u64) -> RemoteAddr {
    RemoteAddr {
        addr: buf.mr().addr() + off,
        rkey: buf.mr().rkey(),
    }
}

fn post(qp: &QueuePair, wr_id: u64, op: SendOp, local: Sge) {
    qp.post_send(&SendWr {
        wr_id,
        op,
        sg_list: vec![local],
        signaled: true,
        dc: None,
    })
    .expect("post_send");
}

/// RDMA WRITE then RDMA READ of `len` bytes arrive byte for byte, at an
/// unaligned offset, and complete with the right opcodes.
pub fn write_then_read_is_byte_exact(p: &dyn Provider, device: &str, len: usize) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    connect(&a, &b);
    let mut src = a.pd.alloc_buffer(len, RW).expect("alloc src");
    let dst = b.pd.alloc_buffer(len + 8, RW).expect("alloc dst");
    let back = a.pd.alloc_buffer(len, RW).expect("alloc back");
    pattern::fill_buffer(src.buf_mut(), 0, len, 0x5eed).unwrap();
    let n = u32::try_from(len).expect("len fits u32");

    post(
        &a.qp,
        1,
        SendOp::RdmaWrite(remote(&dst, 3)),
        src.sge(0, n).unwrap(),
    );
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite),
        "{wc:?}"
    );
    let got = dst.buf().to_vec();
    assert_eq!(&got[..3], &[0, 0, 0], "bytes before the target changed");
    assert_eq!(
        pattern::first_mismatch(dst.buf(), 3, len, 0x5eed).unwrap(),
        None,
        "WRITE landed wrong"
    );
    assert!(
        got[3 + len..].iter().all(|&b| b == 0),
        "bytes after the target changed"
    );

    post(
        &a.qp,
        2,
        SendOp::RdmaRead(remote(&dst, 3)),
        back.sge(0, n).unwrap(),
    );
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (2, WcStatus::Success, WcOpcode::RdmaRead),
        "{wc:?}"
    );
    assert_eq!(
        pattern::first_mismatch(back.buf(), 0, len, 0x5eed).unwrap(),
        None,
        "READ returned wrong bytes"
    );
    assert_eq!(a.qp.state().unwrap(), QpState::Rts);
}

/// A WRITE into memory registered without REMOTE_WRITE fails with
/// REM_ACCESS_ERR, leaves the memory alone, and moves the requester to ERR.
pub fn write_without_remote_write_is_a_remote_access_error(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    connect(&a, &b);
    let mut src = a.pd.alloc_buffer(4096, RW).expect("alloc src");
    src.buf_mut().fill(0xab);
    let read_only =
        b.pd.alloc_buffer(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)
            .expect("alloc read-only");
    post(
        &a.qp,
        7,
        SendOp::RdmaWrite(remote(&read_only, 0)),
        src.sge(0, 4096).unwrap(),
    );
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::RemAccessErr), "{wc:?}");
    assert_eq!(
        read_only.buf().to_vec(),
        vec![0u8; 4096],
        "memory was written"
    );
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
}

/// A WRITE to a peer QP that never leaves INIT (so drops every request)
/// fails with RETRY_EXC_ERR after the retries, without touching the memory.
pub fn unanswered_requests_exceed_the_retry_count(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    // Short timeout and few retries, so the failure comes quickly on any
    // provider: 4.096 µs × 2^10 ≈ 4 ms, 2 attempts.
    let params = RcParams {
        timeout: 10,
        retry_cnt: 1,
        ..a.params()
    };
    rc::connect(&a.qp, &b.peer(), &params).expect("connect a");
    let mut src = a.pd.alloc_buffer(4096, RW).expect("alloc src");
    let dst = b.pd.alloc_buffer(4096, RW).expect("alloc dst");
    src.buf_mut().fill(0xcd);
    post(
        &a.qp,
        9,
        SendOp::RdmaWrite(remote(&dst, 0)),
        src.sge(0, 4096).unwrap(),
    );
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::RetryExcErr), "{wc:?}");
    assert_eq!(b.qp.state().unwrap(), QpState::Init);
    assert_eq!(
        dst.buf().to_vec(),
        vec![0u8; 4096],
        "a QP in INIT accepted data"
    );
}

fn post_recv(qp: &QueuePair, wr_id: u64, local: Sge) {
    qp.post_recv(&RecvWr {
        wr_id,
        sg_list: vec![local],
    })
    .expect("post_recv");
}

/// SEND_WITH_IMM lands in the peer's posted receive (RECV, its length, the
/// immediate); WRITE_WITH_IMM lands in the peer's memory and consumes a
/// receive (RECV_RDMA_WITH_IMM, the write's length, the immediate); the
/// requester sees SEND and RDMA_WRITE completions.
pub fn sends_and_immediates_complete_receives(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    connect(&a, &b);
    let mut src = a.pd.alloc_buffer(8192, RW).expect("alloc src");
    pattern::fill_buffer(src.buf_mut(), 0, 8192, 0x1e6).unwrap();
    let inbox = b.pd.alloc_buffer(4096, RW).expect("alloc inbox");
    let dst = b.pd.alloc_buffer(4096, RW).expect("alloc dst");
    post_recv(&b.qp, 100, inbox.sge(0, 4096).unwrap());
    post_recv(&b.qp, 101, inbox.sge(0, 4096).unwrap());

    post(
        &a.qp,
        1,
        SendOp::SendWithImm(0xdead_beef),
        src.sge(0, 100).unwrap(),
    );
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (1, WcStatus::Success, WcOpcode::Send),
        "{wc:?}"
    );
    let wc = b.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.imm_data),
        (
            100,
            WcStatus::Success,
            WcOpcode::Recv,
            100,
            Some(0xdead_beef)
        ),
        "{wc:?}"
    );
    assert_eq!(wc.src_qp, a.qp.qp_num());
    assert_eq!(inbox.buf().to_vec()[..100], src.buf().to_vec()[..100]);

    post(
        &a.qp,
        2,
        SendOp::RdmaWriteWithImm(remote(&dst, 0), 0x0102_0304),
        src.sge(4096, 3000).unwrap(),
    );
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (2, WcStatus::Success, WcOpcode::RdmaWrite),
        "{wc:?}"
    );
    let wc = b.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.imm_data),
        (
            101,
            WcStatus::Success,
            WcOpcode::RecvRdmaWithImm,
            3000,
            Some(0x0102_0304)
        ),
        "{wc:?}"
    );
    assert_eq!(dst.buf().to_vec()[..3000], src.buf().to_vec()[4096..7096]);
}

/// A SEND with no receive posted is answered RNR; after `rnr_retry` of
/// them it completes RNR_RETRY_EXC_ERR, the QP is in ERR, and what is
/// posted afterwards completes WR_FLUSH_ERR.
pub fn a_send_without_a_receive_exhausts_the_rnr_retries(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    let params = RcParams {
        rnr_retry: 1,
        min_rnr_timer: 1,
        ..a.params()
    };
    rc::connect(&a.qp, &b.peer(), &params).expect("connect a");
    rc::connect(&b.qp, &a.peer(), &b.params()).expect("connect b");
    let src = a.pd.alloc_buffer(4096, RW).expect("alloc src");
    post(&a.qp, 5, SendOp::Send, src.sge(0, 64).unwrap());
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status),
        (5, WcStatus::RnrRetryExcErr),
        "{wc:?}"
    );
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    post(&a.qp, 6, SendOp::Send, src.sge(0, 64).unwrap());
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (6, WcStatus::WrFlushErr), "{wc:?}");
}

/// Unsignalled WRITEs complete silently: only the signalled one that
/// follows them reports, and every WRITE's bytes landed.
pub fn unsignalled_writes_complete_silently(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    connect(&a, &b);
    let mut src = a.pd.alloc_buffer(6 * 512, RW).expect("alloc src");
    pattern::fill_buffer(src.buf_mut(), 0, 6 * 512, 0x516).unwrap();
    let dst = b.pd.alloc_buffer(6 * 512, RW).expect("alloc dst");
    for i in 0..6u64 {
        a.qp.post_send(&SendWr {
            wr_id: 10 + i,
            op: SendOp::RdmaWrite(remote(&dst, i * 512)),
            sg_list: vec![src.sge(i * 512, 512).unwrap()],
            signaled: i == 5,
            dc: None,
        })
        .expect("post_send");
    }
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (15, WcStatus::Success), "{wc:?}");
    assert_eq!(a.cq.wait_one(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(dst.buf().to_vec(), src.buf().to_vec());
}

/// The state table a NIC enforces: RTS back to RTR is refused and leaves
/// the QP in RTS; a send posted before RTS is refused; ERR, then RESET,
/// then INIT again is allowed.
pub fn illegal_transitions_are_refused(p: &dyn Provider, device: &str) {
    let a = End::new(p, device, REMOTE_RW);
    let b = End::new(p, device, REMOTE_RW);
    let src = a.pd.alloc_buffer(64, RW).expect("alloc src");
    let early = a.qp.post_send(&SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sg_list: vec![src.sge(0, 64).unwrap()],
        signaled: true,
        dc: None,
    });
    assert!(early.is_err(), "a send was accepted in INIT");
    connect(&a, &b);
    let back = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let refused = a.qp.modify(&back, QpAttrMask::STATE);
    assert!(refused.is_err(), "RTS -> RTR was accepted");
    assert_eq!(a.qp.state().unwrap(), QpState::Rts);
    rc::to_error(&a.qp).expect("to ERR");
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
    rc::reset_to_init(&a.qp, PORT, REMOTE_RW).expect("RESET, then INIT");
    assert_eq!(a.qp.state().unwrap(), QpState::Init);
}
