//! The client's errors.

use crate::Path;

/// What went wrong in an S3 operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The [`ClientConfig`](crate::ClientConfig) is unusable (bad endpoint,
    /// zero part size, ...).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An argument is unusable (a range outside the buffer, an empty bucket
    /// name, a buffer the client cannot read, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The server answered with an S3 error. `code` and `message` come from
    /// the XML error body; for answers without one (HEAD) `code` is derived
    /// from the status (`NotFound`, `Forbidden`, ...).
    #[error("S3 error {status} {code}: {message}")]
    S3 {
        /// The HTTP status.
        status: u16,
        /// The S3 error code (`NoSuchKey`, `BadDigest`, ...).
        code: String,
        /// The error message.
        message: String,
        /// `x-amz-request-id` or the body's `RequestId`.
        request_id: Option<String>,
        /// The `x-amz-rdma-reply` value, for RDMA requests.
        reply: Option<String>,
    },
    /// The request could not be sent or its answer could not be read
    /// (connection refused, reset, ...), after every attempt.
    #[error("HTTP transport: {0}")]
    Transport(String),
    /// A connection or request timeout expired, after every attempt.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The bytes received do not match the `x-amz-checksum-crc64nvme` the
    /// server declared.
    #[error("checksum mismatch over {path}: the server declared CRC64NVME {expected}, the bytes received have {actual}")]
    ChecksumMismatch {
        /// The server's value (base64).
        expected: String,
        /// The value of the bytes in the buffer (base64).
        actual: String,
        /// The path the bytes came by.
        path: Path,
    },
    /// [`ClientConfig::require_rdma`](crate::ClientConfig::require_rdma) is
    /// set and the transfer would have fallen back to plain HTTP.
    #[error("RDMA required, but {reason}")]
    RdmaRequired {
        /// Why RDMA could not be used.
        reason: String,
    },
    /// The object (or range, or part) does not fit in the rest of the
    /// buffer: nothing past the buffer was written. Ask for a range.
    #[error("the object needs {} bytes, the buffer has {available} from the offset", needed.map_or("more".to_string(), |n| n.to_string()))]
    BufferTooSmall {
        /// The size needed, when known.
        needed: Option<u64>,
        /// The room from the offset to the end of the buffer.
        available: u64,
    },
    /// The hipObject client library failed (registration, the RDMA
    /// connection, ...).
    #[error("client library: {0}")]
    Library(#[from] hipobj::Error),
    /// The server's answer makes no sense (a missing header, unparsable
    /// XML, a body larger than the buffer).
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// A local file or stream failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The S3 error code, for [`Error::S3`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::S3 { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, for [`Error::S3`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::S3 { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the object, bucket or upload does not exist (404).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether another attempt may succeed: transport failures, timeouts,
    /// 5xx answers, a server that still did not know the RDMA pair after
    /// the library's reconnect (421), and failures of the local RDMA
    /// connection.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transport(_) | Error::Timeout(_) => true,
            Error::S3 { status, .. } => *status >= 500 || *status == 421,
            Error::Library(e) => matches!(e.op, hipobj::OpError::RdmaError),
            _ => false,
        }
    }

    /// Whether this is an S3 error whose code was only derived from the
    /// status (the answer had no error document: a HEAD).
    pub(crate) fn code_from_status(&self) -> bool {
        matches!(self, Error::S3 { status, code, .. } if code == status_code_name(*status))
    }

    pub(crate) fn s3_from(
        status: u16,
        body: &[u8],
        request_id: Option<String>,
        reply: Option<String>,
    ) -> Error {
        let text = String::from_utf8_lossy(body);
        let crate::xml::ErrorDoc {
            code,
            message,
            request_id: rid,
        } = crate::xml::error_doc(&text);
        let code = code.unwrap_or_else(|| status_code_name(status).to_string());
        let message = message.unwrap_or_else(|| {
            let t = text.trim();
            if t.is_empty() {
                format!("HTTP {status}")
            } else {
                t.chars().take(200).collect()
            }
        });
        Error::S3 {
            status,
            code,
            message,
            request_id: request_id.or(rid),
            reply,
        }
    }
}

/// A code for answers without an XML body, as the AWS SDKs name them.
fn status_code_name(status: u16) -> &'static str {
    match status {
        301 => "PermanentRedirect",
        304 => "NotModified",
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        412 => "PreconditionFailed",
        416 => "InvalidRange",
        421 => "RDMAConnectionUnknown",
        500 => "InternalError",
        501 => "NotImplemented",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        _ => "Unknown",
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_errors_come_from_the_xml_body() {
        let body = b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key &amp; more</Message><RequestId>r1</RequestId></Error>";
        let e = Error::s3_from(404, body, None, None);
        assert_eq!(e.code(), Some("NoSuchKey"));
        assert!(e.is_not_found());
        assert!(!e.is_retryable());
        match e {
            Error::S3 {
                message,
                request_id,
                ..
            } => {
                assert_eq!(message, "The key & more");
                assert_eq!(request_id.as_deref(), Some("r1"));
            }
            other => panic!("{other:?}"),
        }
        let e = Error::s3_from(503, b"", Some("x".into()), Some("503".into()));
        assert_eq!(e.code(), Some("ServiceUnavailable"));
        assert!(e.is_retryable());
        assert!(e.code_from_status());
        assert!(!Error::s3_from(404, body, None, None).code_from_status());
        assert!(!Error::Timeout("t".into()).code_from_status());
    }
}
