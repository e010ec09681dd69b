//! Why a request to the store got no answer: [`UpstreamError`].

use crate::body::BoxError;

/// Why a request to the store got no answer.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The configured endpoint is not an `http(s)://host[:port]` URL.
    #[error("invalid upstream endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as configured.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The embedded store could not be opened.
    #[error("cannot open the embedded store at {root}: {reason}")]
    EmbeddedInit {
        /// Its root directory.
        root: String,
        /// Why.
        reason: String,
    },
    /// No random key could be generated for the embedded store.
    #[error("cannot generate the embedded store's key: {0}")]
    Random(String),
    /// The request's target cannot be sent on (bad percent-encoding, ...).
    #[error("invalid request target: {0}")]
    InvalidTarget(String),
    /// Signing the request for the store failed.
    #[error("signing the upstream request: {0}")]
    Sign(String),
    /// The store's TCP connection could not be made.
    #[error("cannot connect to the store: {0}")]
    Connect(#[source] BoxError),
    /// Connecting to the store timed out.
    #[error("connecting to the store timed out")]
    ConnectTimeout,
    /// The request failed on an established connection (reset, closed,
    /// malformed response head, ...).
    #[error("request to the store failed: {0}")]
    Request(#[source] BoxError),
    /// The embedded store failed the request without an S3 answer.
    #[error("embedded store failed: {0}")]
    Embedded(#[source] BoxError),
}

impl UpstreamError {
    /// The `reason` label of `hipobj_upstream_errors_total` for this error.
    pub fn metric_reason(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "connect",
            UpstreamError::ConnectTimeout => "connect_timeout",
            UpstreamError::Request(_) => "request",
            UpstreamError::Embedded(_) => "embedded",
            UpstreamError::Sign(_) => "sign",
            UpstreamError::InvalidTarget(_) => "invalid_target",
            _ => "other",
        }
    }
}
