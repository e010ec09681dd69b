//! Errors of the verbs calls themselves (failed completions are not errors
//! here: they are [`WorkCompletion`](crate::WorkCompletion)s with a status).

use std::io;

/// A verbs call that failed. Each variant names the verb, as libibverbs'
/// callers do when they print `perror`.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// No RDMA device could be found or opened.
    #[error("no RDMA device: {0}")]
    NoDevice(String),
    /// The arguments or the object's state do not allow the call (`EINVAL`).
    #[error("{verb}: invalid argument: {why}")]
    Invalid {
        /// The failing verb.
        verb: &'static str,
        /// What was wrong.
        why: String,
    },
    /// A queue or table is full (`ENOMEM`).
    #[error("{verb}: out of resources: {why}")]
    NoResources {
        /// The failing verb.
        verb: &'static str,
        /// What ran out.
        why: String,
    },
    /// The provider cannot do this (`EOPNOTSUPP`).
    #[error("{verb}: not supported by the {provider} provider")]
    Unsupported {
        /// The failing verb.
        verb: &'static str,
        /// The provider's name.
        provider: &'static str,
    },
    /// The provider could do this with a library or device this host
    /// lacks (`EOPNOTSUPP`); `why` says what is missing.
    #[error("{verb}: not available: {why}")]
    NotAvailable {
        /// The failing verb.
        verb: &'static str,
        /// What is missing.
        why: String,
    },
    /// The completion queue overflowed; completions were lost.
    #[error("completion queue overrun: more than {capacity} completions were not polled")]
    CqOverrun {
        /// The CQ's capacity.
        capacity: usize,
    },
    /// An operating-system call under the verb failed.
    #[error("{verb}: {source}")]
    Os {
        /// The failing verb.
        verb: &'static str,
        /// The OS error, with its errno.
        #[source]
        source: io::Error,
    },
}

impl FabricError {
    /// The errno a libibverbs call would have reported.
    pub fn errno(&self) -> i32 {
        match self {
            FabricError::NoDevice(_) => libc::ENODEV,
            FabricError::Invalid { .. } => libc::EINVAL,
            FabricError::NoResources { .. } => libc::ENOMEM,
            FabricError::Unsupported { .. } | FabricError::NotAvailable { .. } => libc::EOPNOTSUPP,
            FabricError::CqOverrun { .. } => libc::EOVERFLOW,
            FabricError::Os { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    pub(crate) fn invalid(verb: &'static str, why: impl Into<String>) -> FabricError {
        FabricError::Invalid {
            verb,
            why: why.into(),
        }
    }

    pub(crate) fn no_resources(verb: &'static str, why: impl Into<String>) -> FabricError {
        FabricError::NoResources {
            verb,
            why: why.into(),
        }
    }
}

/// The result of a verbs call.
pub type Result<T, E = FabricError> = std::result::Result<T, E>;
