//! S3 XML error responses.
//!
//! Errors the front produces itself (as opposed to those it passes through
//! from the store) are rendered as S3's XML error document:
//!
//! ```xml
//! <?xml version="1.0" encoding="UTF-8"?>
//! <Error><Code>..</Code><Message>..</Message><Resource>..</Resource><RequestId>..</RequestId></Error>
//! ```
//!
//! The codes that are not S3's own are this project's, returned for
//! requests carrying `x-amz-rdma-token`:
//!
//! | Constructor                      | Status | Code                    | When                                                     |
//! |----------------------------------|--------|-------------------------|----------------------------------------------------------|
//! | [`S3Error::invalid_token`]       | 400    | `InvalidRDMAToken`      | the token does not parse, or names an unknown connection |
//! | [`S3Error::rdma_declined`]       | 501    | `NotImplemented`        | the operation or request shape is not served by RDMA     |
//! | [`S3Error::transfer_failed`]     | 500    | `RDMATransferFailed`    | an RDMA READ or WRITE failed                             |
//! | [`S3Error::pool_timeout`]        | 503    | `SlowDown`              | no staging buffer came free in time                      |
//! | [`S3Error::buffer_too_small`]    | 400    | `InvalidRDMABufferSize` | the client's buffer cannot hold the object or range      |
//! | [`S3Error::checksum_mismatch`]   | 400    | `BadDigest`             | the data does not match the checksum the client sent     |
//! | [`S3Error::access_denied`]       | 403    | `AccessDenied`          | the credentials may not use the token or connection      |
//! | [`S3Error::internal`]            | 500    | `InternalError`         | a bug or an unexpected local failure                     |
//! | [`S3Error::bad_gateway`]         | 502    | `ServiceUnavailable`    | the store could not be reached or broke off              |
//!
//! [`S3Error::bad_gateway`] pairs the HTTP status that says what happened (a
//! proxy's upstream failed) with S3's standard code for a transient server
//! failure, so SDKs retry it both by status and by code.

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

use crate::body::Body;

/// An error the front answers with itself, as S3's XML error document.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct S3Error {
    /// HTTP status of the response.
    pub status: StatusCode,
    /// S3 error code (`<Code>`).
    pub code: &'static str,
    /// Human-readable message (`<Message>`).
    pub message: String,
    /// The bucket or object concerned (`<Resource>`), if any.
    pub resource: Option<String>,
}

impl S3Error {
    /// An error with the given status, code and message and no resource.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> S3Error {
        S3Error {
            status,
            code,
            message: message.into(),
            resource: None,
        }
    }

    /// The same error naming the resource (`/bucket/key`) it concerns.
    #[must_use]
    pub fn with_resource(mut self, resource: impl Into<String>) -> S3Error {
        self.resource = Some(resource.into());
        self
    }

    /// 400 `InvalidRDMAToken`: the token is malformed or names no known connection.
    pub fn invalid_token(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::BAD_REQUEST, "InvalidRDMAToken", message)
    }

    /// 501 `NotImplemented`: this request is not served by RDMA.
    pub fn rdma_declined(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::NOT_IMPLEMENTED, "NotImplemented", message)
    }

    /// 500 `RDMATransferFailed`: an RDMA READ or WRITE failed.
    pub fn transfer_failed(message: impl Into<String>) -> S3Error {
        S3Error::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "RDMATransferFailed",
            message,
        )
    }

    /// 503 `SlowDown`: no staging buffer came free in time.
    pub fn pool_timeout(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::SERVICE_UNAVAILABLE, "SlowDown", message)
    }

    /// 400 `InvalidRDMABufferSize`: the client's buffer is too small.
    pub fn buffer_too_small(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::BAD_REQUEST, "InvalidRDMABufferSize", message)
    }

    /// 400 `BadDigest`: the data does not match the checksum sent with it.
    pub fn checksum_mismatch(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::BAD_REQUEST, "BadDigest", message)
    }

    /// 403 `AccessDenied`.
    pub fn access_denied(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::FORBIDDEN, "AccessDenied", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// 502 `ServiceUnavailable`: the store could not be reached, timed out or
    /// broke off before answering.
    pub fn bad_gateway(message: impl Into<String>) -> S3Error {
        S3Error::new(StatusCode::BAD_GATEWAY, "ServiceUnavailable", message)
    }

    /// The XML document for this error.
    pub fn to_xml(&self, request_id: &str) -> String {
        use quick_xml::escape::escape;
        let mut xml = String::with_capacity(160 + self.message.len());
        xml.push_str(r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        xml.push_str("<Error><Code>");
        xml.push_str(&escape(self.code));
        xml.push_str("</Code><Message>");
        xml.push_str(&escape(self.message.as_str()));
        xml.push_str("</Message>");
        if let Some(resource) = &self.resource {
            xml.push_str("<Resource>");
            xml.push_str(&escape(resource.as_str()));
            xml.push_str("</Resource>");
        }
        xml.push_str("<RequestId>");
        xml.push_str(&escape(request_id));
        xml.push_str("</RequestId></Error>");
        xml
    }

    /// The response: this error's status, `Content-Type: application/xml`,
    /// `x-amz-request-id` and the XML document.
    pub fn into_response(self, request_id: &str) -> Response<Body> {
        let xml = self.to_xml(request_id);
        let mut resp = Response::new(Body::from(xml));
        *resp.status_mut() = self.status;
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
        // A request id is ours and plain ASCII; one that is not is left out
        // rather than failing the error response.
        if let Ok(id) = HeaderValue::from_str(request_id) {
            headers.insert("x-amz-request-id", id);
        }
        resp
    }
}

/// A new request id: 16 hex digits from the OS's randomness.
pub fn request_id() -> String {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    hex::encode_upper(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_is_escaped_and_complete() {
        let err = S3Error::bad_gateway("a < b & \"c\"").with_resource("/b/k&<>");
        let xml = err.to_xml("req-1");
        assert_eq!(
            xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>ServiceUnavailable</Code>\
             <Message>a &lt; b &amp; &quot;c&quot;</Message><Resource>/b/k&amp;&lt;&gt;</Resource>\
             <RequestId>req-1</RequestId></Error>"
        );
    }

    #[test]
    fn no_resource_element_without_one() {
        let xml = S3Error::internal("x").to_xml("r");
        assert!(!xml.contains("<Resource>"));
    }

    #[test]
    fn response_has_status_and_headers() {
        let resp = S3Error::pool_timeout("busy").into_response("abc");
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/xml");
        assert_eq!(resp.headers()["x-amz-request-id"], "abc");
    }

    #[test]
    fn codes() {
        let all = [
            (S3Error::invalid_token(""), 400, "InvalidRDMAToken"),
            (S3Error::rdma_declined(""), 501, "NotImplemented"),
            (S3Error::transfer_failed(""), 500, "RDMATransferFailed"),
            (S3Error::pool_timeout(""), 503, "SlowDown"),
            (S3Error::buffer_too_small(""), 400, "InvalidRDMABufferSize"),
            (S3Error::checksum_mismatch(""), 400, "BadDigest"),
            (S3Error::access_denied(""), 403, "AccessDenied"),
            (S3Error::internal(""), 500, "InternalError"),
            (S3Error::bad_gateway(""), 502, "ServiceUnavailable"),
        ];
        for (err, status, code) in all {
            assert_eq!(err.status.as_u16(), status);
            assert_eq!(err.code, code);
        }
    }
}
