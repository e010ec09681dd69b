//! Which S3 operation a token request is, and the buffer a token may name
//! for it.

use http::StatusCode;

use super::mover::RemoteBuffer;
use crate::s3err::S3Error;

/// Which S3 operation a token request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// GetObject (including Range and partNumber GETs).
    GetObject,
    /// PutObject.
    PutObject,
    /// UploadPart.
    UploadPart,
    /// Anything else: RDMA is declined.
    Other,
}

impl Operation {
    /// Its S3 name (`Other` for the rest), as metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            Operation::GetObject => "GetObject",
            Operation::PutObject => "PutObject",
            Operation::UploadPart => "UploadPart",
            Operation::Other => "Other",
        }
    }
}

/// Classifies a path-style request (a virtual-hosted one is made
/// path-style before it gets here), with [`crate::s3op`]'s rules.
pub fn classify(method: &http::Method, uri: &http::Uri, headers: &http::HeaderMap) -> Operation {
    let copy = headers.contains_key("x-amz-copy-source");
    match crate::s3op::classify(method, None, uri.path(), uri.query(), copy, &[]).op {
        crate::s3op::Operation::GetObject => Operation::GetObject,
        crate::s3op::Operation::PutObject => Operation::PutObject,
        crate::s3op::Operation::UploadPart => Operation::UploadPart,
        _ => Operation::Other,
    }
}

/// The largest object S3 stores (5 TiB): no GET needs a larger buffer.
pub const MAX_GET_BUFFER: u64 = 5 << 40;
/// The largest PutObject or UploadPart S3 accepts (5 GiB).
pub const MAX_PUT_LEN: u64 = 5 << 30;

/// Refuses a token whose buffer no real request can have: an address range
/// that wraps, a GET buffer beyond the largest object, a PUT beyond S3's
/// largest single upload.
pub(super) fn check_buffer(op: Operation, remote: &RemoteBuffer) -> Result<(), S3Error> {
    if remote.addr.checked_add(remote.len).is_none() {
        return Err(S3Error::invalid_token(format!(
            "the RDMA buffer's address plus its length ({}) overflows",
            remote.len
        )));
    }
    match op {
        Operation::GetObject if remote.len > MAX_GET_BUFFER => {
            Err(S3Error::invalid_token(format!(
                "an RDMA buffer of {} bytes is larger than any object (5 TiB)",
                remote.len
            )))
        }
        Operation::PutObject | Operation::UploadPart if remote.len > MAX_PUT_LEN => {
            Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "EntityTooLarge",
                format!(
                    "{} bytes: a single upload is at most 5 GiB (use a multipart upload)",
                    remote.len
                ),
            ))
        }
        _ => Ok(()),
    }
}
