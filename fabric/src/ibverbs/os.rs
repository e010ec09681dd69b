//! Errors from libibverbs calls: errno and the return-code convention.

use crate::error::{FabricError, Result};
use std::ffi::c_int;
use std::io;

pub(super) const PROVIDER: &str = "verbs";

/// The calling thread's errno, read right after the failing call.
pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `FabricError::Os` for `errno` (EIO when the call left errno at 0).
pub(super) fn os_err(verb: &'static str, errno: i32) -> FabricError {
    FabricError::Os {
        verb,
        source: io::Error::from_raw_os_error(if errno == 0 { libc::EIO } else { errno }),
    }
}

/// libibverbs calls that return an int return 0 or an errno value; a few
/// old providers return -1 and set errno instead. Call right after the
/// verb, before anything else can change errno.
pub(super) fn check(verb: &'static str, rc: c_int) -> Result<()> {
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(os_err(verb, rc)),
        _ => Err(os_err(verb, errno())),
    }
}
