//! HTTP plumbing: the endpoint, path-style URIs, hyper clients (bound to a
//! local address or not), signed requests, bodies and timeouts.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hipobj_net::quickack::QuickAckConnector;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::sign::Signer;
use crate::{Error, Result};

/// A boxed error of a body stream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The request body type.
pub(crate) type Body = UnsyncBoxBody<Bytes, BoxError>;
/// A hyper client.
pub(crate) type HttpClient = Client<QuickAckConnector, Body>;

/// Characters S3 wants encoded in a query value (all but the unreserved).
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// The same in a path, where `/` stays.
const PATH: &AsciiSet = &QUERY.remove(b'/');

/// The empty body.
pub(crate) fn empty() -> Body {
    Empty::<Bytes>::new().map_err(|e| match e {}).boxed_unsync()
}

/// A body of bytes.
pub(crate) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|e| match e {}).boxed_unsync()
}

/// The endpoint: scheme, host and port, and how buckets are addressed.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// `http://host:port`, without a trailing slash.
    pub base: String,
    /// `host:port`.
    authority: String,
    /// Virtual-hosted style: `Host: bucket.host:port`, path `/key`.
    virtual_host: bool,
}

/// Where a request goes: the URI connected to, and the `Host` to send
/// (and sign) when it is not the URI's.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub uri: Uri,
    pub host: Option<HeaderValue>,
}

impl Endpoint {
    pub(crate) fn parse(s: &str) -> Result<Endpoint> {
        let uri: Uri = s
            .trim()
            .parse()
            .map_err(|e| Error::Config(format!("endpoint {s:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(Error::Config(format!(
                    "endpoint {s:?}: https is not supported (RDMA servers here speak plain HTTP)"
                )))
            }
            _ => {
                return Err(Error::Config(format!(
                    "endpoint {s:?} must start with http://"
                )))
            }
        }
        let auth = uri
            .authority()
            .ok_or_else(|| Error::Config(format!("endpoint {s:?} has no host")))?;
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(Error::Config(format!(
                "endpoint {s:?} must be http://host[:port] (path-style requests go below it)"
            )));
        }
        let port = auth.port_u16().unwrap_or(80);
        Ok(Endpoint {
            base: format!("http://{}:{port}", auth.host()),
            authority: format!("{}:{port}", auth.host()),
            virtual_host: false,
        })
    }

    /// With virtual-hosted-style addressing (or path-style).
    pub(crate) fn virtual_hosted(mut self, on: bool) -> Endpoint {
        self.virtual_host = on;
        self
    }

    /// Where the request for `/bucket[/key][?query]` goes: path-style, the
    /// endpoint's URI of it; virtual-hosted, the endpoint's URI of
    /// `/key[?query]` with `Host: bucket.host:port` (the bucket a DNS
    /// label: no `.`-less surprises, S3's rules are the server's to check).
    /// The service itself (`/`, `ListBuckets`) is always path-style.
    pub(crate) fn target(&self, path_query: &str) -> Result<Target> {
        let rest = path_query.strip_prefix('/').unwrap_or(path_query);
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (bucket, tail) = rest.split_at(split);
        if !self.virtual_host || bucket.is_empty() {
            return Ok(Target {
                uri: self.uri(path_query)?,
                host: None,
            });
        }
        let host =
            HeaderValue::from_str(&format!("{bucket}.{}", self.authority)).map_err(|_| {
                Error::InvalidArgument(format!(
                    "bucket {bucket:?} cannot be addressed virtual-hosted"
                ))
            })?;
        let path = match tail.strip_prefix('/') {
            Some(t) => format!("/{t}"),
            None => format!("/{tail}"),
        };
        Ok(Target {
            uri: self.uri(&path)?,
            host: Some(host),
        })
    }

    /// The URI of `/bucket[/key][?query]`.
    pub(crate) fn uri(&self, path_query: &str) -> Result<Uri> {
        format!("{}{}", self.base, path_query)
            .parse()
            .map_err(|e| Error::InvalidArgument(format!("request URI {path_query:?}: {e}")))
    }
}

/// `/bucket[/key]` followed by `?k=v&…`, each part S3-encoded. Query
/// entries without a value (`uploads`) are written bare.
pub(crate) fn path_query(
    bucket: &str,
    key: Option<&str>,
    query: &[(&str, Option<&str>)],
) -> String {
    let mut s = String::from("/");
    s.extend(utf8_percent_encode(bucket, QUERY));
    if let Some(k) = key {
        s.push('/');
        s.extend(utf8_percent_encode(k, PATH));
    }
    for (i, (k, v)) in query.iter().enumerate() {
        s.push(if i == 0 { '?' } else { '&' });
        s.extend(utf8_percent_encode(k, QUERY));
        if let Some(v) = v {
            s.push('=');
            s.extend(utf8_percent_encode(v, QUERY));
        }
    }
    s
}

