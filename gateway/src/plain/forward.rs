//! The plain path: requests without a token, proxied as streams.
//!
//! The auth layer has verified the client's signature and decoded the body
//! (aws-chunked framing removed, chunk signatures and a trailing checksum
//! checked as it streams); what is left is to drop the headers that belong
//! to the client's hop or signature, re-address and re-sign the request for
//! the store (the [`Upstream`]'s job) and pass the store's answer back
//! untouched but for hop-by-hop headers.
//!
//! A body that fails verification half-way (a wrong payload hash, chunk
//! signature or trailing checksum, a truncated aws-chunked body) yields an
//! [`AuthError`] to the store's request, which therefore fails: the store
//! keeps nothing, and the client is answered with that error's S3 code and
//! status rather than with whatever the store made of a broken body.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH};
use http::{Request, Response, Uri, Version};
use http_body::{Frame, SizeHint};

use crate::auth::AuthError;
use crate::body::{Body, BoxError};
use crate::header_filter::{forwardable_headers, remove_hop_by_hop};
use crate::s3err::S3Error;
use crate::upstream::{Payload, Upstream, UpstreamError};

use super::rechunk::{self, Rechunked};
/// Query parameters of a presigned URL: the client's signature, verified
/// by the auth layer, replaced upstream by the store's `Authorization`.
const PRESIGN_PARAMS: &[&str] = &[
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-signedheaders",
    "x-amz-signature",
    "x-amz-security-token",
    // Signature Version 2 query authentication.
    "awsaccesskeyid",
    "signature",
    "expires",
];

/// Forwards a verified request without an RDMA token to the store and
/// streams the answer back, status and headers intact (less hop-by-hop
/// ones). The store's own S3 errors pass through as they are; only a store
/// that cannot be reached (or a target that cannot be sent on) becomes an
/// [`S3Error`].
///
/// `body` is already decoded by the auth layer; when `decoded_length` is
/// `Some` it becomes the `Content-Length`. Presigned-URL parameters are
/// dropped from the query (the store's request is signed in the header).
///
/// If `body` yields an [`AuthError`] (boxed, as the auth layer's bodies
/// do) and the store then fails or answers with an error, the client gets
/// that `AuthError`'s code, status and message instead: e.g. 400
/// `XAmzContentSHA256Mismatch`, 400 `BadDigest`, 403
/// `SignatureDoesNotMatch`, 400 `IncompleteBody`.
pub async fn forward(
    upstream: &dyn Upstream,
    parts: http::request::Parts,
    body: Body,
    decoded_length: Option<u64>,
    payload: Payload,
) -> Result<Response<Body>, S3Error> {
    forward_with_trailer(upstream, parts, body, decoded_length, payload, None).await
}

/// [`forward`], with the trailing checksum of an aws-chunked body: its
/// algorithm and the handle its value arrives on once the decoded `body`
/// has ended. The store then gets the body framed again as aws-chunked
/// with that checksum in its trailer (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`,
/// [`super::rechunk`]), so that it records and echoes the checksum as it
/// would without the gateway.
pub async fn forward_with_trailer(
    upstream: &dyn Upstream,
    parts: http::request::Parts,
    body: Body,
    decoded_length: Option<u64>,
    payload: Payload,
    trailer: Option<(crate::checksum::Algorithm, crate::auth::TrailingHeaders)>,
) -> Result<Response<Body>, S3Error> {
    let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
    let mut headers = forwardable_headers(&parts.headers);
    if let Some(len) = decoded_length {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    let uri = strip_presign_params(&parts.uri)?;
    let (body, payload) = match (trailer, decoded_length) {
        (Some((algorithm, trailers)), Some(decoded)) => {
            match rechunk::encoded_len(decoded, algorithm) {
                Some(encoded) => {
                    let encoding = match headers.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok())
                    {
                        Some(other) => format!("aws-chunked,{other}"),
                        None => "aws-chunked".to_string(),
                    };
                    if let Ok(v) = HeaderValue::from_str(&encoding) {
                        headers.insert(CONTENT_ENCODING, v);
                    }
                    headers.insert("x-amz-decoded-content-length", HeaderValue::from(decoded));
                    headers.insert(
                        "x-amz-trailer",
                        HeaderValue::from_static(algorithm.header()),
                    );
                    headers.insert(CONTENT_LENGTH, HeaderValue::from(encoded));
                    let body = Body::new(Rechunked::new(body, trailers, algorithm, encoded));
                    (body, Payload::StreamingUnsignedTrailer)
                }
                None => (body, payload),
            }
        }
        _ => (body, payload),
    };

    let failure = FailureSlot::default();
    let body = Body::new(Watched {
        inner: body,
        slot: failure.clone(),
    });
    let mut req = Request::new(body);
    crate::tenancy::StoreIdentity::carry(&parts.extensions, req.extensions_mut());
    *req.method_mut() = parts.method;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;

    let sent = crate::upstream::timed(op, upstream.send(req, payload)).await;
    if let Some(e) = failure.take() {
        match &sent {
            Ok(resp) if resp.status().is_success() => {
                // Not seen with a store that reads the body through: it
                // must fail a request whose body fails.
                tracing::warn!(
                    upstream = %upstream.describe(),
                    code = e.code,
                    "the request body failed verification, yet the store answered with success"
                );
            }
            Ok(resp) => {
                tracing::info!(code = e.code, store_status = %resp.status(), "request body failed verification");
                return Err(e);
            }
            Err(err) => {
                tracing::info!(code = e.code, error = %err, "request body failed verification");
                return Err(e);
            }
        }
    }
    let resp = sent.map_err(|err| {
        let s3err = to_s3_error(&err);
        tracing::warn!(upstream = %upstream.describe(), error = %err, "store request failed");
        s3err
    })?;

    let (mut parts, body) = resp.into_parts();
    remove_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, body))
}

