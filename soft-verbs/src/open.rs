//! `ibv_open_device` and `ibv_close_device`: the context, with the entries
//! the header's inline functions call (`ibv_context_ops` for posting and
//! polling, `verbs_context` for the extended port and device queries and
//! `ibv_create_qp_ex`).

use crate::cq::{poll_cq, req_notify_cq};
use crate::device::{device_rec_of, devices, query_device_ex, query_port_ex};
use crate::ffi::{guard_errno, guard_ptr};
use crate::inert::post_srq_recv;
use crate::objects::{leak, Context};
use crate::post::{post_recv, post_send};
use crate::qp::create_qp_ex;
use hipobj_fabric::ibverbs::abi::{ibv_context, ibv_device, verbs_context, VERBS_ABI_IS_EXTENDED};
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

macro_rules! any_fn {
    ($f:expr, $t:ty) => {{
        let f: $t = $f;
        // SAFETY: a C function pointer stored in a slot declared with a
        // placeholder function-pointer type (same size); callers (the
        // header's inline functions) call it with the signature it was
        // defined with.
        Some(unsafe { std::mem::transmute::<$t, unsafe extern "C" fn()>(f) })
    }};
}

/// `ibv_open_device`: opens the soft device (its listeners bind now).
///
/// # Safety
///
/// `device` is a device of the list `ibv_get_device_list` returned.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    crate::ffi::called("ibv_open_device");
    guard_ptr(|| {
        let rec = device_rec_of(device)?;
        let soft = devices()?.provider.open_ip(rec.ip);
        // SAFETY: plain syscall; checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        // SAFETY: a new descriptor nothing else owns.
        let async_fd = unsafe { OwnedFd::from_raw_fd(efd) };
        // SAFETY: verbs_context is integers, pointers, optional function
        // pointers and a pthread mutex: all-zero bytes are valid (NULL
        // entries, the mutex's static initializer).
        let mut vctx: verbs_context = unsafe { std::mem::zeroed() };
        vctx.query_port = Some(query_port_ex);
        vctx.query_device_ex = any_fn!(
            query_device_ex,
            unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut c_void, usize) -> c_int
        );
        vctx.create_qp_ex = any_fn!(
            create_qp_ex,
            unsafe extern "C" fn(
                *mut ibv_context,
                *mut hipobj_fabric::ibverbs::abi_ex::ibv_qp_init_attr_ex,
            ) -> *mut hipobj_fabric::ibverbs::abi::ibv_qp
        );
        vctx.sz = std::mem::size_of::<verbs_context>();
        let c = &mut vctx.context;
        c.device = device;
        c.ops.poll_cq = Some(poll_cq);
        c.ops.req_notify_cq = Some(req_notify_cq);
        c.ops.post_send = Some(post_send);
        c.ops.post_recv = Some(post_recv);
        c.ops.post_srq_recv = any_fn!(
            post_srq_recv,
            unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> c_int
        );
        c.cmd_fd = -1;
        c.async_fd = async_fd.as_raw_fd();
        c.num_comp_vectors = 1;
        c.abi_compat = VERBS_ABI_IS_EXTENDED as *mut c_void;
        let obj = leak(Context {
            vctx,
            rec,
            device: soft,
            async_fd,
        });
        // SAFETY: obj was just leaked; the pointer handed out is its
        // context field, which Context::from_raw steps back from.
        Ok(unsafe { std::ptr::addr_of_mut!((*obj).vctx.context) })
    })
}

/// `ibv_close_device`.
///
/// # Safety
///
/// `context` is an open context, closed once, its objects destroyed.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    crate::ffi::called("ibv_close_device");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        // SAFETY: made by Box::into_raw in ibv_open_device; freed once.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(ctx).cast_mut()) });
        Ok(())
    })
}
