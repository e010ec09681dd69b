//! The interface every store shares: [`Upstream`].

use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};

use hipobj_net::sigv4::EMPTY_SHA256;

use super::error::UpstreamError;
use super::payload::Payload;
use crate::body::Body;

/// How long [`Upstream::ready`] waits for the store's answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// The store behind the front.
pub trait Upstream: Send + Sync + std::fmt::Debug + 'static {
    /// Sends one request to the store.
    ///
    /// `req` has the client's method, raw path-and-query (as the client sent
    /// it, e.g. `/bucket/key%20x?partNumber=1&uploadId=..`), and the headers
    /// to forward (the caller already removed `Authorization`,
    /// `X-Amz-Date`, `x-amz-content-sha256`, `x-amz-rdma-token`, hop-by-hop
    /// headers and aws-chunked encoding headers); `Content-Length` is set
    /// when known. The upstream rewrites the URI to its endpoint (the path
    /// re-encoded canonically, an empty `delimiter` dropped from the
    /// query), sets `Host`, signs with its own credentials and streams both
    /// ways. Any S3 error the store answers with is an `Ok` response.
    fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>>;

    /// Whether the store answers: a signed `GET /` (ListBuckets) that
    /// returns 200 within [`READY_TIMEOUT`].
    fn ready(&self) -> BoxFuture<'static, bool> {
        let mut req = Request::new(Body::empty());
        *req.uri_mut() = http::Uri::from_static("/");
        let fut = self.send(req, Payload::Sha256(EMPTY_SHA256.to_owned()));
        let what = self.describe();
        Box::pin(async move {
            match tokio::time::timeout(READY_TIMEOUT, fut).await {
                Ok(Ok(resp)) if resp.status() == StatusCode::OK => true,
                Ok(Ok(resp)) => {
                    tracing::warn!(upstream = %what, status = %resp.status(), "store not ready");
                    false
                }
                Ok(Err(err)) => {
                    tracing::warn!(upstream = %what, error = %err, "store not ready");
                    false
                }
                Err(_) => {
                    tracing::warn!(upstream = %what, "store not ready: no answer in time");
                    false
                }
            }
        })
    }

    /// A one-line description for logs (no credentials).
    fn describe(&self) -> String;
}
