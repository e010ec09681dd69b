//! The panic boundary every exported function runs inside.

use super::types::HipObjError;
use crate::error::{OpError, Result};
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, mapping its error to `{opError, hipError}` (the message goes to
/// the debug log under `function`) and a panic to `hipObjInternalError`.
///
/// `AssertUnwindSafe` is sound here: after a panic nothing `f` touched is
/// used again by this call, and the library's shared state is behind locks
/// whose poisoning it recovers from.
pub(super) fn run(function: &'static str, f: impl FnOnce() -> Result<()>) -> HipObjError {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => HipObjError::SUCCESS,
        Ok(Err(e)) => {
            tracing::debug!(function, op = ?e.op, hip_error = e.hip_error, "{}", e.message);
            HipObjError::from(&e)
        }
        Err(_) => {
            tracing::error!(function, "a panic was caught at the C API boundary");
            HipObjError::op(OpError::InternalError)
        }
    }
}

/// Runs `f`, which returns a static string; a panic gives `fallback`.
pub(super) fn run_str(
    function: &'static str,
    fallback: &'static std::ffi::CStr,
    f: impl FnOnce() -> &'static std::ffi::CStr,
) -> *const c_char {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(s) => s.as_ptr(),
        Err(_) => {
            tracing::error!(function, "a panic was caught at the C API boundary");
            fallback.as_ptr()
        }
    }
}
