//! The library's errors: hipObject's operation codes, the HIP error behind
//! one where there is one, and what happened in words.

use std::fmt;

/// `hipObjOpError_t`: what went wrong, with hipObject's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum OpError {
    /// No error.
    Success = 0,
    /// An argument is invalid.
    InvalidValue = 1,
    /// The library is not initialized (or was shut down).
    NotInitialized = 2,
    /// `init` was called twice.
    AlreadyInitialized = 3,
    /// An RDMA resource or operation failed.
    RdmaError = 4,
    /// The server did not report success (including 501, RDMA declined).
    S3Error = 5,
    /// The address was not registered.
    BufNotRegistered = 6,
    /// The address is already registered (or the buffer map is full).
    BufAlreadyRegistered = 7,
    /// No usable RDMA NIC.
    NicNotFound = 8,
    /// dma-buf registration is not supported.
    DmabufNotSupported = 9,
    /// The size exceeds a limit (4 GiB per buffer).
    SizeTooLarge = 10,
    /// A bug, or a panic that was caught.
    InternalError = 11,
    /// The operation is not supported here.
    NotSupported = 12,
    /// A resource is in use: a buffer a call or an abandoned copy holds, or
    /// a connection a callback's transfer would wait for.
    Busy = 13,
}

impl OpError {
    /// hipObject's text for each code (`hipObjGetErrorString`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpError::Success => "Success",
            OpError::InvalidValue => "Invalid value",
            OpError::NotInitialized => "hipObject not initialized",
            OpError::AlreadyInitialized => "hipObject already initialized",
            OpError::RdmaError => "RDMA error",
            OpError::S3Error => "S3 error",
            OpError::BufNotRegistered => "Buffer not registered",
            OpError::BufAlreadyRegistered => "Buffer already registered",
            OpError::NicNotFound => "No RDMA NIC found",
            OpError::DmabufNotSupported => "dmabuf not supported",
            OpError::SizeTooLarge => "Size too large",
            OpError::InternalError => "Internal error",
            OpError::NotSupported => "Operation not supported",
            OpError::Busy => "Resource busy",
        }
    }

    /// From the C value.
    pub fn from_raw(v: i32) -> Option<OpError> {
        use OpError::*;
        const ALL: [OpError; 14] = [
            Success,
            InvalidValue,
            NotInitialized,
            AlreadyInitialized,
            RdmaError,
            S3Error,
            BufNotRegistered,
            BufAlreadyRegistered,
            NicNotFound,
            DmabufNotSupported,
            SizeTooLarge,
            InternalError,
            NotSupported,
            Busy,
        ];
        usize::try_from(v).ok().and_then(|i| ALL.get(i).copied())
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error: the code the C API returns, the HIP error behind it (0 if
/// none), what happened, and, for S3 errors, the server's
/// `x-amz-rdma-reply` value so the caller can fall back to HTTP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {message}")]
pub struct Error {
    /// The operation error.
    pub op: OpError,
    /// The HIP error behind it, or 0.
    pub hip_error: i32,
    /// What happened.
    pub message: String,
    /// The reply the server sent, for S3 errors.
    pub reply: Option<String>,
}

impl Error {
    /// An error with a message.
    pub fn new(op: OpError, message: impl Into<String>) -> Error {
        Error {
            op,
            hip_error: 0,
            message: message.into(),
            reply: None,
        }
    }

    /// An error caused by a HIP call.
    pub fn hip(op: OpError, hip_error: i32, message: impl Into<String>) -> Error {
        Error {
            op,
            hip_error,
            message: message.into(),
            reply: None,
        }
    }

    /// An S3 error carrying the server's reply.
    pub fn s3(message: impl Into<String>, reply: Option<String>) -> Error {
        Error {
            op: OpError::S3Error,
            hip_error: 0,
            message: message.into(),
            reply,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(OpError::InvalidValue, message)
    }

    pub(crate) fn rdma(message: impl Into<String>) -> Error {
        Error::new(OpError::RdmaError, message)
    }

    pub(crate) fn busy(message: impl Into<String>) -> Error {
        Error::new(OpError::Busy, message)
    }
}

impl From<hipobj_fabric::FabricError> for Error {
    fn from(e: hipobj_fabric::FabricError) -> Error {
        match e {
            hipobj_fabric::FabricError::NoDevice(m) => Error::new(OpError::NicNotFound, m),
            other => Error::rdma(other.to_string()),
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