/// The first [`AuthError`] a request body yielded, as the client is to be
/// answered with it.
#[derive(Clone, Debug, Default)]
struct FailureSlot(Arc<Mutex<Option<S3Error>>>);

impl FailureSlot {
    /// Records `e`'s S3 error unless one is recorded already.
    fn record(&self, e: &AuthError) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(S3Error::new(e.status(), e.code(), e.to_string()));
        }
    }

    /// Records 400 `RequestTimeout` (S3's code for a body that stopped
    /// coming) unless an error is recorded already.
    fn record_stall(&self, e: &crate::body::BodyStalled) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(S3Error::new(
                http::StatusCode::BAD_REQUEST,
                "RequestTimeout",
                format!("your socket connection was not read from within the timeout: {e}"),
            ));
        }
    }

    fn take(&self) -> Option<S3Error> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// The request body, passed through as it is, recording in `slot` the
/// first [`AuthError`] it yields.
struct Watched {
    inner: Body,
    slot: FailureSlot,
}

/// The [`AuthError`] in `err` or its chain of sources, if any.
fn auth_error_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a AuthError> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(a) = e.downcast_ref::<AuthError>() {
            return Some(a);
        }
        cur = e.source();
    }
    None
}

/// The [`BodyStalled`](crate::body::BodyStalled) in `err` or its chain of
/// sources, if any.
fn stall_in<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::body::BodyStalled> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(a) = e.downcast_ref::<crate::body::BodyStalled>() {
            return Some(a);
        }
        cur = e.source();
    }
    None
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                // Unwrapped, so that the body the store reads carries the
                // error as the auth layer boxed it.
                let e = e.into_inner();
                if let Some(a) = auth_error_in(&*e) {
                    this.slot.record(a);
                } else if let Some(stall) = stall_in(&*e) {
                    this.slot.record_stall(stall);
                }
                Poll::Ready(Some(Err(e)))
            }
            other => other.map_err(BoxError::from),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a client is told when the store gave no answer.
fn to_s3_error(err: &UpstreamError) -> S3Error {
    match err {
        UpstreamError::InvalidTarget(reason) => S3Error::new(
            http::StatusCode::BAD_REQUEST,
            "InvalidURI",
            format!("invalid request target: {reason}"),
        ),
        UpstreamError::ConnectTimeout => {
            S3Error::bad_gateway("the store did not accept a connection in time")
        }
        UpstreamError::Connect(_) => S3Error::bad_gateway("the store could not be reached"),
        UpstreamError::Request(_) | UpstreamError::Embedded(_) => {
            S3Error::bad_gateway("the store failed to answer the request")
        }
        UpstreamError::Sign(_)
        | UpstreamError::InvalidEndpoint { .. }
        | UpstreamError::EmbeddedInit { .. }
        | UpstreamError::Random(_) => {
            S3Error::internal("the request could not be prepared for the store")
        }
    }
}

