//! hipObject's C ABI (`include/hipobj.h`) over [`crate::c_semantics`].
//!
//! Every exported function runs its body inside `boundary::run`: a panic is
//! caught there and reported as `hipObjInternalError` (or a fallback
//! string), so no unwind crosses into C. Pointers from C are checked and
//! converted by the helpers in `ptr`, never by hand in the functions.
//!
//! - [`types`]: the `#[repr(C)]` mirrors of the header's types.
//! - [`ops`]: the application's `hipObjOps_t` callbacks as an [`S3Ops`].
//! - [`exports`]: the `hipObj*` functions.
//!
//! [`S3Ops`]: crate::transfer::S3Ops

mod boundary;
mod constants;
pub mod exports;
pub mod ops;
pub mod ops_v2;
mod ptr;
pub mod types;

pub use constants::{
    HIPOBJ_BASE_ERR, HIPOBJ_DIAG_DEADLINE_EXPIRED, HIPOBJ_RDMA_OP_GET, HIPOBJ_RDMA_OP_PUT,
    HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED, HIPOBJ_RDMA_REPLY_RECONNECT, HIPOBJ_SYNC_TO_DEVICE,
    HIPOBJ_SYNC_TO_HOST,
};
pub use exports::*;
pub use ops::CallbackOps;
pub use ops_v2::CallbackOpsV2;
pub use types::{
    HipObjConfig, HipObjConfigV2, HipObjControlEndpointV2, HipObjError, HipObjFinalReplyV2,
    HipObjOps, HipObjOpsV2, HipObjPrepareReplyV2, HipObjTransferReqV2, RecvReplyFn, SendRequestFn,
};

#[cfg(test)]
mod ops_v2_tests;
