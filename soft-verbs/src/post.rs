//! Posting: `ibv_post_send` and `ibv_post_recv` (the context's entries,
//! which the header's inline functions call, and exported under those
//! names too), with inline data and several SGEs.
//!
//! An inline send's bytes are copied at post time into the QP's inline ring
//! (registered memory the program never sees, see
//! [`InlineRing`](crate::objects::InlineRing)), so the program may reuse
//! its buffer as soon as the post returns, as the verbs promise.

use crate::convert::{send_flags, send_op};
use crate::ffi::guard_errno;
use crate::objects::Qp;
use hipobj_fabric::ibverbs::abi::{ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge};
use hipobj_fabric::{RecvWr, RemoteAddr, SendOp, SendWr, Sge};
use std::ffi::c_int;

/// The SGEs of a C work request (`EINVAL` for a negative count or a NULL
/// list with entries).
///
/// # Safety
///
/// `sg_list` has `num_sge` readable entries when `num_sge` > 0.
pub unsafe fn sges<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Result<&'a [ibv_sge], c_int> {
    let n = usize::try_from(num_sge).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: n readable entries by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(sg_list, n) })
}

fn to_sge(s: &ibv_sge) -> Sge {
    Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}

/// Posts `wr` with inline data of `len` bytes, which `fill` copies into the
/// ring slot it is given. `EINVAL` when the data is longer than the QP's
/// `max_inline_data` (or it has no inline room for a non-empty one), or the
/// operation is a READ.
pub fn post_inline(
    q: &Qp,
    mut wr: SendWr,
    len: u64,
    fill: impl FnOnce(*mut u8),
) -> Result<(), c_int> {
    if matches!(wr.op, SendOp::RdmaRead(_)) {
        return Err(libc::EINVAL);
    }
    if len == 0 {
        // Nothing to copy, so no slot: zero bytes fit any QP's
        // max_inline_data, 0 included.
        wr.sg_list = Vec::new();
        return q.qp.post_send(&wr).map_err(|e| e.errno());
    }
    let ring = q.inline.as_ref().ok_or(libc::EINVAL)?;
    let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
    if len > ring.slot_len as u64 {
        return Err(libc::EINVAL);
    }
    let offset = (ring.posted % ring.slots) * ring.slot_len as u64;
    // SAFETY: offset + len <= slots * slot_len, the ring's length (checked
    // above: len <= slot_len and the slot index < slots).
    let dst = unsafe { ring.buf.buf().as_ptr().add(offset as usize) };
    fill(dst);
    wr.sg_list = vec![ring.buf.sge(offset, len as u32).map_err(|e| e.errno())?];
    q.qp.post_send(&wr).map_err(|e| e.errno())?;
    ring.posted += 1;
    Ok(())
}

/// Posts one C send work request.
///
/// # Safety
///
/// `w` is a readable work request whose SGE list (and, for inline sends,
/// the memory its SGEs name) is readable.
unsafe fn post_send_one(q: &Qp, w: &ibv_send_wr) -> Result<(), c_int> {
    // SAFETY: the caller's contract.
    let list = unsafe { sges(w.sg_list, w.num_sge)? };
    let (signaled, inline) = send_flags(w.send_flags, q.sq_sig_all);
    // SAFETY: `rdma` is plain integers at the union's start: whichever
    // member the program wrote, its bytes are valid integers (and ignored
    // for sends).
    let rdma = unsafe { w.wr.rdma };
    // SAFETY: the union's members are both u32.
    let imm = unsafe { w.imm.imm_data };
    let op = send_op(
        w.opcode,
        RemoteAddr {
            addr: rdma.remote_addr,
            rkey: rdma.rkey,
        },
        imm,
    )?;
    let wr = SendWr {
        wr_id: w.wr_id,
        op,
        sg_list: Vec::new(),
        signaled,
        dc: None,
    };
    if inline {
        let total = list
            .iter()
            .try_fold(0u64, |t, s| t.checked_add(u64::from(s.length)))
            .ok_or(libc::EINVAL)?;
        return post_inline(q, wr, total, |mut dst| {
            for s in list {
                // SAFETY: an inline SGE names program memory readable for
                // its length (the verbs' contract, lkey ignored); `dst` has
                // room for the total, checked by post_inline.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        s.addr as usize as *const u8,
                        dst,
                        s.length as usize,
                    );
                    dst = dst.add(s.length as usize);
                }
            }
        });
    }
    let wr = SendWr {
        sg_list: list.iter().map(to_sge).collect(),
        ..wr
    };
    q.qp.post_send(&wr).map_err(|e| e.errno())
}

