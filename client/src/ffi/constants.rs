//! The C header's constants (`include/hipobj.h`): operations, sync
//! directions, reply codes.

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
