//! What every exported function stands on: the guard that keeps panics
//! inside (a panic is `EIO`, never an unwind into C), errno, and the C
//! declarations that `hipobj_fabric::ibverbs::abi` does not carry.

#![allow(non_camel_case_types, missing_docs)]

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot,
    // valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` for a verb that returns 0 or an errno value (rdma-core's
/// convention for `ibv_modify_qp`, `ibv_dereg_mr` ...). A panic is `EIO`.
pub fn guard_errno(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => e,
        Err(_) => libc::EIO,
    }
}

/// Runs `f` for a verb that returns 0, or -1 with errno set (`ibv_query_gid`,
/// `ibv_get_cq_event` ...). A panic is -1 with `EIO`.
pub fn guard_minus1(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => e,
        Err(_) => libc::EIO,
    };
    set_errno(e);
    -1
}

/// Runs `f` for a verb that returns a pointer, or NULL with errno set.
pub fn guard_ptr<T>(f: impl FnOnce() -> Result<*mut T, c_int>) -> *mut T {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(p)) => return p,
        Ok(Err(e)) => e,
        Err(_) => libc::EIO,
    };
    set_errno(e);
    std::ptr::null_mut()
}

/// Runs `f` for a verb that returns a count or a negative value (`poll_cq`).
pub fn guard_count(f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => -e,
        Err(_) => -libc::EIO,
    }
}

/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (`enum ibv_gid_type_sysfs`, the private one).
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: u32 = 1;

/// `IBV_SEND_FENCE`.
pub const IBV_SEND_FENCE: u32 = 1;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: u32 = 2;
/// `IBV_SEND_SOLICITED`.
pub const IBV_SEND_SOLICITED: u32 = 4;
/// `IBV_SEND_INLINE`.
pub const IBV_SEND_INLINE: u32 = 8;

/// `IBV_QPT_RC`, `IBV_QPT_UC`, `IBV_QPT_UD`.
pub const IBV_QPT_RC: u32 = 2;

/// `IBV_QP_INIT_ATTR_PD`, `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` and the
/// `comp_mask` bits of `ibv_qp_init_attr_ex` this library understands.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `IBV_QP_EX_WITH_*`: the operations an extended QP may post.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;

/// The `IBV_QP_EX_WITH_*` operations this library posts.
pub const SUPPORTED_SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ;

/// `HIPOBJ_SOFT_VERBS_CALLS`: a file to which, at exit, the process appends
/// every entry of this library it called, with how many times (one
/// `name count` line each, then a blank line): which verbs a program uses,
/// inline ones included (`ibv_context_ops.post_send`, ...).
pub const ENV_CALLS: &str = "HIPOBJ_SOFT_VERBS_CALLS";

static CALLS_FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
static CALLS: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Counts a call of `name` when [`ENV_CALLS`] is set (one atomic load
/// otherwise).
pub fn called(name: &'static str) {
    let file = CALLS_FILE.get_or_init(|| {
        let f = std::env::var_os(ENV_CALLS).map(std::path::PathBuf::from);
        if f.is_some() {
            // SAFETY: registers a function with no preconditions, which
            // lives as long as the library (glibc runs it before this
            // library is unloaded).
            unsafe { libc::atexit(write_calls) };
        }
        f
    });
    if file.is_some() {
        let mut c = CALLS.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry(name).or_insert(0) += 1;
    }
}

extern "C" fn write_calls() {
    let _ = catch_unwind(|| {
        use std::io::Write;
        let Some(Some(path)) = CALLS_FILE.get() else {
            return;
        };
        let calls = CALLS.lock().unwrap_or_else(|p| p.into_inner());
        let mut text = String::new();
        for (name, n) in calls.iter() {
            text.push_str(&format!("{name} {n}\n"));
        }
        text.push('\n');
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(text.as_bytes());
        }
    });
}
