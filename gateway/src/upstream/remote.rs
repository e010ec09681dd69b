//! A remote S3 endpoint (MinIO, Ceph RGW, another s3s server, ...) over
//! HTTP/1.1, plain (`http://`) or in TLS (`https://`, rustls; see
//! [`crate::tls`] for what is trusted).
//!
//! Replayable requests (see [`super::retry`]) are retried on connection
//! errors and 502/503/504 answers. A failed TLS handshake is not retried.
//!
//! The response head must come within [`RemoteOptions::response_timeout`]
//! (default [`DEFAULT_RESPONSE_TIMEOUT`]) of the moment the request body
//! has been sent completely: while the body streams (a large PUT from a
//! slow client, an RDMA PUT to a slow store) the request is bounded by the
//! body's own progress, not by this timer. Operations the store carries
//! out before it answers, whose duration grows with the object
//! (CompleteMultipartUpload, CopyObject, UploadPartCopy: see
//! [`is_long_operation`]), get [`RemoteOptions::long_op_timeout`] instead
//! (default [`DEFAULT_LONG_OP_TIMEOUT`]). While the body streams, the store
//! must keep taking it: a store that takes none of the bytes the gateway
//! has ready for [`RemoteOptions::send_stall_timeout`] fails the request
//! (see [`super::send_watch`]).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http::header::{HeaderMap, HeaderValue, HOST};
use http::uri::{Authority, Scheme};
use http::{Method, Request, Response, Uri, Version};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::retry::{self, ResponseHeadTimeout, RetryPolicy};
use super::send_watch::SendWatch;
use super::{Payload, Upstream, UpstreamError};
use crate::body::{Body, BoxError};
use crate::config::KeyPair;
use crate::tls::{self, CaCerts, TlsHandshakeError};
use hipobj_net::quickack::QuickAckConnector;

pub use crate::config::defaults::{
    CONNECT_TIMEOUT, DEFAULT_LONG_OP_TIMEOUT, DEFAULT_RESPONSE_TIMEOUT, DEFAULT_SEND_STALL_TIMEOUT,
    POOL_IDLE_TIMEOUT,
};

/// TCP keep-alive probe interval on connections to the store.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// How a [`RemoteUpstream`] connects, times out and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// How long the store may take to send the response head, counted
    /// from the moment the request body has been sent completely; neither
    /// the request body nor the response body is bounded by it.
    pub response_timeout: Duration,
    /// As `response_timeout`, for the operations the store carries out
    /// before it answers ([`is_long_operation`]: CompleteMultipartUpload,
    /// CopyObject, UploadPartCopy).
    pub long_op_timeout: Duration,
    /// How long the store may stop taking the request body while the
    /// gateway has bytes ready for it (see [`super::send_watch`]).
    pub send_stall_timeout: Duration,
    /// When replayable requests are sent again.
    pub retry: RetryPolicy,
    /// How long a TCP connect to the store may take.
    pub connect_timeout: Duration,
    /// How long an idle pooled connection is kept.
    pub pool_idle_timeout: Duration,
    /// CA certificates trusted for an `https://` store besides the
    /// system's roots.
    pub ca: CaCerts,
    /// Whether `encoding-type` is removed from requests (for a store that
    /// echoes `encoding-type=url` without encoding the keys, as s3s-fs
    /// 0.14 does; see `upstream::without_encoding_type`).
    pub drop_encoding_type: bool,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            long_op_timeout: DEFAULT_LONG_OP_TIMEOUT,
            send_stall_timeout: DEFAULT_SEND_STALL_TIMEOUT,
            retry: RetryPolicy::default(),
            connect_timeout: CONNECT_TIMEOUT,
            pool_idle_timeout: POOL_IDLE_TIMEOUT,
            ca: CaCerts::none(),
            drop_encoding_type: false,
        }
    }
}

/// A remote S3 store at an `http://host[:port]` or `https://host[:port]`
/// endpoint, signed with its own credentials. Cheap to clone: clones share
/// the connection pool.
#[derive(Clone)]
pub struct RemoteUpstream {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client<HttpsConnector<QuickAckConnector>, Body>,
    scheme: Scheme,
    endpoint: String,
    authority: Authority,
    host: HeaderValue,
    credentials: KeyPair,
    region: String,
    options: RemoteOptions,
}

