//! When a request to the store is sent again.
//!
//! A request is *replayable* when its body can be sent a second time: here,
//! when it has no body at all (every GET, HEAD and DELETE the front sends,
//! and PUT/POST with an empty body such as CreateBucket or
//! CompleteMultipartUpload without parts). A streamed body (a PUT or
//! UploadPart of data) is consumed by the first attempt and is never
//! retried. A replayable request is retried after a connection error (the
//! connect failed, or the connection was reset or closed before the
//! response head) and after a 502, 503 or 504 answer, at most
//! [`RetryPolicy::max_retries`] times, waiting [`RetryPolicy::backoff`]
//! between attempts. A response-head timeout is not retried: the store may
//! still be working on the request; nor is a failed TLS handshake.
//!
//! The waits are [`hipobj_net::retry`]'s, the policy the S3 client shares;
//! which requests and answers are retried is the gateway's, here.

use std::time::Duration;

use hipobj_net::retry::Backoff;
use http::{Method, StatusCode};
use http_body::Body as _;

use super::UpstreamError;
use crate::body::Body;

pub use crate::config::defaults::{DEFAULT_BACKOFF, DEFAULT_MAX_RETRIES};

/// How many times and how soon a replayable request is sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: never retry).
    pub max_retries: u32,
    /// The wait before retry `i` is `backoff[i]` (the last entry repeats;
    /// empty: no wait).
    pub backoff: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
            backoff: DEFAULT_BACKOFF.to_vec(),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            backoff: Vec::new(),
        }
    }

    /// The wait before retry number `retry` (0-based): after the
    /// `retry + 1`-th failed attempt, by [`Backoff::Steps`].
    pub fn delay(&self, retry: u32) -> Duration {
        Backoff::step(&self.backoff, retry.saturating_add(1))
    }
}

/// Whether a request with this method and body may be sent again.
pub fn is_replayable(method: &Method, body: &Body) -> bool {
    let empty = body.is_end_stream() || body.size_hint().exact() == Some(0);
    replayable(method, empty)
}

/// The decision of [`is_replayable`] for a body known to be empty or not:
/// GET, HEAD, DELETE, OPTIONS, PUT and POST are replayed only without a
/// body; nothing with a (streamed) body is.
pub fn replayable(method: &Method, body_is_empty: bool) -> bool {
    body_is_empty
        && (method == Method::GET
            || method == Method::HEAD
            || method == Method::DELETE
            || method == Method::OPTIONS
            || method == Method::PUT
            || method == Method::POST)
}

/// Whether this answer from the store is worth another attempt.
pub fn is_retryable_status(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    )
}

/// Whether this failure is a connection error worth another attempt.
pub fn is_retryable_error(err: &UpstreamError) -> bool {
    match err {
        // A certificate the gateway does not trust stays untrusted.
        UpstreamError::Connect(e) => !e.is::<crate::tls::TlsHandshakeError>(),
        UpstreamError::ConnectTimeout => true,
        UpstreamError::Request(e) => !e.is::<ResponseHeadTimeout>(),
        _ => false,
    }
}

/// Whether this failure means the endpoint cannot be reached at all (it is
/// then marked down by [`super::MultiUpstream`]).
pub fn is_connect_error(err: &UpstreamError) -> bool {
    matches!(
        err,
        UpstreamError::Connect(_) | UpstreamError::ConnectTimeout
    )
}

/// The store sent no response head in time; carried in
/// [`UpstreamError::Request`].
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("no response head from the store within {0:?}")]
pub struct ResponseHeadTimeout(pub Duration);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::BoxError;

    #[test]
    fn replay_decisions() {
        for m in [
            Method::GET,
            Method::HEAD,
            Method::DELETE,
            Method::PUT,
            Method::POST,
        ] {
            assert!(is_replayable(&m, &Body::empty()), "{m}");
            assert!(is_replayable(&m, &Body::from(bytes::Bytes::new())), "{m}");
            assert!(!replayable(&m, false), "{m}");
        }
        assert!(!replayable(&Method::PATCH, true));
        let stream = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from("x"))]);
        assert!(!is_replayable(&Method::PUT, &Body::from_stream(stream)));
        assert!(!is_replayable(&Method::PUT, &Body::from("data")));
    }

    #[test]
    fn status_and_error_decisions() {
        for s in [502, 503, 504] {
            assert!(is_retryable_status(StatusCode::from_u16(s).unwrap()));
        }
        for s in [200, 404, 403, 500, 501] {
            assert!(!is_retryable_status(StatusCode::from_u16(s).unwrap()));
        }
        let io = || BoxError::from(std::io::Error::other("reset"));
        assert!(is_retryable_error(&UpstreamError::Connect(io())));
        assert!(is_retryable_error(&UpstreamError::ConnectTimeout));
        assert!(is_retryable_error(&UpstreamError::Request(io())));
        let timeout = UpstreamError::Request(Box::new(ResponseHeadTimeout(Duration::from_secs(1))));
        assert!(!is_retryable_error(&timeout));
        assert!(!is_retryable_error(&UpstreamError::Sign("x".into())));
        assert!(is_connect_error(&UpstreamError::ConnectTimeout));
        assert!(!is_connect_error(&UpstreamError::Request(io())));
    }

    #[test]
    fn backoff() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_retries, 2);
        assert_eq!(p.delay(0), Duration::from_millis(50));
        assert_eq!(p.delay(1), Duration::from_millis(200));
        assert_eq!(p.delay(5), Duration::from_millis(200));
        assert_eq!(RetryPolicy::none().delay(0), Duration::ZERO);
    }
}
