//! The `#[repr(C)]` types of `include/hipobj.h`.

use crate::error::{Error, OpError};
use std::ffi::{c_char, c_int, c_void};

/// `hipObjError_t`: the operation error and the HIP error behind it.
///
/// Both fields are plain `int`s, as C lays out the enum; the library only
/// ever writes values of [`OpError`] into `op_error`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HipObjError {
    /// `opError`: a `hipObjOpError_t` value.
    pub op_error: c_int,
    /// `hipError`: the `hipError_t` behind it, or 0.
    pub hip_error: c_int,
}

impl HipObjError {
    /// `HIPOBJ_SUCCESS`.
    pub const SUCCESS: HipObjError = HipObjError::op(OpError::Success);

    /// An error with no HIP error behind it.
    pub const fn op(op: OpError) -> HipObjError {
        HipObjError {
            op_error: op as c_int,
            hip_error: 0,
        }
    }

    /// The operation error, if the value is one.
    pub fn op_error(self) -> Option<OpError> {
        OpError::from_raw(self.op_error)
    }
}

impl From<&Error> for HipObjError {
    fn from(e: &Error) -> HipObjError {
        HipObjError {
            op_error: e.op as c_int,
            hip_error: e.hip_error,
        }
    }
}

/// `hipObjOps_t.sendRequest`: sends the S3 request with the token (88
/// characters, NUL-terminated) in `x-amz-rdma-token`; negative on failure.
pub type SendRequestFn =
    unsafe extern "C" fn(ctx: *mut c_void, token: *const c_char, token_len: usize) -> c_int;

/// `hipObjOps_t.recvReply`: writes the `x-amz-rdma-reply` value into
/// `reply`; `*reply_len` is the room on entry and the length written on
/// return; negative on failure.
pub type RecvReplyFn =
    unsafe extern "C" fn(ctx: *mut c_void, reply: *mut c_char, reply_len: *mut usize) -> c_int;

/// `hipObjOps_t`: the application's S3 side of a transfer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjOps {
    /// `sendRequest`, or NULL (which makes a transfer invalid).
    pub send_request: Option<SendRequestFn>,
    /// `recvReply`, or NULL (which makes a transfer invalid).
    pub recv_reply: Option<RecvReplyFn>,
}

/// `hipObjConfig_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjConfig {
    /// `endpoint`, or NULL.
    pub endpoint: *const c_char,
    /// `region`, or NULL.
    pub region: *const c_char,
    /// `accessKey`, or NULL.
    pub access_key: *const c_char,
    /// `secretKey`, or NULL.
    pub secret_key: *const c_char,
    /// `flags`: reserved, must be 0.
    pub flags: u32,
    /// `gpuDevice`: a HIP device index, or -1 for the current one.
    pub gpu_device: c_int,
    /// `nicHint`, or NULL.
    pub nic_hint: *const c_char,
}
