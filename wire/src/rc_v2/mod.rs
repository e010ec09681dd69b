//! hipobj-rc-v2's wire vocabulary: the control requests' and answers'
//! headers and values, parsed strictly and formatted as the peers read
//! them (AMD hipObject's `hipObjGetV2`/`hipObjPutV2` clients, versitygw's
//! RC data plane). The protocol, with the choices this project made where
//! the two sources differ, is in docs/protocol.md ("hipobj-rc-v2").
//!
//! Three body-less `POST`s: [`PREPARE_PATH`] (the server makes a QP and
//! answers its QPN and PSN), [`READY_PATH`] (the client has connected; the
//! server moves the bytes, then answers the outcome) and [`CANCEL_PATH`].
//! The object is named by [`H_TARGET`], a signed header ([`Target`]).
//!
//! - [`fields`]: the values (session id, cookie, PSN, size and offset,
//!   bare hex numbers, the operation, the checksum).
//! - [`target`]: `X-Amz-Rdma-Target`, built and split.
//! - [`messages`]: each request and answer as a struct, read from a header
//!   getter and written as `(name, value)` pairs.

pub mod fields;
pub mod messages;
mod names;
pub mod target;

pub use fields::{Cookie, FieldError, Op, Psn, SessionId, Span, MAX_TRANSFER};
pub use messages::{Final, Headers, MessageError, Prepare, PrepareAnswer, Ready, Staging};
pub use names::{
    CANCEL_PATH, CAPABILITY_HANDSHAKE, CAPABILITY_PARTS, H_BYTES, H_CAPABILITIES, H_CHECKSUM,
    H_COOKIE, H_ETAG, H_MR_ADDR, H_MR_RKEY, H_OFFSET, H_OP, H_PROTOCOL, H_PROTOCOL_STATUS, H_PSN,
    H_QPN, H_REPLY, H_SESSION, H_SIZE, H_TARGET, H_TOKEN, H_VERSION_ID, PREPARE_PATH, PROTOCOL,
    READY_PATH, UNSUPPORTED,
};
pub use target::{Part, Target, TargetError, MAX_PART_NUMBER, TARGET_MAX_LEN};
