//! Provider-agnostic DC checks: a DC target and a DC initiator on the one
//! device (each in its own PD, as a client and a server are), the
//! initiator reaching the target through the port's best GID. Run against
//! the soft provider always and against libibverbs on a ConnectX (mlx5)
//! by `tests/dc_behaviour.rs`.

use super::{best_gid, RW};
use hipobj_fabric::rc::RcParams;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::{
    dc, pattern, AccessFlags, CompletionQueue, DcAddr, DcTarget, Device, ProtectionDomain, QpCap,
    QpType, QueuePair, RegisteredBuffer, RemoteAddr, SendOp, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};
use std::time::Duration;

const KEY: u64 = 0x0dc0_ffee_1234_5678;
const PORT: u8 = 1;
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(30);

/// The target side: its PD, CQ, DCT and a registered buffer.
pub struct Target {
    pub dev: Device,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub dct: DcTarget,
    pub buf: RegisteredBuffer,
}

/// The initiator side: its PD, CQ and a DCI in RTS.
pub struct Initiator {
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
}

/// Whether `device` of `p` has DC; prints why not when it has none.
pub fn has_dc(p: &dyn Provider, device: &str) -> bool {
    let dev = Device::open(p, device).unwrap_or_else(|e| panic!("open {device}: {e}"));
    if dev.info().supports_dc {
        return true;
    }
    println!(
        "SKIPPED DC on {device}: {}",
        dev.info().dc_unavailable.as_deref().unwrap_or("no DC")
    );
    false
}

/// A target with a `len`-byte buffer, and an initiator, on `device`.
pub fn pair(p: &dyn Provider, device: &str, len: usize) -> (Target, Initiator, DcAddr) {
    let dev = Device::open(p, device).unwrap_or_else(|e| panic!("open {device}: {e}"));
    let gid = best_gid(&dev.gid_table(PORT).expect("gid_table"));
    let pd = dev.alloc_pd().expect("alloc_pd");
    let cq = dev.create_cq(16).expect("create_cq");
    let dct = pd
        .create_dct(
            &cq,
            AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            KEY,
        )
        .expect("create_dct");
    let buf = pd.alloc_buffer(len, RW).expect("alloc target");
    let ipd = dev.alloc_pd().expect("alloc_pd");
    let icq = dev.create_cq(64).expect("create_cq");
    let qp = ipd
        .create_qp(
            QpType::DcInitiator,
            &icq,
            &icq,
            QpCap {
                max_send_wr: 16,
                max_recv_wr: 0,
                max_send_sge: 1,
                max_recv_sge: 0,
            },
        )
        .expect("create DCI");
    let port = dev.query_port(PORT).expect("query_port");
    let params = RcParams {
        gid_index: u8::try_from(gid.index).expect("GID index fits u8"),
        mtu: if port.active_mtu.bytes() < RcParams::default().mtu.bytes() {
            port.active_mtu
        } else {
            RcParams::default().mtu
        },
        // Fail fast where nothing answers: 4.096 µs × 2^10 ≈ 4 ms, 2 tries.
        timeout: 10,
        retry_cnt: 1,
        ..RcParams::default()
    }
    .within(dev.info());
    dc::initiator_to_rts(&qp, &params).expect("DCI to RTS");
    let to = DcAddr {
        gid: gid.gid,
        lid: port.lid,
        dct_num: dct.dct_num(),
        dc_key: KEY,
    };
    (
        Target {
            dev,
            pd,
            cq,
            dct,
            buf,
        },
        Initiator {
            pd: ipd,
            cq: icq,
            qp,
        },
        to,
    )
}

fn post(i: &Initiator, wr_id: u64, op: SendOp, local: &RegisteredBuffer, len: u32, to: DcAddr) {
    i.qp.post_send(&SendWr {
        wr_id,
        op,
        sg_list: vec![local.sge(0, len).unwrap()],
        signaled: true,
        dc: Some(to),
    })
    .expect("post_send");
}

fn wait(i: &Initiator) -> WorkCompletion {
    i.cq.wait_one(COMPLETION_TIMEOUT)
        .expect("poll")
        .unwrap_or_else(|| panic!("no completion within {COMPLETION_TIMEOUT:?}"))
}

/// A DC WRITE then READ of `len` bytes at an unaligned offset of the
/// target's buffer arrive byte for byte, with the right opcodes.
pub fn dc_write_then_read_is_byte_exact(p: &dyn Provider, device: &str, len: usize) {
    let (t, i, to) = pair(p, device, len + 8);
    let mut src = i.pd.alloc_buffer(len, RW).expect("alloc src");
    let back = i.pd.alloc_buffer(len, RW).expect("alloc back");
    pattern::fill_buffer(src.buf_mut(), 0, len, 0xdc).unwrap();
    let n = u32::try_from(len).unwrap();
    let remote = RemoteAddr {
        addr: t.buf.mr().addr() + 3,
        rkey: t.buf.mr().rkey(),
    };
    post(&i, 1, SendOp::RdmaWrite(remote), &src, n, to);
    let wc = wait(&i);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite),
        "{wc:?}"
    );
    let got = t.buf.buf().to_vec();
    assert_eq!(&got[..3], &[0, 0, 0], "bytes before the target changed");
    assert_eq!(
        pattern::first_mismatch(t.buf.buf(), 3, len, 0xdc).unwrap(),
        None,
        "DC WRITE landed wrong"
    );
    assert!(
        got[3 + len..].iter().all(|&b| b == 0),
        "bytes after changed"
    );
    post(&i, 2, SendOp::RdmaRead(remote), &back, n, to);
    let wc = wait(&i);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (2, WcStatus::Success, WcOpcode::RdmaRead),
        "{wc:?}"
    );
    assert_eq!(
        pattern::first_mismatch(back.buf(), 0, len, 0xdc).unwrap(),
        None,
        "DC READ returned wrong bytes"
    );
}

/// A DC WRITE presenting another key is dropped by the target: the
/// initiator's request exceeds its retries and the memory is untouched.
pub fn dc_with_a_wrong_key_is_dropped(p: &dyn Provider, device: &str) {
    let (t, i, to) = pair(p, device, 4096);
    let mut src = i.pd.alloc_buffer(4096, RW).expect("alloc src");
    src.buf_mut().fill(0xee);
    let remote = RemoteAddr {
        addr: t.buf.mr().addr(),
        rkey: t.buf.mr().rkey(),
    };
    let wrong = DcAddr {
        dc_key: KEY ^ 1,
        ..to
    };
    post(&i, 3, SendOp::RdmaWrite(remote), &src, 4096, wrong);
    let wc = wait(&i);
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::RetryExcErr), "{wc:?}");
    assert_eq!(t.buf.buf().to_vec(), vec![0u8; 4096], "a wrong key wrote");
}
