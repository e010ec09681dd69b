//! Queue pairs: `ibv_create_qp` (and the extended `ibv_create_qp_ex`),
//! `ibv_modify_qp`, `ibv_query_qp`, `ibv_destroy_qp`, `ibv_qp_to_qp_ex`.
//!
//! RC only (UD, UC, XRC and raw packet QPs are `EOPNOTSUPP`), without a
//! shared receive queue. State changes go through the soft QP's state
//! table, which checks transitions and attribute masks as a NIC does.

use crate::convert::{qp_attr_from_c, qp_attr_to_c};
use crate::cq::cq_of;
use crate::ffi::{
    guard_errno, guard_ptr, IBV_QPT_RC, IBV_QP_INIT_ATTR_PD, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
    SUPPORTED_SEND_OPS,
};
use crate::memory::pd_of;
use crate::objects::{leak, Builder, InlineRing, Qp, MAX_INLINE, VERBS_QP_EX};
use crate::wr_builder::install;
use hipobj_fabric::ibverbs::abi::{
    ibv_context, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr,
};
use hipobj_fabric::ibverbs::abi_ex::{ibv_qp_ex, ibv_qp_init_attr_ex};
use hipobj_fabric::{AccessFlags, QpCap, QpType};
use std::ffi::c_int;
use std::sync::Mutex;

/// What a QP is created with, from either creation call.
struct Init {
    pd: *mut ibv_pd,
    attr: ibv_qp_init_attr,
    send_ops: Option<u64>,
}

fn create(init: Init) -> Result<(*mut Qp, ibv_qp_cap), c_int> {
    let a = &init.attr;
    if a.qp_type != IBV_QPT_RC {
        return Err(libc::EOPNOTSUPP);
    }
    if !a.srq.is_null() {
        return Err(libc::EOPNOTSUPP);
    }
    if a.cap.max_inline_data > MAX_INLINE {
        return Err(libc::EINVAL);
    }
    // SAFETY: the program passes live objects of this library.
    let (pd, send_cq, recv_cq) = unsafe { (pd_of(init.pd)?, cq_of(a.send_cq)?, cq_of(a.recv_cq)?) };
    let cap = QpCap {
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
    };
    let qp = pd
        .pd
        .create_qp(QpType::Rc, &send_cq.cq, &recv_cq.cq, cap)
        .map_err(|e| e.errno())?;
    let inline = if a.cap.max_inline_data > 0 && a.cap.max_send_wr > 0 {
        let slots = u64::from(a.cap.max_send_wr) * 2;
        let slot_len = a.cap.max_inline_data as usize;
        let len = usize::try_from(slots)
            .ok()
            .and_then(|s| s.checked_mul(slot_len))
            .ok_or(libc::ENOMEM)?;
        let buf = pd
            .pd
            .alloc_buffer(len, AccessFlags::EMPTY)
            .map_err(|e| e.errno())?;
        Some(Mutex::new(InlineRing {
            buf,
            slot_len,
            slots,
            posted: 0,
        }))
    } else {
        None
    };
    let send_ops = init.send_ops.unwrap_or(SUPPORTED_SEND_OPS);
    if send_ops & !SUPPORTED_SEND_OPS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: ibv_qp_ex is integers, pointers, optional function pointers
    // and pthread objects: all-zero bytes are valid (the static
    // initializers, NULLs).
    let mut ex: ibv_qp_ex = unsafe { std::mem::zeroed() };
    // SAFETY: a live PD (checked above).
    ex.qp_base.context = unsafe { (*init.pd).context };
    ex.qp_base.qp_context = a.qp_context;
    ex.qp_base.pd = init.pd;
    ex.qp_base.send_cq = a.send_cq;
    ex.qp_base.recv_cq = a.recv_cq;
    ex.qp_base.qp_num = qp.qp_num();
    ex.qp_base.handle = qp.qp_num();
    ex.qp_base.state = 0;
    ex.qp_base.qp_type = IBV_QPT_RC;
    ex.comp_mask = 0;
    install(&mut ex);
    let out_cap = ibv_qp_cap {
        max_inline_data: a.cap.max_inline_data,
        ..a.cap
    };
    pd.children.add();
    send_cq.children.add();
    recv_cq.children.add();
    let obj = leak(Qp {
        ex,
        comp_mask: if init.send_ops.is_some() {
            VERBS_QP_EX
        } else {
            0
        },
        qp,
        pd: std::ptr::from_ref(pd),
        send_cq: std::ptr::from_ref(send_cq),
        recv_cq: std::ptr::from_ref(recv_cq),
        sq_sig_all: a.sq_sig_all != 0,
        cap: out_cap,
        send_ops,
        inline,
        builder: Mutex::new(Builder::default()),
    });
    Ok((obj, out_cap))
}

/// `ibv_create_qp`: RC only; writes the capacities it got back into
/// `qp_init_attr->cap`.
///
/// # Safety
///
/// `pd` is a live PD; `qp_init_attr` is readable and writable, its CQs live.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    crate::ffi::called("ibv_create_qp");
    guard_ptr(|| {
        if qp_init_attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: readable by the caller's contract.
        let attr = unsafe { *qp_init_attr };
        let (qp, cap) = create(Init {
            pd,
            attr,
            send_ops: None,
        })?;
        // SAFETY: writable by the caller's contract.
        unsafe { (*qp_init_attr).cap = cap };
        Ok(qp.cast::<ibv_qp>())
    })
}

