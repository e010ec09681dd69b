//! Verbs a soft device does not have, and rdma-core's private interface to
//! its provider libraries: each answers cleanly (NULL with errno, an errno
//! value, or nothing for a `void` function), never a crash.
//!
//! The private interface (`IBVERBS_PRIVATE_34`) is what `libmlx5.so.1` and
//! `libefa.so.1` bind; programs such as perftest link those libraries, so
//! they must load. Their constructors call `verbs_register_driver_34`,
//! which does nothing here: no device of theirs is ever listed or opened,
//! so none of their other entries is ever reached.

use crate::ffi::{guard_minus1, guard_ptr, set_errno};
use crate::objects::Context;
use hipobj_fabric::ibverbs::abi::ibv_context;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;

/// Functions that only fail with EOPNOTSUPP, returning an errno value
/// (their arguments, whatever they are, are ignored: in the C calling
/// convention a callee may ignore the arguments it is passed).
macro_rules! errno_fns {
    ($($name:ident,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: `EOPNOTSUPP`.")]
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            crate::ffi::called(stringify!($name));
            libc::EOPNOTSUPP
        }
    )*};
}

/// Functions that only fail, returning NULL with errno `EOPNOTSUPP`.
macro_rules! null_fns {
    ($($name:ident,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: NULL, `EOPNOTSUPP`.")]
        #[no_mangle]
        pub extern "C" fn $name() -> *mut c_void {
            crate::ffi::called(stringify!($name));
            guard_ptr(|| Err(libc::EOPNOTSUPP))
        }
    )*};
}

/// `void` functions with nothing to do.
macro_rules! void_fns {
    ($($name:ident,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: nothing to do.")]
        #[no_mangle]
        pub extern "C" fn $name() {
            crate::ffi::called(stringify!($name));
        }
    )*};
}

errno_fns! {
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
    execute_ioctl,
    ibv_attach_mcast,
    ibv_detach_mcast,
    ibv_destroy_ah,
    ibv_destroy_srq,
    ibv_modify_srq,
    ibv_query_srq,
    ibv_query_ece,
    ibv_set_ece,
    ibv_resolve_eth_l2_from_gid,
    ibv_init_ah_from_wc,
}

null_fns! {
    _verbs_init_and_alloc_context,
    verbs_open_device,
    ibv_create_ah,
    ibv_create_ah_from_wc,
    ibv_create_srq,
    ibv_import_device,
    ibv_import_pd,
    ibv_import_mr,
    ibv_import_dm,
}

void_fns! {
    __verbs_log,
    verbs_init_cq,
    verbs_register_driver_34,
    verbs_set_ops,
    verbs_uninit_context,
    ibv_register_driver,
    ibv_copy_path_rec_from_kern,
    ibv_copy_path_rec_to_kern,
    ibv_copy_qp_attr_from_kern,
    ibv_copy_ah_attr_from_kern,
    ibv_ack_async_event,
    ibv_unimport_pd,
    ibv_unimport_mr,
    ibv_unimport_dm,
}

/// `__ioctl_final_num_attrs`: the count it is given.
#[no_mangle]
pub extern "C" fn __ioctl_final_num_attrs(num_attrs: c_uint, _link: *mut c_void) -> c_uint {
    crate::ffi::called("__ioctl_final_num_attrs");
    num_attrs
}

/// `verbs_allow_disassociate_destroy`: false.
#[no_mangle]
pub extern "C" fn verbs_allow_disassociate_destroy(_fw_ret: c_int) -> bool {
    crate::ffi::called("verbs_allow_disassociate_destroy");
    false
}

/// `ibv_read_ibdev_sysfs_file`: -1 (a soft device has no sysfs directory).
#[no_mangle]
pub extern "C" fn ibv_read_ibdev_sysfs_file() -> c_int {
    crate::ffi::called("ibv_read_ibdev_sysfs_file");
    -1
}

/// `ibv_fork_init`: 0 (the soft provider pins nothing, so fork is safe).
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    crate::ffi::called("ibv_fork_init");
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (2).
#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    crate::ffi::called("ibv_is_fork_initialized");
    2
}

/// `ibv_dontfork_range`: 0.
#[no_mangle]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    crate::ffi::called("ibv_dontfork_range");
    0
}

/// `ibv_dofork_range`: 0.
#[no_mangle]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    crate::ffi::called("ibv_dofork_range");
    0
}

/// `ibv_context_ops::post_srq_recv`: `EOPNOTSUPP` (no SRQ is ever made).
///
/// # Safety
///
/// None needed: the arguments are never read. It is `unsafe` for the
/// function-pointer slot it fills.
pub unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    _wr: *mut c_void,
    _bad_wr: *mut *mut c_void,
) -> c_int {
    crate::ffi::called("ibv_context_ops.post_srq_recv");
    libc::EOPNOTSUPP
}

/// `ibv_get_async_event`: a soft port never changes state and no QP
/// raises an affiliated event, so it waits on the context's `async_fd`
/// forever, as on a quiet NIC, or, when the program made the descriptor
/// non-blocking, returns -1 with `EAGAIN`.
///
/// # Safety
///
/// `context` is an open context.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    _event: *mut c_void,
) -> c_int {
    crate::ffi::called("ibv_get_async_event");
    guard_minus1(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        let mut v = 0u64;
        loop {
            // SAFETY: 8 writable bytes into a live eventfd.
            let n = unsafe {
                libc::read(
                    ctx.async_fd.as_raw_fd(),
                    std::ptr::from_mut(&mut v).cast(),
                    8,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if e == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            // Nothing ever writes it; a count read means someone did.
            set_errno(libc::EIO);
            return Err(libc::EIO);
        }
    })
}