impl std::fmt::Debug for RemoteUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteUpstream")
            .field("endpoint", &self.inner.endpoint)
            .field("region", &self.inner.region)
            .field("access_key", &self.inner.credentials.access_key)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl RemoteUpstream {
    /// A client for the store at `endpoint` (`http://host[:port]` or
    /// `https://host[:port]`, an optional trailing `/`), signing with
    /// `credentials` for `region`.
    /// Connections are made on first use; nothing is spawned here.
    /// Default [`RemoteOptions`].
    pub fn new(
        endpoint: &str,
        credentials: KeyPair,
        region: &str,
    ) -> Result<RemoteUpstream, UpstreamError> {
        RemoteUpstream::with_options(endpoint, credentials, region, RemoteOptions::default())
    }

    /// As [`RemoteUpstream::new`], with these timeouts and retries.
    pub fn with_options(
        endpoint: &str,
        credentials: KeyPair,
        region: &str,
        options: RemoteOptions,
    ) -> Result<RemoteUpstream, UpstreamError> {
        let invalid = |reason| UpstreamError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let uri: Uri = endpoint.parse().map_err(|_| invalid("not a URL"))?;
        let scheme = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => Scheme::HTTP,
            Some(s) if *s == Scheme::HTTPS => Scheme::HTTPS,
            _ => return Err(invalid("the scheme must be http:// or https://")),
        };
        let authority = uri.authority().cloned().ok_or_else(|| invalid("no host"))?;
        if authority.as_str().contains('@') {
            return Err(invalid("user information is not allowed"));
        }
        if let Some(pq) = uri.path_and_query() {
            if (pq.path() != "/" && !pq.path().is_empty()) || pq.query().is_some() {
                return Err(invalid("a path or query is not supported"));
            }
        }
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| invalid("bad host"))?;

        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(options.connect_timeout));
        tcp.set_nodelay(true);
        tcp.set_keepalive(Some(TCP_KEEPALIVE));
        tcp.enforce_http(false);
        // TCP_QUICKACK after every read: a store that does not set
        // TCP_NODELAY would otherwise stall small answers ~40 ms (see
        // `hipobj_net::quickack`).
        let tcp = QuickAckConnector::new(tcp);
        // An http:// store is never spoken to in TLS, an https:// one never
        // in the clear.
        let connector = if scheme == Scheme::HTTPS {
            let config =
                tls::client_config(&options.ca).map_err(|_| invalid("TLS cannot be set up"))?;
            HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_only()
                .enable_http1()
                .wrap_connector(tcp)
        } else {
            let config = tls::unused_config().map_err(|_| invalid("TLS cannot be set up"))?;
            HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_or_http()
                .enable_http1()
                .wrap_connector(tcp)
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            // A response streams through reads of at most this much (hyper's
            // default buffer grows to 408 KiB per connection, and a pool
            // keeps one per store connection).
            .http1_max_buf_size(crate::server::READ_BUFFER_MAX)
            .pool_idle_timeout(options.pool_idle_timeout)
            .set_host(false)
            .build(connector);

        Ok(RemoteUpstream {
            inner: Arc::new(Inner {
                client,
                endpoint: format!("{scheme}://{authority}"),
                scheme,
                authority,
                host,
                credentials,
                region: region.to_owned(),
                options,
            }),
        })
    }

    /// The endpoint, `http://host:port` or `https://host:port`.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Sends `req` once: no retry, whatever the request.
    pub fn send_once(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.send_once(req, payload).await })
    }
}