/// Walks a program's linked list of work requests from `wr`, posting each
/// with `one`; on the first refusal, `*bad_wr` names it and its errno value
/// is returned (those before it are posted), as the verbs do.
///
/// # Safety
///
/// `qp` is a live QP; `wr` a readable list whose `next` is `next(w)`;
/// `bad_wr` NULL or writable; `one` may read each element and what it names.
unsafe fn post_list<W>(
    qp: *mut ibv_qp,
    wr: *mut W,
    bad_wr: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut one: impl FnMut(&Qp, &W) -> Result<(), c_int>,
) -> c_int {
    let mut failed = wr;
    let rc = guard_errno(|| {
        // SAFETY: the caller's contract.
        let q = unsafe { Qp::from_raw(qp)? };
        let mut cur = wr;
        while !cur.is_null() {
            failed = cur;
            // SAFETY: each element of the program's list is readable.
            let w = unsafe { &*cur };
            one(q, w)?;
            cur = next(w);
        }
        Ok(())
    });
    if rc != 0 && !bad_wr.is_null() {
        // SAFETY: writable by the caller's contract.
        unsafe { bad_wr.write(failed) };
    }
    rc
}

/// `ibv_context_ops::post_send`: posts the list in order (`post_list`).
///
/// # Safety
///
/// `qp` is a live QP; `wr` a readable list; `bad_wr` writable.
pub unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    crate::ffi::called("ibv_context_ops.post_send");
    // SAFETY: the caller's contract is post_list's; each element's SGEs and
    // inline memory are readable by the same contract (post_send_one's).
    unsafe { post_list(qp, wr, bad_wr, |w| w.next, |q, w| post_send_one(q, w)) }
}

/// `ibv_context_ops::post_recv`, as [`post_send`] for receives.
///
/// # Safety
///
/// `qp` is a live QP; `wr` a readable list; `bad_wr` writable.
pub unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    crate::ffi::called("ibv_context_ops.post_recv");
    let one = |q: &Qp, w: &ibv_recv_wr| {
        // SAFETY: its SGE list is readable (the caller's contract).
        let list = unsafe { sges(w.sg_list, w.num_sge)? };
        let r = RecvWr {
            wr_id: w.wr_id,
            sg_list: list.iter().map(to_sge).collect(),
        };
        q.qp.post_recv(&r).map_err(|e| e.errno())
    };
    // SAFETY: the caller's contract is post_list's.
    unsafe { post_list(qp, wr, bad_wr, |w| w.next, one) }
}

/// `ibv_post_send`, exported for programs that look it up by name.
///
/// # Safety
///
/// As [`post_send`].
#[no_mangle]
pub unsafe extern "C" fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    crate::ffi::called("ibv_post_send");
    // SAFETY: same contract.
    unsafe { post_send(qp, wr, bad_wr) }
}

/// `ibv_post_recv`, exported for programs that look it up by name.
///
/// # Safety
///
/// As [`post_recv`].
#[no_mangle]
pub unsafe extern "C" fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    crate::ffi::called("ibv_post_recv");
    // SAFETY: same contract.
    unsafe { post_recv(qp, wr, bad_wr) }
}
