//! The application's `hipObjOps_t` callbacks and context as an [`S3Ops`].

use super::types::{HipObjOps, RecvReplyFn, SendRequestFn};
use crate::error::{Error, Result};
use crate::transfer::S3Ops;
use std::ffi::{c_char, c_void, CString};

/// `hipObjOps_t` and its `ctx`, checked: both callbacks are present.
///
/// The callbacks run on the thread that called `hipObjGet`/`hipObjPut`,
/// with no library lock held.
#[derive(Debug)]
pub struct CallbackOps {
    send: SendRequestFn,
    recv: RecvReplyFn,
    ctx: *mut c_void,
}

impl CallbackOps {
    /// Checks `ops` (NULL, or a NULL callback, is `hipObjInvalidValue`).
    ///
    /// The callbacks are only called through [`S3Ops`], where their
    /// contract (the header's) applies: each must be safe to call with the
    /// `ctx` given here and the arguments the header describes.
    pub fn new(ops: Option<&HipObjOps>, ctx: *mut c_void) -> Result<CallbackOps> {
        let ops = ops.ok_or_else(|| Error::invalid("ops is NULL"))?;
        let send = ops
            .send_request
            .ok_or_else(|| Error::invalid("ops->sendRequest is NULL"))?;
        let recv = ops
            .recv_reply
            .ok_or_else(|| Error::invalid("ops->recvReply is NULL"))?;
        Ok(CallbackOps { send, recv, ctx })
    }
}

impl S3Ops for CallbackOps {
    fn send_request(&mut self, token: &str) -> std::result::Result<(), i32> {
        // A token is hex; one with a NUL cannot happen, but is refused
        // rather than truncated.
        let c = CString::new(token).map_err(|_| -1)?;
        // SAFETY: the application's callback, given its own ctx and a
        // NUL-terminated token of `token.len()` characters that outlives
        // the call, as the header documents for sendRequest.
        let rc = unsafe { (self.send)(self.ctx, c.as_ptr(), token.len()) };
        if rc < 0 {
            Err(rc)
        } else {
            Ok(())
        }
    }

    fn recv_reply(&mut self, reply: &mut [u8]) -> std::result::Result<usize, i32> {
        let mut len = reply.len();
        // SAFETY: the application's callback, given its own ctx, a buffer
        // of `len` writable bytes and a valid `size_t` holding `len`, as
        // the header documents for recvReply. Whatever length it reports
        // is checked against the capacity by the caller (`transfer`)
        // before the buffer is read.
        let rc = unsafe { (self.recv)(self.ctx, reply.as_mut_ptr().cast::<c_char>(), &mut len) };
        if rc < 0 {
            Err(rc)
        } else {
            Ok(len)
        }
    }
}