impl Inner {
    async fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> Result<Response<Body>, UpstreamError> {
        let policy = &self.options.retry;
        if policy.max_retries == 0 || !retry::is_replayable(req.method(), req.body()) {
            return self.send_once(req, payload).await;
        }
        let (parts, _) = req.into_parts();
        let mut retries = 0;
        loop {
            let attempt = Request::from_parts(parts.clone(), Body::empty());
            let out = self.send_once(attempt, payload.clone()).await;
            let again = match &out {
                Ok(resp) => retry::is_retryable_status(resp.status()),
                Err(err) => retry::is_retryable_error(err),
            };
            if !again || retries >= policy.max_retries {
                return out;
            }
            let delay = policy.delay(retries);
            match &out {
                Ok(resp) => tracing::debug!(upstream = %self.endpoint, method = %parts.method,
                    status = %resp.status(), ?delay, "retrying"),
                Err(err) => tracing::debug!(upstream = %self.endpoint, method = %parts.method,
                    error = %err, ?delay, "retrying"),
            }
            drop(out);
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }

    async fn send_once(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> Result<Response<Body>, UpstreamError> {
        let (mut parts, body) = req.into_parts();
        let mut path_and_query = super::upstream_path_and_query(&parts.uri)?;
        if self.options.drop_encoding_type {
            path_and_query = super::without_encoding_type(&path_and_query);
        }
        parts.uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path_and_query)
            .build()
            .map_err(|e| UpstreamError::InvalidTarget(e.to_string()))?;
        parts.version = Version::HTTP_11;
        parts.headers.insert(HOST, self.host.clone());
        let method = parts.method.clone();
        let timeout = if is_long_operation(&parts.method, &parts.uri, &parts.headers) {
            self.options.long_op_timeout
        } else {
            self.options.response_timeout
        };
        let (body, watch) = SendWatch::wrap(body);
        let stall_limit = self.options.send_stall_timeout;
        let mut req = Request::from_parts(parts, body);
        super::sign(&mut req, &self.credentials, &self.region, &payload)?;

        tracing::debug!(upstream = %self.endpoint, %method, path = req.uri().path(), "to store");
        let resp = self.client.request(req);
        tokio::pin!(resp);
        // Until the body is sent, the request goes at the body's pace; the
        // store's response head is awaited from then on. A store may also
        // answer before it has read the whole body (an error, mostly).
        // The store must keep taking the body while the gateway has bytes
        // for it (`send_stall_timeout`).
        let SendWatch { sent, stall } = watch;
        let resp = tokio::select! {
            biased;
            resp = &mut resp => resp,
            _ = sent => tokio::time::timeout(timeout, &mut resp)
                .await
                .map_err(|_| UpstreamError::Request(Box::new(ResponseHeadTimeout(timeout))))?,
            stall = stall.stalled(stall_limit) => {
                tracing::warn!(upstream = %self.endpoint, %method, limit = ?stall_limit,
                    "the store stopped taking the request body; request failed");
                return Err(UpstreamError::Request(Box::new(stall)));
            }
        }
        .map_err(classify)?;
        tracing::debug!(upstream = %self.endpoint, %method, status = %resp.status(), "from store");
        Ok(resp.map(Body::new))
    }
}

/// Whether the store carries out this request before it answers, for a
/// time that grows with the object: CompleteMultipartUpload (`POST` with an
/// `uploadId` parameter; the store joins the parts), CopyObject and
/// UploadPartCopy (an `x-amz-copy-source` header; the store copies the
/// bytes). Such a request's response head is awaited for
/// [`RemoteOptions::long_op_timeout`].
pub fn is_long_operation(method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    // Any copy, whatever else the request says; the rest by the gateway's
    // one classification of S3 operations.
    headers.contains_key("x-amz-copy-source")
        || crate::s3op::operation_name(method, uri, headers) == "CompleteMultipartUpload"
}

/// Sorts a client error into connect failure (a failed TLS handshake said
/// plainly), connect timeout or a failure on an established connection.
fn classify(err: hyper_util::client::legacy::Error) -> UpstreamError {
    if err.is_connect() {
        if let Some(tls) = TlsHandshakeError::find(&err) {
            return UpstreamError::Connect(Box::new(tls));
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> =
            std::error::Error::source(&err);
        while let Some(e) = source {
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            {
                return UpstreamError::ConnectTimeout;
            }
            source = e.source();
        }
        UpstreamError::Connect(BoxError::from(err))
    } else {
        UpstreamError::Request(BoxError::from(err))
    }
}

impl Upstream for RemoteUpstream {
    fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.send(req, payload).await })
    }

    fn describe(&self) -> String {
        format!(
            "remote S3 at {} (region {})",
            self.inner.endpoint, self.inner.region
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> KeyPair {
        KeyPair {
            access_key: "AK".into(),
            secret_key: "s3cr3t-value".into(),
        }
    }

    #[test]
    fn endpoints() {
        for ok in [
            "http://127.0.0.1:9000",
            "http://localhost:9000/",
            "http://minio",
            "https://x:9000",
            "https://minio.example/",
        ] {
            RemoteUpstream::new(ok, key(), "us-east-1").unwrap();
        }
        for bad in [
            "ftp://x",
            "https://x:9000/bucket",
            "x:9000",
            "http://x:9000/prefix",
            "http://u:p@x:9000",
            "not a url",
        ] {
            assert!(
                matches!(
                    RemoteUpstream::new(bad, key(), "us-east-1"),
                    Err(UpstreamError::InvalidEndpoint { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn long_operations() {
        let long = |m: Method, target: &str, h: &[(&'static str, &str)]| {
            let uri: Uri = target.parse().unwrap();
            let mut headers = HeaderMap::new();
            for (k, v) in h {
                headers.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            is_long_operation(&m, &uri, &headers)
        };
        let copy = [("x-amz-copy-source", "/src/key")];
        // CompleteMultipartUpload, CopyObject, UploadPartCopy.
        assert!(long(Method::POST, "/b/k?uploadId=abc", &[]));
        assert!(long(Method::POST, "/b/k?x=1&uploadId=", &[]));
        assert!(long(Method::PUT, "/b/k", &copy));
        assert!(long(Method::PUT, "/b/k?partNumber=2&uploadId=abc", &copy));
        // Everything else: UploadPart, Create/Abort multipart, ListParts,
        // PutObject, DeleteObjects, GetObject.
        assert!(!long(Method::PUT, "/b/k?partNumber=2&uploadId=abc", &[]));
        assert!(!long(Method::POST, "/b/k?uploads", &[]));
        assert!(!long(Method::DELETE, "/b/k?uploadId=abc", &[]));
        assert!(!long(Method::GET, "/b/k?uploadId=abc", &[]));
        assert!(!long(Method::PUT, "/b/k", &[]));
        assert!(!long(Method::POST, "/b?delete", &[]));
        assert!(!long(Method::POST, "/b/k?uploadIdx=1&myuploadId=2", &[]));
        assert!(!long(Method::GET, "/b/k", &[]));
    }

    #[test]
    fn debug_has_no_secret() {
        let up = RemoteUpstream::new("http://h:1", key(), "r").unwrap();
        let s = format!("{up:?} {}", up.describe());
        assert!(!s.contains("s3cr3t"), "{s}");
    }
}