pub(crate) fn check_bucket(bucket: &str) -> Result<()> {
    if bucket.is_empty() || bucket.contains('/') {
        return Err(Error::InvalidArgument(format!(
            "bucket name {bucket:?} is empty or contains '/'"
        )));
    }
    Ok(())
}

pub(crate) fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument("empty object key".into()));
    }
    Ok(())
}

/// A hyper client; connections bound to `local` when given.
pub(crate) fn client(local: Option<IpAddr>, connect_timeout: Duration) -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_connect_timeout(Some(connect_timeout));
    c.set_nodelay(true);
    c.set_local_address(local);
    c.enforce_http(true);
    // TCP_QUICKACK after every read: a store that does not set TCP_NODELAY
    // would otherwise stall small answers ~40 ms (see `hipobj_net::quickack`).
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(QuickAckConnector::new(c))
}

/// Builds and signs a request.
pub(crate) fn signed(
    signer: &Signer,
    method: Method,
    target: Target,
    mut headers: HeaderMap,
    body: Body,
    content_length: u64,
    payload_hash: &str,
) -> Result<Request<Body>> {
    let Target { uri, host } = target;
    if let Some(host) = host {
        headers.insert(http::header::HOST, host);
    }
    headers.insert(CONTENT_LENGTH, HeaderValue::from(content_length));
    signer.sign(&method, &uri, &mut headers, payload_hash, SystemTime::now())?;
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

/// Sends a request within `limit`, up to the response head.
pub(crate) async fn send(
    client: &HttpClient,
    req: Request<Body>,
    limit: Duration,
) -> Result<Response<Incoming>> {
    let what = format!("{} {}", req.method(), req.uri().path());
    match tokio::time::timeout(limit, client.request(req)).await {
        Err(_) => Err(Error::Timeout(format!(
            "{what}: no answer within {} ms",
            limit.as_millis()
        ))),
        Ok(Err(e)) => {
            let mut msg = format!("{what}: {e}");
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            if msg.contains("timed out") || msg.contains("Timeout") {
                Err(Error::Timeout(msg))
            } else {
                Err(Error::Transport(msg))
            }
        }
        Ok(Ok(r)) => Ok(r),
    }
}

/// The next data chunk of a body, waiting at most `idle` for it.
pub(crate) async fn next_chunk(body: &mut Incoming, idle: Duration) -> Result<Option<Bytes>> {
    loop {
        let frame = tokio::time::timeout(idle, body.frame())
            .await
            .map_err(|_| Error::Timeout(format!("the body stalled for {} ms", idle.as_millis())))?;
        match frame {
            None => return Ok(None),
            Some(Err(e)) => return Err(Error::Transport(format!("reading the body: {e}"))),
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    if !d.is_empty() {
                        return Ok(Some(d));
                    }
                }
            }
        }
    }
}

/// Reads a body up to `cap` bytes (the rest is dropped with the
/// connection).
pub(crate) async fn read_capped(body: &mut Incoming, cap: usize, idle: Duration) -> Result<Bytes> {
    let mut out = Vec::new();
    while let Some(d) = next_chunk(body, idle).await? {
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&d[..d.len().min(room)]);
        if out.len() >= cap {
            break;
        }
    }
    Ok(Bytes::from(out))
}

/// A response head and its (small) body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        header(&self.headers, name)
    }

    /// The S3 error of an unsuccessful answer.
    pub(crate) fn error(&self, reply: Option<String>) -> Error {
        self.error_as(self.status.as_u16(), reply)
    }

    /// The S3 error of this answer with `status`: the code and message
    /// from the error document, else (an answer without a body: a HEAD)
    /// from the `x-amz-error-code` / `x-amz-error-message` headers or
    /// MinIO's `x-minio-error-code` / `x-minio-error-desc`, else the
    /// status's name.
    fn error_as(&self, status: u16, reply: Option<String>) -> Error {
        let e = Error::s3_from(status, &self.body, self.header("x-amz-request-id"), reply);
        if !self.body.is_empty() {
            return e;
        }
        let code = self
            .header("x-amz-error-code")
            .or_else(|| self.header("x-minio-error-code"))
            .filter(|c| !c.trim().is_empty());
        match (e, code) {
            (
                Error::S3 {
                    status,
                    message,
                    request_id,
                    reply,
                    ..
                },
                Some(code),
            ) => Error::S3 {
                status,
                code: code.trim().to_string(),
                message: self
                    .header("x-amz-error-message")
                    .or_else(|| self.header("x-minio-error-desc"))
                    .unwrap_or(message),
                request_id,
                reply,
            },
            (e, _) => e,
        }
    }

    /// Ok for a 2xx answer without an `<Error>` body (CompleteMultipartUpload
    /// can answer 200 with one), the S3 error otherwise.
    pub(crate) fn ok(self) -> Result<Answer> {
        let error_body =
            self.body.len() < 64 << 10 && String::from_utf8_lossy(&self.body).contains("<Error>");
        if self.status.is_success() && !error_body {
            return Ok(self);
        }
        let status = if self.status.is_success() {
            500
        } else {
            self.status.as_u16()
        };
        Err(self.error_as(status, None))
    }
}

