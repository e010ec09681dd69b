//! Wire formats of S3 over RDMA.
//!
//! Everything a peer puts on the wire is untrusted: every parser here is
//! total (never panics), checks lengths before it reads, and rejects anything
//! the formats do not allow instead of guessing.
//!
//! - [`Token`]: hipObject's 88-hex binary token (RC or DC).
//! - [`DcDescriptor`]: NVIDIA cuObject's 81-character DC descriptor.
//! - [`detect`]: tells the dialects of an `x-amz-rdma-token` value apart,
//!   including the legacy `:addr:size` suffix.
//! - [`Reply`]: the `x-amz-rdma-reply` grammar.
//! - [`headers`]: header names; [`checksum`]: the CRC-64/NVME header value.
//! - [`rc_v2`]: hipobj-rc-v2's control requests and answers.
//! - [`redacted`]: a token shortened for logs.

#![forbid(unsafe_code)]

pub mod checksum;
pub mod descriptor;
pub mod dialect;
pub mod gid;
pub mod headers;
mod hex;
pub mod rc_v2;
pub mod redact;
pub mod reply;
pub mod token;

pub use descriptor::{DcDescriptor, DescriptorError, DCT_NUM_MAX, DESCRIPTOR_LEN};
pub use dialect::{detect, Detected, DialectError, LegacySuffix, SuffixError, TokenValue};
pub use gid::Gid;
pub use redact::redacted;
pub use reply::{Reply, ReplyError, REPLY_MAX_LEN};
pub use token::{Token, TokenError, Transport, TOKEN_BYTES, TOKEN_HEX_LEN};
