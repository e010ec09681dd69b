//! The headers an RDMA answer carries.

use crate::body::Body;
use hipobj_wire::headers;
use http::{HeaderValue, Response};

/// Adds `x-amz-rdma-reply` to a response.
pub(crate) fn with_reply(mut r: Response<Body>, reply: &str) -> Response<Body> {
    if let Ok(v) = HeaderValue::from_str(reply) {
        r.headers_mut().insert(headers::RDMA_REPLY, v);
    }
    r
}

pub(crate) fn set_request_id(r: &mut Response<Body>, request_id: &str) {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        r.headers_mut().insert("x-amz-request-id", v);
    }
}