/// A header's value as text.
pub(crate) fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Inserts a header whose value came from the caller.
pub(crate) fn set(h: &mut HeaderMap, name: &'static str, value: &str) -> Result<()> {
    let v = HeaderValue::from_str(value)
        .map_err(|_| Error::InvalidArgument(format!("invalid {name} value {value:?}")))?;
    h.insert(HeaderName::from_static(name), v);
    Ok(())
}

/// The total size in a `Content-Range: bytes a-b/total`.
pub(crate) fn range_total(content_range: &str) -> Option<u64> {
    content_range.rsplit('/').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_without_a_body_take_the_code_from_the_headers() {
        let answer = |headers: &[(&'static str, &str)], body: &'static [u8]| {
            let mut h = HeaderMap::new();
            for (k, v) in headers {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            Answer {
                status: StatusCode::FORBIDDEN,
                headers: h,
                body: Bytes::from_static(body),
            }
        };
        let e = answer(&[], b"").error(None);
        assert_eq!(e.code(), Some("Forbidden"));
        let e = answer(
            &[
                ("x-minio-error-code", "InvalidAccessKeyId"),
                ("x-minio-error-desc", "no such key"),
                ("x-amz-request-id", "r"),
            ],
            b"",
        )
        .error(Some("403".into()));
        match e {
            Error::S3 {
                status,
                code,
                message,
                request_id,
                reply,
            } => assert_eq!(
                (
                    status,
                    code.as_str(),
                    message.as_str(),
                    request_id.as_deref(),
                    reply.as_deref()
                ),
                (
                    403,
                    "InvalidAccessKeyId",
                    "no such key",
                    Some("r"),
                    Some("403")
                )
            ),
            other => panic!("{other:?}"),
        }
        let e = answer(&[("x-amz-error-code", "AccessDenied")], b"")
            .ok()
            .unwrap_err();
        assert_eq!(e.code(), Some("AccessDenied"));
        // A body's error document wins over the headers.
        let e = answer(
            &[("x-amz-error-code", "AccessDenied")],
            b"<Error><Code>SignatureDoesNotMatch</Code></Error>",
        )
        .error(None);
        assert_eq!(e.code(), Some("SignatureDoesNotMatch"));
    }

    #[test]
    fn endpoints_and_uris() {
        let e = Endpoint::parse("http://127.0.0.1:9000/").unwrap();
        assert_eq!(e.base, "http://127.0.0.1:9000");
        assert_eq!(Endpoint::parse("http://h").unwrap().base, "http://h:80");
        assert!(Endpoint::parse("https://h").is_err());
        assert!(Endpoint::parse("h:9000").is_err());
        assert!(Endpoint::parse("http://h/b").is_err());
        assert_eq!(
            path_query(
                "b",
                Some("a b/c+d~é"),
                &[("partNumber", Some("1")), ("uploadId", Some("x/y=z"))]
            ),
            "/b/a%20b/c%2Bd~%C3%A9?partNumber=1&uploadId=x%2Fy%3Dz"
        );
        assert_eq!(path_query("b", None, &[("uploads", None)]), "/b?uploads");
        assert_eq!(range_total("bytes 0-9/100"), Some(100));
        assert_eq!(range_total("bytes 0-9/*"), None);
    }

    #[test]
    fn virtual_hosted_targets() {
        let t = |vh: bool, pq: &str| {
            let t = Endpoint::parse("http://127.0.0.1:9000")
                .unwrap()
                .virtual_hosted(vh)
                .target(pq)
                .unwrap();
            (
                t.uri.to_string(),
                t.host.map(|h| h.to_str().unwrap().to_string()),
            )
        };
        let s = |x: &str| x.to_string();
        assert_eq!(t(false, "/b/k"), (s("http://127.0.0.1:9000/b/k"), None));
        assert_eq!(
            t(true, "/bkt/a%20b/c?partNumber=1&uploadId=u"),
            (
                s("http://127.0.0.1:9000/a%20b/c?partNumber=1&uploadId=u"),
                Some(s("bkt.127.0.0.1:9000"))
            )
        );
        assert_eq!(
            t(true, "/bkt?list-type=2"),
            (
                s("http://127.0.0.1:9000/?list-type=2"),
                Some(s("bkt.127.0.0.1:9000"))
            )
        );
        assert_eq!(
            t(true, "/bkt"),
            (s("http://127.0.0.1:9000/"), Some(s("bkt.127.0.0.1:9000")))
        );
        // The service itself stays path-style.
        assert_eq!(t(true, "/"), (s("http://127.0.0.1:9000/"), None));
    }
}
