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
pub mod exports;
pub mod ops;
pub mod ops_v2;
mod ptr;
pub mod types;

pub use exports::*;
pub use ops::CallbackOps;
pub use ops_v2::CallbackOpsV2;
pub use types::{
    HipObjConfig, HipObjConfigV2, HipObjControlEndpointV2, HipObjError, HipObjFinalReplyV2,
    HipObjOps, HipObjOpsV2, HipObjPrepareReplyV2, HipObjTransferReqV2, RecvReplyFn, SendRequestFn,
};

/// `HIPOBJ_BASE_ERR`: where hipObject's error codes start when mapped into
/// a wider space.
pub const HIPOBJ_BASE_ERR: i32 = 6000;
/// `HIPOBJ_RDMA_OP_PUT`.
pub const HIPOBJ_RDMA_OP_PUT: i32 = 0;
/// `HIPOBJ_RDMA_OP_GET`.
pub const HIPOBJ_RDMA_OP_GET: i32 = 1;
/// `HIPOBJ_SYNC_TO_HOST`.
pub const HIPOBJ_SYNC_TO_HOST: i32 = 0;
/// `HIPOBJ_SYNC_TO_DEVICE`.
pub const HIPOBJ_SYNC_TO_DEVICE: i32 = 1;
/// `HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED`: the server declined RDMA.
pub const HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED: i32 = 501;
/// `HIPOBJ_RDMA_REPLY_RECONNECT`: the server does not know the QP pair.
pub const HIPOBJ_RDMA_REPLY_RECONNECT: i32 = crate::transfer::REPLY_RECONNECT as i32;
/// `HIPOBJ_DIAG_DEADLINE_EXPIRED`: the `hipError` of a v2 transfer that
/// failed `hipObjBusy` because its deadline expired ("TIME").
pub const HIPOBJ_DIAG_DEADLINE_EXPIRED: i32 = crate::v2::DIAG_DEADLINE_EXPIRED;

#[cfg(test)]
mod ops_v2_tests;
