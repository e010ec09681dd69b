//! hipobj-rc-v2's answers: every one carries the protocol echo; those
//! after a session exists carry `x-amz-rdma-capabilities: mp,
//! hipobj-handshake` too (parts; and this endpoint also serves the
//! handshake flow, which the S3 client prefers for small transfers). Errors
//! are S3 XML documents with versitygw's codes, at the statuses
//! docs/protocol.md lists ("hipobj-rc-v2: status codes").

use http::{HeaderValue, Response, StatusCode};

use crate::body::Body;
use crate::rdma::reply::set_request_id;
use crate::s3err::S3Error;
use hipobj_wire::rc_v2::{H_CAPABILITIES, H_PROTOCOL, H_PROTOCOL_STATUS, PROTOCOL, UNSUPPORTED};

/// The header that tells a client the largest PUT staged at once (with a
/// 413).
pub const H_MAX_SIZE: &str = "x-amz-rdma-max-size";

/// An error of the protocol (not the store's).
#[derive(Debug, Clone)]
pub struct V2Error {
    err: S3Error,
    /// Retry after a second (busy, limits).
    retry: bool,
    /// `x-amz-rdma-max-size` (413).
    max_size: Option<u64>,
}

impl V2Error {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> V2Error {
        V2Error {
            err: S3Error::new(status, code, message),
            retry: false,
            max_size: None,
        }
    }

    /// 400 `InvalidRdmaRequest`: a malformed or inconsistent request.
    pub fn invalid(message: impl Into<String>) -> V2Error {
        V2Error::new(StatusCode::BAD_REQUEST, "InvalidRdmaRequest", message)
    }

    /// 403 `AccessDenied`.
    pub fn denied(message: impl Into<String>) -> V2Error {
        V2Error::new(StatusCode::FORBIDDEN, "AccessDenied", message)
    }

    /// 404 `NoSuchRdmaSession`: unknown, expired, another key's, or the
    /// cookie is not the session's (one answer for all: no oracle).
    pub fn no_session() -> V2Error {
        V2Error::new(
            StatusCode::NOT_FOUND,
            "NoSuchRdmaSession",
            "no such hipobj-rc-v2 session for this access key and cookie",
        )
    }

    /// 409 `RdmaSessionConflict`: a READY for a session that another READY
    /// took.
    pub fn conflict() -> V2Error {
        V2Error::new(
            StatusCode::CONFLICT,
            "RdmaSessionConflict",
            "the session's READY was already received",
        )
    }

    /// 409 `RdmaSessionConflict` with `Retry-After`: no data phase slot
    /// free now; the session stays prepared, READY again.
    pub fn busy() -> V2Error {
        V2Error {
            retry: true,
            ..V2Error::new(
                StatusCode::CONFLICT,
                "RdmaSessionConflict",
                "the server is moving as many transfers as it may: send READY again",
            )
        }
    }

    /// 413 `EntityTooLarge` with `x-amz-rdma-max-size`: split the PUT.
    pub fn too_large(largest: u64) -> V2Error {
        V2Error {
            max_size: Some(largest),
            ..V2Error::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "EntityTooLarge",
                format!("a hipobj-rc-v2 PUT stages at most {largest} bytes at once: send parts"),
            )
        }
    }

    /// 503 `RdmaResourceLimit` with `Retry-After`.
    pub fn limit(message: impl Into<String>) -> V2Error {
        V2Error {
            retry: true,
            ..V2Error::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "RdmaResourceLimit",
                message,
            )
        }
    }

    /// 502 `RdmaTransferFailed`: the data phase failed or ran out of time.
    pub fn transfer(message: impl Into<String>) -> V2Error {
        V2Error::new(StatusCode::BAD_GATEWAY, "RdmaTransferFailed", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> V2Error {
        V2Error::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// The S3 error code.
    pub fn code(&self) -> &'static str {
        self.err.code
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.err.status
    }

    /// The answer; `caps` once a session exists.
    pub fn into_response(self, request_id: &str, caps: bool) -> Response<Body> {
        crate::metrics::rdma_failure(self.err.code);
        let mut r = self.err.into_response(request_id);
        let h = r.headers_mut();
        if self.retry {
            h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Some(n) = self.max_size {
            h.insert(H_MAX_SIZE, HeaderValue::from(n));
        }
        decorate(r, caps)
    }
}

impl From<hipobj_wire::rc_v2::MessageError> for V2Error {
    fn from(e: hipobj_wire::rc_v2::MessageError) -> V2Error {
        V2Error::invalid(e.to_string())
    }
}

/// What this gateway can do beyond whole objects by v2: parts (`mp`), and
/// the handshake flow at the same endpoint (`hipobj-handshake`; every
/// gateway with an RDMA engine serves it).
pub const CAPABILITIES: &str = "mp, hipobj-handshake";

/// Adds the protocol echo (and [`CAPABILITIES`] when `caps`).
pub fn decorate(mut r: Response<Body>, caps: bool) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(H_PROTOCOL, HeaderValue::from_static(PROTOCOL));
    if caps {
        h.insert(H_CAPABILITIES, HeaderValue::from_static(CAPABILITIES));
    }
    r
}

/// 501 with `x-amz-rdma-protocol-status: unsupported`: v2 is off, or the
/// request names another protocol (or none).
pub fn unsupported(request_id: &str, why: &str) -> Response<Body> {
    crate::metrics::rdma_failure("RdmaProtocolUnsupported");
    let mut r =
        S3Error::new(StatusCode::NOT_IMPLEMENTED, "NotImplemented", why).into_response(request_id);
    r.headers_mut()
        .insert(H_PROTOCOL_STATUS, HeaderValue::from_static(UNSUPPORTED));
    decorate(r, false)
}

/// A success: `status`, no body, `headers`.
pub fn ok(
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
    request_id: &str,
    caps: bool,
) -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    for (k, v) in headers {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    set_request_id(&mut r, request_id);
    decorate(r, caps)
}
