//! The extended QP's work-request interface (`ibv_wr_start`,
//! `ibv_wr_rdma_write`, `ibv_wr_set_sge`, `ibv_wr_complete` ...): the
//! header's inline `ibv_wr_*` functions call the function pointers of
//! `struct ibv_qp_ex`, which [`install`] fills in.
//!
//! Requests are built between `wr_start` and `wr_complete` and posted by
//! `wr_complete`, in order. An error met while building (an operation the
//! QP was not created for, an SGE or inline data with no request to attach
//! to, more SGEs than the QP's `max_send_sge`, more requests than its
//! `max_send_wr`) makes `wr_complete` return it and post nothing, as
//! rdma-core's providers do. Atomics, memory windows, invalidation, TSO, UD
//! and XRC record `EOPNOTSUPP`.

use crate::convert::send_flags;
use crate::ffi::{
    IBV_QP_EX_WITH_RDMA_READ, IBV_QP_EX_WITH_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
    IBV_QP_EX_WITH_SEND, IBV_QP_EX_WITH_SEND_WITH_IMM,
};
use crate::objects::{Builder, PendingWr, Qp};
use crate::post::post_inline;
use hipobj_fabric::ibverbs::abi::ibv_sge;
use hipobj_fabric::ibverbs::abi_ex::ibv_qp_ex;
use hipobj_fabric::{RemoteAddr, SendOp, SendWr, Sge};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `struct ibv_data_buf`.
#[repr(C)]
#[derive(Debug)]
struct IbvDataBuf {
    addr: *mut c_void,
    length: usize,
}

/// Runs `f` on the QP's builder; a panic is recorded as `EIO`.
fn with_builder(qpx: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut Builder)) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if qpx.is_null() {
            return;
        }
        // SAFETY: qpx is the `ex` field (offset 0) of a live Qp: only QPs
        // this library made carry these function pointers.
        let q = unsafe { &*qpx.cast::<Qp>() };
        let mut b = q.builder.lock().unwrap_or_else(|p| p.into_inner());
        let r = catch_unwind(AssertUnwindSafe(|| f(q, &mut b)));
        if r.is_err() {
            b.error.get_or_insert(libc::EIO);
        }
    }));
}

/// Starts a request of `op` (which must be among the QP's `send_ops`),
/// with the `wr_id` and `wr_flags` the program set in the `ibv_qp_ex`.
fn start_op(qpx: *mut ibv_qp_ex, needs: u64, op: SendOp) {
    with_builder(qpx, |q, b| {
        if !b.open {
            b.error.get_or_insert(libc::EINVAL);
            return;
        }
        if q.send_ops & needs == 0 {
            b.error.get_or_insert(libc::EINVAL);
            return;
        }
        if b.wrs.len() >= q.cap.max_send_wr as usize {
            // The send queue could not take them all: found here, so that
            // wr_complete posts none of them.
            b.error.get_or_insert(libc::ENOMEM);
            return;
        }
        let (signaled, _) = send_flags(q.ex.wr_flags, q.sq_sig_all);
        b.wrs.push(PendingWr {
            wr: SendWr {
                wr_id: q.ex.wr_id,
                op,
                sg_list: Vec::new(),
                signaled,
                dc: None,
            },
            inline: None,
        });
    });
}

/// Attaches `list` to the request being built: `EINVAL` if there is none,
/// or if the list is longer than the QP's `max_send_sge` (found here, so
/// that `wr_complete` posts nothing, rather than when posting it).
fn set_sges(qpx: *mut ibv_qp_ex, list: Vec<Sge>) {
    with_builder(qpx, |q, b| {
        let fits = list.len() <= q.cap.max_send_sge as usize;
        match b.wrs.last_mut() {
            Some(w) if b.open && fits => {
                w.inline = None;
                w.wr.sg_list = list;
            }
            _ => {
                b.error.get_or_insert(libc::EINVAL);
            }
        }
    });
}

fn unsupported(qpx: *mut ibv_qp_ex) {
    with_builder(qpx, |_, b| {
        b.error.get_or_insert(libc::EOPNOTSUPP);
    });
}

unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    crate::ffi::called("ibv_qp_ex.wr_start");
    with_builder(qpx, |_, b| {
        *b = Builder {
            open: true,
            ..Builder::default()
        };
    });
}

unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    crate::ffi::called("ibv_qp_ex.wr_abort");
    with_builder(qpx, |_, b| *b = Builder::default());
}

unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    crate::ffi::called("ibv_qp_ex.wr_complete");
    let mut rc = libc::EIO;
    with_builder(qpx, |q, b| {
        let built = std::mem::take(b);
        rc = if !built.open {
            libc::EINVAL
        } else if let Some(e) = built.error {
            e
        } else {
            post_all(q, built.wrs).err().unwrap_or(0)
        };
    });
    rc
}

fn post_all(q: &Qp, wrs: Vec<PendingWr>) -> Result<(), c_int> {
    for p in wrs {
        match p.inline {
            Some(data) => post_inline(q, p.wr, data.len() as u64, |dst| {
                // SAFETY: post_inline gives a slot with room for data.len()
                // bytes (it checked the length against the slot).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
            })?,
            None => q.qp.post_send(&p.wr).map_err(|e| e.errno())?,
        }
    }
    Ok(())
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    crate::ffi::called("ibv_qp_ex.wr_rdma_write");
    let r = RemoteAddr {
        addr: remote_addr,
        rkey,
    };
    start_op(qpx, IBV_QP_EX_WITH_RDMA_WRITE, SendOp::RdmaWrite(r));
}

unsafe extern "C" fn wr_rdma_write_imm(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_be: u32,
) {
    crate::ffi::called("ibv_qp_ex.wr_rdma_write_imm");
    let r = RemoteAddr {
        addr: remote_addr,
        rkey,
    };
    start_op(
        qpx,
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        SendOp::RdmaWriteWithImm(r, u32::from_be(imm_be)),
    );
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    crate::ffi::called("ibv_qp_ex.wr_rdma_read");
    let r = RemoteAddr {
        addr: remote_addr,
        rkey,
    };
    start_op(qpx, IBV_QP_EX_WITH_RDMA_READ, SendOp::RdmaRead(r));
}

unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    crate::ffi::called("ibv_qp_ex.wr_send");
    start_op(qpx, IBV_QP_EX_WITH_SEND, SendOp::Send);
}

unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm_be: u32) {
    crate::ffi::called("ibv_qp_ex.wr_send_imm");
    start_op(
        qpx,
        IBV_QP_EX_WITH_SEND_WITH_IMM,
        SendOp::SendWithImm(u32::from_be(imm_be)),
    );
}

unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    crate::ffi::called("ibv_qp_ex.wr_set_sge");
    set_sges(qpx, vec![Sge { addr, length, lkey }]);
}

unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    crate::ffi::called("ibv_qp_ex.wr_set_sge_list");
    let list: Vec<Sge> = if num_sge == 0 || sg_list.is_null() {
        Vec::new()
    } else {
        // SAFETY: the program's list has num_sge readable entries.
        unsafe { std::slice::from_raw_parts(sg_list, num_sge) }
            .iter()
            .map(|s| Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect()
    };
    set_sges(qpx, list);
}

/// Copies inline buffers now (the program may reuse them when the call
/// returns), capped at the QP's `max_inline_data`.
fn set_inline(qpx: *mut ibv_qp_ex, bufs: &[(*const u8, usize)]) {
    with_builder(qpx, |q, b| {
        let total = bufs.iter().try_fold(0usize, |t, (_, l)| t.checked_add(*l));
        let fits = total.is_some_and(|t| t <= q.cap.max_inline_data as usize);
        let Some(w) = b.wrs.last_mut().filter(|_| b.open && fits) else {
            b.error.get_or_insert(libc::EINVAL);
            return;
        };
        let mut data = Vec::with_capacity(total.unwrap_or(0));
        for (p, l) in bufs {
            if *l > 0 {
                // SAFETY: the program's inline buffer is readable for its
                // length (the verbs' contract).
                data.extend_from_slice(unsafe { std::slice::from_raw_parts(*p, *l) });
            }
        }
        w.wr.sg_list.clear();
        w.inline = Some(data);
    });
}

unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    crate::ffi::called("ibv_qp_ex.wr_set_inline_data");
    set_inline(qpx, &[(addr.cast_const().cast::<u8>(), length)]);
}

unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const IbvDataBuf,
) {
    crate::ffi::called("ibv_qp_ex.wr_set_inline_data_list");
    let bufs: Vec<(*const u8, usize)> = if num_buf == 0 || buf_list.is_null() {
        Vec::new()
    } else {
        // SAFETY: the program's list has num_buf readable entries.
        unsafe { std::slice::from_raw_parts(buf_list, num_buf) }
            .iter()
            .map(|b| (b.addr.cast_const().cast::<u8>(), b.length))
            .collect()
    };
    set_inline(qpx, &bufs);
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qpx: *mut ibv_qp_ex,
    _rkey: u32,
    _addr: u64,
    _cmp: u64,
    _swap: u64,
) {
    crate::ffi::called("ibv_qp_ex.wr_atomic_cmp_swp");
    unsupported(qpx);
}
unsafe extern "C" fn wr_atomic_fetch_add(qpx: *mut ibv_qp_ex, _rkey: u32, _addr: u64, _add: u64) {
    crate::ffi::called("ibv_qp_ex.wr_atomic_fetch_add");
    unsupported(qpx);
}
unsafe extern "C" fn wr_bind_mw(
    qpx: *mut ibv_qp_ex,
    _mw: *mut c_void,
    _rkey: u32,
    _info: *const c_void,
) {
    crate::ffi::called("ibv_qp_ex.wr_bind_mw");
    unsupported(qpx);
}
unsafe extern "C" fn wr_rkey_only(qpx: *mut ibv_qp_ex, _rkey: u32) {
    crate::ffi::called("ibv_qp_ex.wr_rkey_only");
    unsupported(qpx);
}
unsafe extern "C" fn wr_send_tso(qpx: *mut ibv_qp_ex, _hdr: *mut c_void, _hdr_sz: u16, _mss: u16) {
    crate::ffi::called("ibv_qp_ex.wr_send_tso");
    unsupported(qpx);
}
unsafe extern "C" fn wr_set_ud_addr(qpx: *mut ibv_qp_ex, _ah: *mut c_void, _qpn: u32, _qkey: u32) {
    crate::ffi::called("ibv_qp_ex.wr_set_ud_addr");
    unsupported(qpx);
}
unsafe extern "C" fn wr_atomic_write(
    qpx: *mut ibv_qp_ex,
    _rkey: u32,
    _addr: u64,
    _wr: *const c_void,
) {
    crate::ffi::called("ibv_qp_ex.wr_atomic_write");
    unsupported(qpx);
}

macro_rules! any_fn {
    ($f:expr, $t:ty) => {{
        let f: $t = $f;
        // SAFETY: a C function pointer stored in a slot of another C
        // function-pointer type (same size); the header's inline wrapper
        // calls it with exactly the signature it was defined with here.
        Some(unsafe { std::mem::transmute::<$t, unsafe extern "C" fn()>(f) })
    }};
}

/// Fills in the builder's function pointers of an `ibv_qp_ex`.
pub fn install(ex: &mut ibv_qp_ex) {
    type Rdma = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64);
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_rdma_write = Some(wr_rdma_write as Rdma);
    ex.wr_rdma_read = Some(wr_rdma_read as Rdma);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_rdma_write_imm = any_fn!(
        wr_rdma_write_imm,
        unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)
    );
    ex.wr_send = any_fn!(wr_send, unsafe extern "C" fn(*mut ibv_qp_ex));
    ex.wr_send_imm = any_fn!(wr_send_imm, unsafe extern "C" fn(*mut ibv_qp_ex, u32));
    ex.wr_set_inline_data = any_fn!(
        wr_set_inline_data,
        unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)
    );
    ex.wr_set_inline_data_list = any_fn!(
        wr_set_inline_data_list,
        unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const IbvDataBuf)
    );
    ex.wr_atomic_cmp_swp = any_fn!(
        wr_atomic_cmp_swp,
        unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)
    );
    ex.wr_atomic_fetch_add = any_fn!(
        wr_atomic_fetch_add,
        unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)
    );
    ex.wr_bind_mw = any_fn!(
        wr_bind_mw,
        unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u32, *const c_void)
    );
    ex.wr_local_inv = any_fn!(wr_rkey_only, unsafe extern "C" fn(*mut ibv_qp_ex, u32));
    ex.wr_send_inv = any_fn!(wr_rkey_only, unsafe extern "C" fn(*mut ibv_qp_ex, u32));
    ex.wr_send_tso = any_fn!(
        wr_send_tso,
        unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16)
    );
    ex.wr_set_ud_addr = any_fn!(
        wr_set_ud_addr,
        unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u32, u32)
    );
    ex.wr_set_xrc_srqn = any_fn!(wr_rkey_only, unsafe extern "C" fn(*mut ibv_qp_ex, u32));
    ex.wr_atomic_write = any_fn!(
        wr_atomic_write,
        unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)
    );
}