/// The client's URI less any presigned-URL signature parameters.
fn strip_presign_params(uri: &Uri) -> Result<Uri, S3Error> {
    let Some(query) = uri.query() else {
        return Ok(uri.clone());
    };
    let is_presign = |param: &str| {
        let name = param.split_once('=').map_or(param, |(n, _)| n);
        PRESIGN_PARAMS.iter().any(|p| p.eq_ignore_ascii_case(name))
    };
    if !query.split('&').any(is_presign) {
        return Ok(uri.clone());
    }
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !is_presign(p))
        .collect();
    let mut pq = uri.path().to_owned();
    if !kept.is_empty() {
        pq.push('?');
        pq.push_str(&kept.join("&"));
    }
    let mut uri_parts = uri.clone().into_parts();
    uri_parts.path_and_query = Some(pq.parse().map_err(|_| {
        S3Error::new(
            http::StatusCode::BAD_REQUEST,
            "InvalidURI",
            "invalid request target",
        )
    })?);
    Uri::from_parts(uri_parts).map_err(|_| {
        S3Error::new(
            http::StatusCode::BAD_REQUEST,
            "InvalidURI",
            "invalid request target",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presign_params_are_dropped() {
        let uri: Uri = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2Fb&versionId=3&X-Amz-Signature=ff"
            .parse()
            .unwrap();
        assert_eq!(strip_presign_params(&uri).unwrap(), "/b/k?versionId=3");
        let uri: Uri = "/b/k?X-Amz-Signature=ff".parse().unwrap();
        assert_eq!(strip_presign_params(&uri).unwrap(), "/b/k");
        let uri: Uri = "/b/k?uploads".parse().unwrap();
        assert_eq!(strip_presign_params(&uri).unwrap(), "/b/k?uploads");
    }

    /// A store that reads the whole body, then answers 200, or, when the
    /// body fails, a 500 (`fail_with_error`: no answer at all).
    #[derive(Debug)]
    struct ReadingStore {
        fail_with_error: bool,
    }

    impl Upstream for ReadingStore {
        fn send(
            &self,
            req: Request<Body>,
            _payload: Payload,
        ) -> futures::future::BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
            let fail_with_error = self.fail_with_error;
            Box::pin(async move {
                use http_body_util::BodyExt;
                match req.into_body().collect().await {
                    Ok(_) => Ok(Response::new(Body::from("stored"))),
                    Err(e) if fail_with_error => Err(UpstreamError::Request(e.into())),
                    Err(_) => {
                        let mut r =
                            Response::new(Body::from("<Error><Code>InternalError</Code></Error>"));
                        *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                        Ok(r)
                    }
                }
            })
        }

        fn describe(&self) -> String {
            "reading store".into()
        }
    }

    fn failing_body(e: Option<BoxError>) -> Body {
        let mut items: Vec<Result<Bytes, BoxError>> = vec![Ok(Bytes::from_static(b"abc"))];
        items.extend(e.map(Err));
        Body::from_stream(futures::stream::iter(items))
    }

    async fn put_through(store: &ReadingStore, body: Body) -> Result<Response<Body>, S3Error> {
        let parts = Request::put("/b/k").body(()).unwrap().into_parts().0;
        forward(store, parts, body, None, Payload::Unsigned).await
    }

    #[tokio::test]
    async fn a_body_auth_error_answers_for_the_store() {
        /// The error, the status and code the client gets.
        type Case = (fn() -> AuthError, u16, &'static str);
        let cases: [Case; 4] = [
            (
                || AuthError::XAmzContentSha256Mismatch,
                400,
                "XAmzContentSHA256Mismatch",
            ),
            (|| AuthError::BadDigest("CRC32"), 400, "BadDigest"),
            (
                || AuthError::ChunkSignatureDoesNotMatch("chunk"),
                403,
                "SignatureDoesNotMatch",
            ),
            (
                || AuthError::IncompleteBody("x".into()),
                400,
                "IncompleteBody",
            ),
        ];
        for fail_with_error in [false, true] {
            let store = ReadingStore { fail_with_error };
            for (make, status, code) in cases {
                let body = failing_body(Some(Box::new(make())));
                let err = put_through(&store, body).await.unwrap_err();
                assert_eq!((err.status.as_u16(), err.code), (status, code));
                assert_eq!(err.message, make().to_string());
            }
            // A body error that is not an auth error: the store's answer.
            let io: BoxError = Box::new(std::io::Error::other("reset"));
            let r = put_through(&store, failing_body(Some(io))).await;
            if fail_with_error {
                assert_eq!(r.unwrap_err().code, "ServiceUnavailable");
            } else {
                assert_eq!(r.unwrap().status(), 500);
            }
            // A good body.
            assert_eq!(
                put_through(&store, failing_body(None))
                    .await
                    .unwrap()
                    .status(),
                200
            );
        }
    }
}
