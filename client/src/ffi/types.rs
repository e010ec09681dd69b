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

// ---- hipobj-rc-v2 ------------------------------------------------------

/// `hipObjControlEndpointV2_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjControlEndpointV2 {
    /// `controlEndpoint`: the control endpoint's URI (the library copies it).
    pub control_endpoint: *const c_char,
}

/// `hipObjConfigV2_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjConfigV2 {
    /// `v1`: every `hipObjConfig_t` field.
    pub v1: HipObjConfig,
    /// `control`: the control endpoint (required).
    pub control: HipObjControlEndpointV2,
    /// `connectDeadlineMs`: 0 for the default (10 s).
    pub connect_deadline_ms: u32,
    /// `transferDeadlineMs`: 0 for the default (60 s).
    pub transfer_deadline_ms: u32,
    /// `cancelCleanupBudgetMs`: 0 for the default (1 s).
    pub cancel_cleanup_budget_ms: u32,
}

/// `hipObjTransferReqV2_t`: what each v2 callback is asked to send. Its
/// strings are the library's and valid only during the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjTransferReqV2 {
    /// `method`: "GET" or "PUT".
    pub method: *const c_char,
    /// `bucket`.
    pub bucket: *const c_char,
    /// `key`.
    pub key: *const c_char,
    /// `query`, or NULL.
    pub query: *const c_char,
    /// `token`: the client's 88-hex RC token.
    pub token: *const c_char,
    /// `session`: READY and CANCEL; NULL for PREPARE.
    pub session: *const c_char,
    /// `target`: the `x-amz-rdma-target` value.
    pub target: *const c_char,
    /// `size`.
    pub size: u64,
    /// `offset`: into the object.
    pub offset: u64,
    /// `cookie`.
    pub cookie: u32,
    /// `clientPsn`.
    pub client_psn: u32,
    /// `deadlineMs`: what is left of the transfer's budget.
    pub deadline_ms: u32,
    /// `remainingMs`: the budget of this callback.
    pub remaining_ms: u32,
    /// `endpoint`: the control endpoint from `hipObjInitV2`, or NULL.
    pub endpoint: *const HipObjControlEndpointV2,
    /// `nic`: the RDMA device's name.
    pub nic: *const c_char,
    /// `nicPort`.
    pub nic_port: c_int,
    /// `nicGidIndex`.
    pub nic_gid_index: c_int,
    /// `clientQpn`: READY's QPN; 0 before.
    pub client_qpn: u32,
    /// `clientMrAddr`: READY's buffer address; 0 before.
    pub client_mr_addr: u64,
    /// `clientMrRkey`: READY's buffer rkey; 0 before.
    pub client_mr_rkey: u32,
}

/// `hipObjPrepareReplyV2_t`: PREPARE's answer, as the application read it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjPrepareReplyV2 {
    /// `httpStatus`.
    pub http_status: c_int,
    /// `protocolEcho`: 1 when `x-amz-rdma-protocol: hipobj-rc-v2` came.
    pub protocol_echo: c_int,
    /// `unsupportedMarker`: 1 when `x-amz-rdma-protocol-status: unsupported` came.
    pub unsupported_marker: c_int,
    /// `serverToken`: the 88-hex token after `200:` in `x-amz-rdma-reply`.
    pub server_token: [c_char; 97],
    /// `session`: 32 hex digits.
    pub session: [c_char; 65],
    /// `serverPsn`.
    pub server_psn: u32,
    /// `stagingAddr`.
    pub staging_addr: u64,
    /// `stagingRkey`.
    pub staging_rkey: u32,
    /// `stagingPresent`.
    pub staging_present: c_int,
}

/// `hipObjFinalReplyV2_t`: READY's answer (FINAL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjFinalReplyV2 {
    /// `httpStatus`.
    pub http_status: c_int,
    /// `protocolEcho`.
    pub protocol_echo: c_int,
    /// `bytes`.
    pub bytes: u64,
    /// `cookieEcho`.
    pub cookie_echo: u32,
    /// `etag`, or empty.
    pub etag: [c_char; 128],
    /// `versionId`, or empty.
    pub version_id: [c_char; 128],
    /// `checksumB64`: the 12 base64 characters of `x-amz-rdma-checksum`, or empty.
    pub checksum_b64: [c_char; 13],
    /// `cookiePresent`: 1 when the cookie echo came.
    pub cookie_present: c_int,
}

/// `hipObjOpsV2_t.sendPrepare`.
pub type SendPrepareFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    req: *const HipObjTransferReqV2,
    out: *mut HipObjPrepareReplyV2,
) -> c_int;
/// `hipObjOpsV2_t.sendReadyRequest`.
pub type SendReadyRequestFn =
    unsafe extern "C" fn(ctx: *mut c_void, req: *const HipObjTransferReqV2) -> c_int;
/// `hipObjOpsV2_t.finishReady`.
pub type FinishReadyFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    req: *const HipObjTransferReqV2,
    out: *mut HipObjFinalReplyV2,
) -> c_int;
/// `hipObjOpsV2_t.sendCancel`.
pub type SendCancelFn =
    unsafe extern "C" fn(ctx: *mut c_void, req: *const HipObjTransferReqV2) -> c_int;

/// `hipObjOpsV2_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipObjOpsV2 {
    /// `v1`: not used by the v2 functions.
    pub v1: HipObjOps,
    /// `sendPrepare`.
    pub send_prepare: Option<SendPrepareFn>,
    /// `sendReadyRequest`.
    pub send_ready_request: Option<SendReadyRequestFn>,
    /// `finishReady`.
    pub finish_ready: Option<FinishReadyFn>,
    /// `sendCancel`.
    pub send_cancel: Option<SendCancelFn>,
}
