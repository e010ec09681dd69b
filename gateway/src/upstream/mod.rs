//! The S3 store behind the front.
//!
//! Two kinds share one interface, [`Upstream`]: a remote S3 endpoint reached
//! over HTTP ([`remote::RemoteUpstream`]) and the embedded store (hipobj-store)
//! served in-process ([`embedded::EmbeddedUpstream`]). Either way the request
//! is re-addressed to the store, signed with the store's own credentials
//! (SigV4, through [`sign_request`]) and streamed both ways.
//! Several remote endpoints of one store are served with failover by
//! [`multi::MultiUpstream`]; [`retry`] says which requests are retried,
//! [`crate::tls`] what an `https://` store's certificate is checked against.

pub mod embedded;
pub mod multi;
pub use hipobj_net::quickack;
pub mod remote;
pub mod retry;
pub mod send_watch;
mod sign;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use hipobj_net::sigv4::EMPTY_SHA256;

use crate::body::{Body, BoxError};
use crate::config::{KeyPair, UpstreamConfig, UpstreamOptions};

pub use self::embedded::EmbeddedUpstream;
pub use self::multi::{MultiOptions, MultiUpstream};
pub use self::remote::{RemoteOptions, RemoteUpstream};
pub use self::retry::RetryPolicy;
pub use self::sign::sign_request;
pub use crate::tls::{CaCerts, CaFileError};

/// How long [`Upstream::ready`] waits for the store's answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// What to sign the upstream request's payload as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `UNSIGNED-PAYLOAD`: the body is sent unhashed.
    Unsigned,
    /// The body's SHA-256, lowercase hex (64 characters).
    Sha256(String),
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: an aws-chunked body without
    /// chunk signatures, ending in a trailing checksum.
    StreamingUnsignedTrailer,
}

