//! hipobj-rc-v2's paths, header names and fixed values.

/// The value of [`H_PROTOCOL`].
pub const PROTOCOL: &str = "hipobj-rc-v2";
/// PREPARE's path (no query).
pub const PREPARE_PATH: &str = "/.hipobj-rc/prepare";
/// READY's path.
pub const READY_PATH: &str = "/.hipobj-rc/ready";
/// CANCEL's path.
pub const CANCEL_PATH: &str = "/.hipobj-rc/cancel";

/// The protocol, on every request and answer.
pub const H_PROTOCOL: &str = "x-amz-rdma-protocol";
/// PREPARE: the client's token (its QP and GID); answer: `200:` and the
/// server's (`x-amz-rdma-reply`, as in the handshake flow).
pub const H_TOKEN: &str = crate::headers::RDMA_TOKEN;
/// The answer's reply (`200:<server token>` to a PREPARE).
pub const H_REPLY: &str = crate::headers::RDMA_REPLY;
/// PREPARE: the client's first PSN; answer: the server's.
pub const H_PSN: &str = "x-amz-rdma-psn";
/// PREPARE, READY and FINAL: the transfer's cookie (the RDMA immediate).
pub const H_COOKIE: &str = "x-amz-rdma-cookie";
/// PREPARE: `GET` or `PUT`.
pub const H_OP: &str = "x-amz-rdma-op";
/// PREPARE: the object ([`Target`](super::Target)).
pub const H_TARGET: &str = "x-amz-rdma-target";
/// PREPARE: the bytes to move.
pub const H_SIZE: &str = "x-amz-rdma-size";
/// PREPARE: where in the object they start (absent: 0).
pub const H_OFFSET: &str = "x-amz-rdma-offset";
/// PREPARE's answer, READY and CANCEL: the session.
pub const H_SESSION: &str = "x-amz-rdma-session";
/// READY: the client's QPN; PREPARE's answer: the server's (informative:
/// the client takes it from the reply token).
pub const H_QPN: &str = "x-amz-rdma-qpn";
/// A memory region's address (READY: the client's buffer; PREPARE's
/// answer: the server's staging region, which a PUT writes into).
pub const H_MR_ADDR: &str = "x-amz-rdma-mr-addr";
/// The same region's rkey.
pub const H_MR_RKEY: &str = "x-amz-rdma-mr-rkey";
/// FINAL: the bytes moved.
pub const H_BYTES: &str = crate::headers::RDMA_BYTES_TRANSFERRED;
/// FINAL: the object's ETag.
pub const H_ETAG: &str = "x-amz-rdma-etag";
/// FINAL: the object's version id.
pub const H_VERSION_ID: &str = "x-amz-rdma-version-id";
/// FINAL: `CRC64NVME <base64>` of the bytes moved.
pub const H_CHECKSUM: &str = "x-amz-rdma-checksum";
/// What the server can do beyond whole objects (`mp`: parts).
pub const H_CAPABILITIES: &str = "x-amz-rdma-capabilities";
/// `unsupported`, with a 501: the server does not speak v2 here.
pub const H_PROTOCOL_STATUS: &str = "x-amz-rdma-protocol-status";
/// The value of [`H_PROTOCOL_STATUS`] that declines v2.
pub const UNSUPPORTED: &str = "unsupported";
/// The capability of part transfers (UploadPart, part GETs).
pub const CAPABILITY_PARTS: &str = "mp";
/// hipobj's own capability: the same endpoint also serves the connect-first
/// handshake flow (a token on the S3 request itself, answered with
/// `x-amz-rdma-reply`). Peers that do not know it skip it, as they skip any
/// capability they do not know.
pub const CAPABILITY_HANDSHAKE: &str = "hipobj-handshake";
