//! HTTP header names and values of S3 over RDMA. Header names are lowercase,
//! as HTTP/2 writes them; HTTP/1.1 compares them without regard to case.

/// Request: the client's buffer (and, for RC, its queue pair). Must be among
/// the SigV4 signed headers.
pub const RDMA_TOKEN: &str = "x-amz-rdma-token";
/// Request: `1` with a handshake-form token (RC, no buffer): the client
/// has let go of the QP the token names, and the server releases its pair
/// (this project's goodbye; docs/protocol.md). Signed like the token.
pub const RDMA_GOODBYE: &str = "x-amz-rdma-goodbye";
/// Response: the server's verdict on the RDMA part of the request
/// (see [`crate::Reply`]).
pub const RDMA_REPLY: &str = "x-amz-rdma-reply";
/// Response: the decimal count of bytes moved by RDMA (GET).
pub const RDMA_BYTES_TRANSFERRED: &str = "x-amz-rdma-bytes-transferred";
/// NooBaa's default name for [`RDMA_BYTES_TRANSFERRED`].
pub const NOOBAA_RDMA_BYTES: &str = "x-amz-rdma-bytes";

/// The SigV4 payload hash header.
pub const CONTENT_SHA256: &str = "x-amz-content-sha256";
/// The [`CONTENT_SHA256`] value RDMA requests sign with: their body is empty.
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// CRC-64/NVME of the buffer's bytes, base64 of the big-endian value.
pub const CHECKSUM_CRC64NVME: &str = "x-amz-checksum-crc64nvme";
/// CRC-32 (ISO-HDLC) of the buffer's bytes.
pub const CHECKSUM_CRC32: &str = "x-amz-checksum-crc32";
/// CRC-32C (Castagnoli) of the buffer's bytes.
pub const CHECKSUM_CRC32C: &str = "x-amz-checksum-crc32c";
/// SHA-1 of the buffer's bytes.
pub const CHECKSUM_SHA1: &str = "x-amz-checksum-sha1";
/// SHA-256 of the buffer's bytes.
pub const CHECKSUM_SHA256: &str = "x-amz-checksum-sha256";
/// Every checksum header, the project's default (CRC64NVME) first.
pub const CHECKSUM_HEADERS: [&str; 5] = [
    CHECKSUM_CRC64NVME,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    CHECKSUM_SHA1,
    CHECKSUM_SHA256,
];
/// Names the checksum algorithm of a request (`CRC64NVME`, `CRC32`, ...).
pub const CHECKSUM_ALGORITHM: &str = "x-amz-checksum-algorithm";
/// The SDKs' form of [`CHECKSUM_ALGORITHM`].
pub const SDK_CHECKSUM_ALGORITHM: &str = "x-amz-sdk-checksum-algorithm";
/// Response: whether the stored checksum covers the whole object
/// (`FULL_OBJECT`) or is a checksum of part checksums (`COMPOSITE`).
pub const CHECKSUM_TYPE: &str = "x-amz-checksum-type";