impl Payload {
    /// The value for `x-amz-content-sha256` and the canonical request.
    pub fn hash(&self) -> &str {
        match self {
            Payload::Unsigned => "UNSIGNED-PAYLOAD",
            Payload::Sha256(hex) => hex,
            Payload::StreamingUnsignedTrailer => "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        }
    }
}

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

/// Opens the configured store with the default [`UpstreamOptions`].
/// Spawns nothing and needs no runtime; the embedded store's root is
/// created if missing.
pub fn build(cfg: &UpstreamConfig, region: &str) -> Result<Arc<dyn Upstream>, UpstreamError> {
    build_with(cfg, region, &UpstreamOptions::default())
}

/// Opens the configured store; a remote one (or cluster) connects, times
/// out, retries, probes and trusts as `options` say (the embedded store
/// ignores them). Spawns nothing and needs no runtime.
pub fn build_with(
    cfg: &UpstreamConfig,
    region: &str,
    options: &UpstreamOptions,
) -> Result<Arc<dyn Upstream>, UpstreamError> {
    match cfg {
        UpstreamConfig::Remote {
            endpoint,
            credentials,
        } => Ok(Arc::new(RemoteUpstream::with_options(
            endpoint,
            credentials.clone(),
            region,
            remote_options(options),
        )?)),
        UpstreamConfig::Cluster {
            endpoints,
            credentials,
        } => Ok(Arc::new(MultiUpstream::new(
            endpoints,
            credentials.clone(),
            region,
            multi_options(options),
        )?)),
        UpstreamConfig::Embedded { root, fsync } => Ok(Arc::new(EmbeddedUpstream::with_config(
            root,
            region,
            hipobj_store::StoreConfig { fsync: *fsync },
        )?)),
    }
}

/// What a [`RemoteUpstream`] is built with for `options`.
pub fn remote_options(options: &UpstreamOptions) -> RemoteOptions {
    RemoteOptions {
        response_timeout: options.response_timeout,
        long_op_timeout: options.long_op_timeout,
        send_stall_timeout: options.send_stall_timeout,
        retry: RetryPolicy {
            max_retries: options.retries,
            backoff: options.backoff.clone(),
        },
        connect_timeout: options.connect_timeout,
        pool_idle_timeout: options.pool_idle_timeout,
        ca: options.ca.clone(),
        drop_encoding_type: options.drop_encoding_type,
    }
}

/// What a [`MultiUpstream`] is built with for `options`.
pub fn multi_options(options: &UpstreamOptions) -> MultiOptions {
    MultiOptions {
        remote: remote_options(options),
        health_interval: options.health_interval,
    }
}

/// What AWS's URI encoding leaves alone in a path: unreserved characters
/// and `/`.
const PATH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The path-and-query to send to the store for a client's raw one.
///
/// The path is decoded and encoded again the way SigV4 canonicalizes it
/// (every byte but unreserved characters and `/` percent-encoded), so the
/// store's canonical path matches the one signed whatever escaping the
/// client chose. The query is kept as sent, less an empty `delimiter`
/// parameter (s3s-fs lists nothing for `delimiter=`, which minio-py sends).
pub(crate) fn upstream_path_and_query(uri: &http::Uri) -> Result<String, UpstreamError> {
    let raw_path = uri.path();
    let path = percent_decode_str(raw_path)
        .decode_utf8()
        .map_err(|_| UpstreamError::InvalidTarget("path is not UTF-8 once decoded".into()))?;
    let mut out = String::with_capacity(raw_path.len() + uri.query().map_or(0, |q| q.len() + 1));
    if !path.starts_with('/') {
        out.push('/');
    }
    out.extend(utf8_percent_encode(&path, PATH_ENCODE));
    if let Some(query) = uri.query() {
        let mut first = true;
        for param in query.split('&') {
            if param.is_empty() || param == "delimiter" || param == "delimiter=" {
                continue;
            }
            out.push(if first { '?' } else { '&' });
            out.push_str(param);
            first = false;
        }
    }
    Ok(out)
}

/// `path_and_query` less any `encoding-type` parameter.
///
/// s3s-fs echoes `encoding-type=url` back as `<EncodingType>url</EncodingType>`
/// in a listing but leaves the keys unencoded, so a client that asked for it
/// (boto3 always does, minio-py too) URL-decodes raw keys: `a+b` comes back
/// as `a b`, `100%25` as `100%`. Without the parameter the store answers
/// with raw keys and no `EncodingType`, which clients take as they are.
/// Done for a remote store when [`RemoteOptions::drop_encoding_type`] says
/// so (the embedded store encodes keys as asked).
pub(crate) fn without_encoding_type(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            let name = p.split_once('=').map_or(*p, |(n, _)| n);
            !name.eq_ignore_ascii_case("encoding-type")
        })
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// Signs `req` for the store with `credentials`, or with the tenant's own
/// store credentials where the request carries a
/// [`StoreIdentity`](crate::tenancy::StoreIdentity).
pub(crate) fn sign(
    req: &mut Request<Body>,
    credentials: &KeyPair,
    region: &str,
    payload: &Payload,
) -> Result<(), UpstreamError> {
    if req
        .extensions()
        .get::<crate::tenancy::Anonymous>()
        .is_some()
    {
        // The client's anonymous request stays anonymous: no key of ours
        // or a tenant's signs it.
        req.headers_mut().remove(http::header::AUTHORIZATION);
        return Ok(());
    }
    let tenant = req
        .extensions()
        .get::<crate::tenancy::StoreIdentity>()
        .map(|id| Arc::clone(&id.0));
    let credentials = tenant.as_deref().unwrap_or(credentials);
    sign_request(
        req,
        &credentials.access_key,
        &credentials.secret_key,
        region,
        payload.hash(),
        SystemTime::now(),
    )
    .map_err(|e| UpstreamError::Sign(e.to_string()))
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

/// Times a request to the store for the metrics, counting it as an error
/// when it gets no answer or a 5xx one.
pub async fn timed<F>(op: &'static str, send: F) -> F::Output
where
    F: std::future::Future<Output = Result<http::Response<Body>, UpstreamError>>,
{
    let start = std::time::Instant::now();
    let out = send.await;
    let error = match &out {
        Ok(r) if r.status().is_server_error() => Some("status_5xx"),
        Ok(_) => None,
        Err(e) => Some(e.metric_reason()),
    };
    crate::metrics::upstream_request(op, start.elapsed(), error);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pq(s: &str) -> String {
        upstream_path_and_query(&s.parse().unwrap()).unwrap()
    }

    #[test]
    fn path_is_canonically_encoded() {
        assert_eq!(pq("/bucket/key%20x"), "/bucket/key%20x");
        assert_eq!(pq("/bucket/a%7Eb%2Dc"), "/bucket/a~b-c");
        assert_eq!(pq("/bucket/a+b"), "/bucket/a%2Bb");
        assert_eq!(pq("/bucket/%C3%A9t%C3%A9"), "/bucket/%C3%A9t%C3%A9");
        assert_eq!(pq("/bucket/a!b*c"), "/bucket/a%21b%2Ac");
        assert_eq!(pq("/"), "/");
    }

    #[test]
    fn query_kept_less_empty_delimiter() {
        assert_eq!(
            pq("/b?partNumber=1&uploadId=x%2By"),
            "/b?partNumber=1&uploadId=x%2By"
        );
        assert_eq!(
            pq("/b?list-type=2&delimiter=&prefix=a"),
            "/b?list-type=2&prefix=a"
        );
        assert_eq!(pq("/b?delimiter=&list-type=2"), "/b?list-type=2");
        assert_eq!(pq("/b?delimiter"), "/b");
        assert_eq!(pq("/b?delimiter=%2F"), "/b?delimiter=%2F");
        assert_eq!(pq("/b?uploads"), "/b?uploads");
    }

    #[test]
    fn invalid_utf8_path_is_refused() {
        let uri: http::Uri = "/b/%FF".parse().unwrap();
        assert!(matches!(
            upstream_path_and_query(&uri),
            Err(UpstreamError::InvalidTarget(_))
        ));
    }

    #[test]
    fn defaults_are_the_constructors_defaults() {
        let d = UpstreamOptions::default();
        assert_eq!(remote_options(&d), RemoteOptions::default());
        assert_eq!(multi_options(&d), MultiOptions::default());
    }

    #[test]
    fn options_reach_remote_and_multi() {
        let o = UpstreamOptions {
            connect_timeout: Duration::from_millis(1500),
            response_timeout: Duration::from_secs(7),
            long_op_timeout: Duration::from_secs(13),
            send_stall_timeout: Duration::from_secs(17),
            pool_idle_timeout: Duration::from_secs(11),
            retries: 5,
            backoff: vec![Duration::from_millis(10), Duration::from_millis(20)],
            health_interval: Duration::from_secs(3),
            ca: CaCerts::none(),
            drop_encoding_type: true,
            checksum_trailers: false,
        };
        let r = remote_options(&o);
        assert_eq!(r.connect_timeout, Duration::from_millis(1500));
        assert_eq!(r.response_timeout, Duration::from_secs(7));
        assert_eq!(r.long_op_timeout, Duration::from_secs(13));
        assert_eq!(r.send_stall_timeout, Duration::from_secs(17));
        assert_eq!(r.pool_idle_timeout, Duration::from_secs(11));
        assert!(r.drop_encoding_type);
        assert_eq!(r.retry.max_retries, 5);
        assert_eq!(r.retry.delay(0), Duration::from_millis(10));
        assert_eq!(r.retry.delay(4), Duration::from_millis(20));
        let m = multi_options(&o);
        assert_eq!(m.remote, r);
        assert_eq!(m.health_interval, Duration::from_secs(3));
        // Built either way, the options are the upstream's own.
        let key = KeyPair {
            access_key: "a".into(),
            secret_key: "b".into(),
        };
        let remote = UpstreamConfig::Remote {
            endpoint: "http://127.0.0.1:9".into(),
            credentials: key.clone(),
        };
        let s = format!("{:?}", build_with(&remote, "r", &o).unwrap());
        assert!(s.contains("connect_timeout: 1.5s"), "{s}");
        assert!(s.contains("max_retries: 5"), "{s}");
        let cluster = UpstreamConfig::Cluster {
            endpoints: vec!["http://127.0.0.1:9".into(), "http://127.0.0.1:10".into()],
            credentials: key,
        };
        let s = format!("{:?}", build_with(&cluster, "r", &o).unwrap());
        assert!(s.contains("health_interval: 3s"), "{s}");
        assert!(s.contains("response_timeout: 7s"), "{s}");
        assert!(s.contains("long_op_timeout: 13s"), "{s}");
    }

    #[test]
    fn payload_hash() {
        assert_eq!(Payload::Unsigned.hash(), "UNSIGNED-PAYLOAD");
        assert_eq!(Payload::Sha256(EMPTY_SHA256.into()).hash(), EMPTY_SHA256);
    }
}
