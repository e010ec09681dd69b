//! Errors: why a store could not be opened, and how failures inside an
//! operation become S3 errors.

use std::path::PathBuf;

use s3s::{s3_error, S3Error};

/// Why [`crate::Store::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory of the store could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The directory holds a store of another format.
    #[error("{path}: not a store of this format ({found})")]
    Format {
        /// The marker file.
        path: PathBuf,
        /// What it says.
        found: String,
    },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}

/// An I/O failure inside an operation: 500 InternalError, logged (the
/// client gets no path).
pub fn internal(what: &str, e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "store: {what}");
    s3_error!(
        InternalError,
        "We encountered an internal error. Please try again."
    )
}

/// [`internal`] for `io::Error`s.
pub fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> S3Error {
    move |e| internal(what, e)
}
