//! Helpers shared by the soft provider's tests.
#![allow(dead_code)]

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::{SoftConfig, SoftProvider, SoftStats};
use hipobj_fabric::{
    AccessFlags, CompletionQueue, Device, Gid, ProtectionDomain, QpCap, QpType, QueuePair,
    RegisteredBuffer, RemoteAddr, SendOp, SendWr, Sge, WorkCompletion,
};
use std::net::Ipv4Addr;
use std::time::Duration;

pub const RW: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0,
);
pub const REMOTE_RW: AccessFlags =
    AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);

thread_local! {
    /// The path the current test runs on (see [`with_path`]); `None`: as
    /// the environment says.
    static CMA: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    /// Whether the path may be used while privileged (see
    /// [`with_default_privilege_rule`]); `None`: yes.
    static PRIVILEGED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `test` with the providers it makes using the same-host path
/// (`cma`) or only the TCP stream.
pub fn with_path(cma: bool, test: impl FnOnce()) {
    CMA.with(|c| c.set(Some(cma)));
    test();
    CMA.with(|c| c.set(None));
}

/// Runs `test` with the providers it makes using the same-host path only
/// as the default configuration does: not while this process is root or
/// holds CAP_SYS_PTRACE.
pub fn with_default_privilege_rule(test: impl FnOnce()) {
    PRIVILEGED.with(|c| c.set(Some(false)));
    test();
    PRIVILEGED.with(|c| c.set(None));
}

fn config(timeout_scale: f64) -> SoftConfig {
    let env = SoftConfig::from_env();
    SoftConfig {
        timeout_scale,
        cma: CMA.with(|c| c.get()).unwrap_or(env.cma),
        // These tests exercise the path itself, and CI runs them as root:
        // the privilege rule has tests of its own (`soft_cma.rs`).
        cma_privileged: PRIVILEGED.with(|c| c.get()).unwrap_or(true),
        ..SoftConfig::default()
    }
}

/// A provider whose timers run 10x faster than hardware, so failures that
/// wait for retries stay quick.
pub fn fast_provider() -> SoftProvider {
    SoftProvider::new(vec![Ipv4Addr::LOCALHOST], config(0.1))
}

/// A provider with hardware timing.
pub fn default_provider() -> SoftProvider {
    SoftProvider::new(vec![Ipv4Addr::LOCALHOST], config(1.0))
}

/// A provider with hardware timing whose same-host grants wait `done` for
/// the requester's done.
pub fn provider_with_done_timeout(done: Duration) -> SoftProvider {
    let config = SoftConfig {
        cma_done_timeout: done,
        ..config(1.0)
    };
    SoftProvider::new(vec![Ipv4Addr::LOCALHOST], config)
}

/// How long a test waits for an event that must come (a bound on a
/// failure, never on how long a success may take).
pub const LONG: Duration = Duration::from_secs(60);

/// Declares each named test twice: in `cma`, on the same-host path, and in
/// `tcp`, on the TCP stream only; every rule must hold on both.
#[macro_export]
macro_rules! both_paths {
    ($($name:ident),* $(,)?) => {
        mod cma {
            $( #[test] fn $name() { $crate::common::with_path(true, super::$name) } )*
        }
        mod tcp {
            $( #[test] fn $name() { $crate::common::with_path(false, super::$name) } )*
        }
    };
}

/// One end: a device, a PD, a CQ and an RC QP in INIT.
pub struct End {
    pub dev: Device,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    /// The device's counters, when this end opened the device.
    stats: Option<SoftStats>,
}

impl End {
    pub fn new(p: &SoftProvider) -> End {
        End::with_access(p, REMOTE_RW)
    }

    pub fn with_access(p: &SoftProvider, qp_access: AccessFlags) -> End {
        let (dev, stats) = p.open_ip_observed(Ipv4Addr::LOCALHOST);
        let pd = dev.alloc_pd().unwrap();
        End {
            stats: Some(stats),
            ..End::on(dev, pd, qp_access)
        }
    }

    /// The counters of this end's device (an end made by [`End::new`] or
    /// [`End::with_access`], which opened it).
    pub fn stats(&self) -> &SoftStats {
        self.stats.as_ref().expect("an end on a device it opened")
    }

    pub fn on(dev: Device, pd: ProtectionDomain, qp_access: AccessFlags) -> End {
        let cq = dev.create_cq(64).unwrap();
        let cap = QpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 2,
            max_recv_sge: 2,
        };
        let qp = pd.create_qp(QpType::Rc, &cq, &cq, cap).unwrap();
        rc::to_init(&qp, 1, qp_access).unwrap();
        End {
            dev,
            pd,
            cq,
            qp,
            stats: None,
        }
    }

    pub fn peer(&self) -> RcPeer {
        RcPeer {
            qp_num: self.qp.qp_num(),
            gid: self.dev.gid_table(1).unwrap()[0].gid,
            lid: 0,
        }
    }

    pub fn buffer(&self, len: usize, access: AccessFlags) -> RegisteredBuffer {
        self.pd.alloc_buffer(len, access).unwrap()
    }

    pub fn wait(&self) -> WorkCompletion {
        self.cq
            .wait_one(Duration::from_secs(60))
            .unwrap()
            .expect("no completion within 60 s")
    }
}

/// Connects `a`'s QP (to RTS) to QP number `qp_num` at 127.0.0.1: a peer
/// the test plays by hand on a listener of its own, whose port the number
/// names.
pub fn connect_to_local_qpn(a: &End, qp_num: u32) {
    let peer = RcPeer {
        qp_num,
        gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
        lid: 0,
    };
    rc::to_init(&a.qp, 1, RW).unwrap();
    rc::connect(&a.qp, &peer, &RcParams::default()).unwrap();
}

/// A fresh requester of a fast provider writes 4 KiB to a made-up address
/// and key at the peer a test plays by hand on a listener at `port` of
/// 127.0.0.1 (see [`connect_to_local_qpn`]): the completion. The
/// requester is gone on return (its connections closed).
pub fn write_4k_to_local_port(port: u16) -> WorkCompletion {
    let p = fast_provider();
    let a = End::new(&p);
    connect_to_local_qpn(&a, (u32::from(port) << 8) | 1);
    let src = a.buffer(4096, RW);
    a.qp.post_send(&SendWr {
        wr_id: 1,
        op: SendOp::RdmaWrite(RemoteAddr {
            addr: 0x7f00_0000_0000,
            rkey: 0x42,
        }),
        sg_list: vec![src.sge(0, 4096).unwrap()],
        signaled: true,
        dc: None,
    })
    .unwrap();
    a.wait()
}

/// Hands every connection `listener` accepts to `serve` until `stop` is
/// set (polling, so that the flag is seen without a last connection).
pub fn accept_until(
    listener: &std::net::TcpListener,
    stop: &std::sync::atomic::AtomicBool,
    mut serve: impl FnMut(std::net::TcpStream),
) {
    listener.set_nonblocking(true).unwrap();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match listener.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false).unwrap();
                serve(c);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Connects both QPs to each other (both end in RTS).
pub fn connect(a: &End, b: &End) {
    rc::connect(&a.qp, &b.peer(), &RcParams::default()).unwrap();
    rc::connect(&b.qp, &a.peer(), &RcParams::default()).unwrap();
}

pub fn write_wr(id: u64, local: Sge, remote: &RegisteredBuffer, off: u64) -> SendWr {
    SendWr {
        wr_id: id,
        op: SendOp::RdmaWrite(RemoteAddr {
            addr: remote.mr().addr() + off,
            rkey: remote.mr().rkey(),
        }),
        sg_list: vec![local],
        signaled: true,
        dc: None,
    }
}

/// An RDMA WRITE with immediate `imm` of `local` to `remote` at `off`.
pub fn write_imm_wr(id: u64, local: Sge, remote: &RegisteredBuffer, off: u64, imm: u32) -> SendWr {
    SendWr {
        op: SendOp::RdmaWriteWithImm(
            RemoteAddr {
                addr: remote.mr().addr() + off,
                rkey: remote.mr().rkey(),
            },
            imm,
        ),
        ..write_wr(id, local, remote, off)
    }
}

pub fn read_wr(id: u64, local: Sge, remote: &RegisteredBuffer, off: u64) -> SendWr {
    SendWr {
        wr_id: id,
        op: SendOp::RdmaRead(RemoteAddr {
            addr: remote.mr().addr() + off,
            rkey: remote.mr().rkey(),
        }),
        sg_list: vec![local],
        signaled: true,
        dc: None,
    }
}

/// A WRITE of `len` bytes to a second device and a READ of them back, on
/// providers of the path the test runs on, checked byte for byte.
pub fn write_then_read(len: usize) {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let mut src = a.buffer(len, RW);
    let remote = b.buffer(len, RW);
    let back = a.buffer(len, RW);
    hipobj_fabric::pattern::fill_buffer(src.buf_mut(), 0, len, 7).unwrap();

    a.qp.post_send(&write_wr(1, src.sge(0, len as u32).unwrap(), &remote, 0))
        .unwrap();
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (
            1,
            hipobj_fabric::WcStatus::Success,
            hipobj_fabric::WcOpcode::RdmaWrite
        )
    );
    assert_eq!(
        hipobj_fabric::pattern::first_mismatch(remote.buf(), 0, len, 7).unwrap(),
        None
    );

    a.qp.post_send(&read_wr(2, back.sge(0, len as u32).unwrap(), &remote, 0))
        .unwrap();
    let wc = a.wait();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (
            2,
            hipobj_fabric::WcStatus::Success,
            hipobj_fabric::WcOpcode::RdmaRead
        )
    );
    assert_eq!(wc.byte_len as usize, len);
    assert_eq!(
        hipobj_fabric::pattern::first_mismatch(back.buf(), 0, len, 7).unwrap(),
        None
    );
    // One-sided operations produce no completion on the responder.
    assert_eq!(
        b.cq.wait_one(std::time::Duration::from_millis(50)).unwrap(),
        None
    );
    assert_eq!(b.qp.state().unwrap(), hipobj_fabric::QpState::Rts);
}