/// `verbs_context::create_qp_ex` (what the header's `ibv_create_qp_ex`
/// calls): needs `IBV_QP_INIT_ATTR_PD`; with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP has an `ibv_qp_ex` whose
/// `ibv_wr_*` interface posts the operations named. Other creation
/// attributes are `EOPNOTSUPP`.
///
/// # Safety
///
/// `context` is an open context; `attr` is readable and writable.
pub unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    crate::ffi::called("verbs_context.create_qp_ex");
    guard_ptr(|| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: readable by the caller's contract.
        let a = unsafe { *attr };
        if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & !(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0
            || a.create_flags != 0
        {
            return Err(libc::EOPNOTSUPP);
        }
        // SAFETY: a.pd is a live PD (contract); its context must be this one.
        if unsafe { (*a.pd).context } != context {
            return Err(libc::EINVAL);
        }
        let send_ops =
            (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
        let (qp, cap) = create(Init {
            pd: a.pd,
            attr: ibv_qp_init_attr {
                qp_context: a.qp_context,
                send_cq: a.send_cq,
                recv_cq: a.recv_cq,
                srq: a.srq.cast(),
                cap: a.cap,
                qp_type: a.qp_type,
                sq_sig_all: a.sq_sig_all,
            },
            send_ops,
        })?;
        // SAFETY: writable by the caller's contract.
        unsafe { (*attr).cap = cap };
        Ok(qp.cast::<ibv_qp>())
    })
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP made by `ibv_create_qp_ex`
/// with send operations, else NULL.
///
/// # Safety
///
/// `qp` is a live QP of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    crate::ffi::called("ibv_qp_to_qp_ex");
    // SAFETY: the caller's contract.
    match unsafe { Qp::from_raw(qp) } {
        Ok(q) if q.comp_mask & VERBS_QP_EX != 0 => qp.cast::<ibv_qp_ex>(),
        _ => std::ptr::null_mut(),
    }
}

/// `ibv_modify_qp`: 0 or an errno value (`EINVAL` for a transition or an
/// attribute the state table refuses).
///
/// # Safety
///
/// `qp` is a live QP; `attr` is readable.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    crate::ffi::called("ibv_modify_qp");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let q = unsafe { Qp::from_raw(qp)? };
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: readable by the caller's contract.
        let (a, mask) = qp_attr_from_c(unsafe { &*attr }, attr_mask)?;
        q.qp.modify(&a, mask).map_err(|e| e.errno())?;
        if let Ok(state) = q.qp.state() {
            // SAFETY: `state` of the program-visible ibv_qp, which the
            // program reads (rdma-core writes it on modify too).
            unsafe { std::ptr::addr_of_mut!((*qp).state).write(state as u32) };
        }
        Ok(())
    })
}

/// `ibv_query_qp`: the current attributes (the mask is advisory, as on
/// rdma-core: everything known is filled in) and the creation attributes.
///
/// # Safety
///
/// `qp` is a live QP; `attr` and `init_attr` are writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    crate::ffi::called("ibv_query_qp");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let q = unsafe { Qp::from_raw(qp)? };
        if attr.is_null() || init_attr.is_null() {
            return Err(libc::EINVAL);
        }
        let cur = q.qp.query().map_err(|e| e.errno())?;
        let mut out = ibv_qp_attr::default();
        qp_attr_to_c(&cur, &mut out);
        out.cap = q.cap;
        // SAFETY: writable by the caller's contract.
        unsafe {
            attr.write(out);
            init_attr.write(ibv_qp_init_attr {
                qp_context: q.ex.qp_base.qp_context,
                send_cq: q.ex.qp_base.send_cq,
                recv_cq: q.ex.qp_base.recv_cq,
                srq: std::ptr::null_mut(),
                cap: q.cap,
                qp_type: IBV_QPT_RC,
                sq_sig_all: c_int::from(q.sq_sig_all),
            });
        }
        Ok(())
    })
}

/// `ibv_destroy_qp`: returns once nothing reads or writes memory for the
/// QP's work requests.
///
/// # Safety
///
/// `qp` is a live QP of this library, destroyed once.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    crate::ffi::called("ibv_destroy_qp");
    guard_errno(|| {
        if qp.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: made by Box::into_raw in create; freed once.
        let q = unsafe { Box::from_raw(qp.cast::<Qp>()) };
        let (pd, scq, rcq) = (q.pd, q.send_cq, q.recv_cq);
        drop(q);
        // SAFETY: parents outlive their children (their destroy is
        // refused while the children live).
        unsafe {
            (*pd).children.remove();
            (*scq).children.remove();
            (*rcq).children.remove();
        }
        Ok(())
    })
}

/// `ibv_query_qp_data_in_order`: 0 (no in-order placement guarantee is
/// claimed beyond the verbs').
#[no_mangle]
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut ibv_qp, _op: u32, _flags: u32) -> c_int {
    crate::ffi::called("ibv_query_qp_data_in_order");
    0
}
