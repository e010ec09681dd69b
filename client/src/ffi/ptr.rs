//! Checks and conversions of the pointers C passes in, so the exported
//! functions never dereference one by hand.
//!
//! Each helper is `unsafe` with one contract: a pointer that is not NULL
//! must be valid for what the helper does with it, as the header documents
//! for the argument it came from. NULL is always checked here.

use crate::error::{Error, Result};
use std::ffi::{c_char, c_void, CStr};

/// A buffer address as the library keys it; NULL is 0, which the library
/// rejects itself where an address is needed.
pub(super) fn addr(p: *const c_void) -> usize {
    p as usize
}

/// A reference to an optional argument.
///
/// # Safety
///
/// A non-NULL `p` must point to a valid, initialized `T` that is not
/// written during `'a`.
pub(super) unsafe fn optional<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: `as_ref` only dereferences a non-NULL pointer, which the
    // caller promises is valid for `'a`.
    unsafe { p.as_ref() }
}

/// A reference to a required argument.
///
/// # Safety
///
/// As [`optional`].
pub(super) unsafe fn required<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: the caller's promise, passed on.
    unsafe { optional(p) }.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}

/// A required out-parameter, checked for NULL before the call does any
/// work.
#[derive(Debug)]
pub(super) struct Out<T> {
    p: *mut T,
}

impl<T> Out<T> {
    /// Checks `p`.
    ///
    /// # Safety
    ///
    /// A non-NULL `p` must be valid for writes of a `T` (it need not be
    /// initialized or aligned) for as long as the returned `Out` lives.
    pub(super) unsafe fn new(p: *mut T, what: &str) -> Result<Out<T>> {
        if p.is_null() {
            return Err(Error::invalid(format!("{what} is NULL")));
        }
        Ok(Out { p })
    }

    /// Stores `v`.
    pub(super) fn write(&self, v: T) {
        // SAFETY: `p` is not NULL and, by `new`'s contract, valid for
        // writes of a `T`; `write_unaligned` needs no alignment and drops
        // nothing that was there.
        unsafe { self.p.write_unaligned(v) }
    }
}

/// An optional NUL-terminated UTF-8 string.
///
/// # Safety
///
/// A non-NULL `p` must point to a NUL-terminated string that stays valid
/// and unwritten during the call.
pub(super) unsafe fn opt_str(p: *const c_char, what: &str) -> Result<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL, and NUL-terminated by the caller's promise.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// A required NUL-terminated UTF-8 string.
///
/// # Safety
///
/// As [`opt_str`].
pub(super) unsafe fn req_str(p: *const c_char, what: &str) -> Result<String> {
    // SAFETY: the caller's promise, passed on.
    unsafe { opt_str(p, what) }?.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}

/// A required byte range (`len` may be 0; the pointer must still be
/// non-NULL).
///
/// # Safety
///
/// A non-NULL `p` must be valid for reads of `len` bytes that are not
/// written during `'a`.
pub(super) unsafe fn bytes<'a>(p: *const c_char, len: usize, what: &str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if isize::try_from(len).is_err() {
        return Err(Error::invalid(format!("{what} length {len} is too large")));
    }
    // SAFETY: not NULL, at most isize::MAX bytes, and valid for reads of
    // `len` bytes for `'a` by the caller's promise; u8 has no invalid
    // values and alignment 1.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// A caller's output buffer of `len` bytes for a NUL-terminated string.
#[derive(Debug)]
pub(super) struct OutStr {
    p: *mut u8,
    len: usize,
}

impl OutStr {
    /// Checks `p`.
    ///
    /// # Safety
    ///
    /// A non-NULL `p` must be valid for writes of `len` bytes (initialized
    /// or not) for as long as the returned `OutStr` lives.
    pub(super) unsafe fn new(p: *mut c_char, len: usize, what: &str) -> Result<OutStr> {
        if p.is_null() {
            return Err(Error::invalid(format!("{what} is NULL")));
        }
        Ok(OutStr { p: p.cast(), len })
    }

    /// Copies `s` and a NUL in, if there is room for both.
    pub(super) fn write(&self, s: &str, what: &str) -> Result<()> {
        if s.len() >= self.len || s.as_bytes().contains(&0) {
            return Err(Error::invalid(format!(
                "{what} has {} bytes, {} needed",
                self.len,
                s.len() + 1
            )));
        }
        // SAFETY: `s.len() + 1 <= len` bytes at `p` are valid for writes by
        // `new`'s contract, and caller memory cannot overlap `s`.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), self.p, s.len());
            self.p.add(s.len()).write(0);
        }
        Ok(())
    }

    /// Leaves an empty string, if there is room for its NUL.
    pub(super) fn clear(&self) {
        if self.len > 0 {
            // SAFETY: the buffer has at least one byte, valid for writes by
            // `new`'s contract.
            unsafe { self.p.write(0) }
        }
    }
}

/// A `malloc`ed NUL-terminated copy of `s`, for the caller to `free`
/// (through `hipObjPutRdmaToken`).
pub(super) fn malloc_cstr(s: &str) -> Result<*mut c_char> {
    // SAFETY: malloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::malloc(s.len() + 1) }.cast::<u8>();
    if p.is_null() {
        return Err(Error::new(
            crate::error::OpError::InternalError,
            "out of memory copying the token",
        ));
    }
    // SAFETY: `p` is a fresh allocation of `s.len() + 1` bytes, which
    // cannot overlap `s`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
        p.add(s.len()).write(0);
    }
    Ok(p.cast::<c_char>())
}
