//! A signing S3 client (path-style, blocking on its own runtime), its
//! answers, and assertions on them.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hipobj_gateway::body::Body;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::Digest;

/// The access key clients sign with (the test server's and the gateway's
/// default).
pub const AK: &str = "hipobj-test-key";
/// The secret key clients sign with.
pub const SK: &str = "hipobj-test-secret";
/// The region everything is signed for.
pub const REGION: &str = "us-east-1";

/// A signing S3 client (path-style), blocking on its own runtime.
#[derive(Debug)]
pub struct S3 {
    /// `http://host:port`.
    pub url: String,
    access_key: String,
    secret_key: String,
    rt: tokio::runtime::Runtime,
    client: Client<HttpConnector, Body>,
}

/// An answer, its body read whole.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The `<Code>` of an S3 XML error body.
    pub fn code(&self) -> Option<String> {
        xml_field(&self.body, "Code")
    }

    /// The `x-amz-rdma-reply` value.
    pub fn reply(&self) -> Option<String> {
        self.header(hipobj_wire::headers::RDMA_REPLY)
    }

    /// The body as text, for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl S3 {
    /// A client of `url` signing with the test credentials ([`AK`], [`SK`]).
    pub fn new(url: &str) -> S3 {
        S3::with_keys(url, AK, SK)
    }

    /// A client of `url` (`http://host:port`, a trailing `/` dropped)
    /// signing with `access_key` and `secret_key`.
    pub fn with_keys(url: &str, access_key: &str, secret_key: &str) -> S3 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http();
        S3 {
            url: url.trim_end_matches('/').to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            rt,
            client,
        }
    }

    /// The same client with its connections made from `local` (a client
    /// on another address of the host, whose RDMA GID names that address).
    pub fn bound_to(mut self, local: std::net::IpAddr) -> S3 {
        let mut c = HttpConnector::new();
        c.set_local_address(Some(local));
        self.client = Client::builder(TokioExecutor::new()).build(c);
        self
    }

    /// A request of `path_and_query` with `headers` and `body`, signed
    /// with `secret`: the payload as its SHA-256, or as UNSIGNED-PAYLOAD
    /// when `unsigned`.
    fn signed(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
        secret: &str,
    ) -> Result<Request<Body>, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.url, path_and_query));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let hash = if unsigned {
            "UNSIGNED-PAYLOAD".to_string()
        } else {
            hex::encode(sha2::Sha256::digest(&body))
        };
        let len = body.len();
        let mut req = req.body(Body::from(body)).map_err(|e| e.to_string())?;
        req.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        hipobj_gateway::upstream::sign_request(
            &mut req,
            &self.access_key,
            secret,
            REGION,
            &hash,
            SystemTime::now(),
        )
        .map_err(|e| format!("signing: {e}"))?;
        Ok(req)
    }

    /// The secret key it signs with.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// One signed request; the payload is signed as its SHA-256, or as
    /// UNSIGNED-PAYLOAD when `unsigned`. Panics when no answer comes.
    pub fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Answer {
        let secret = self.secret_key.clone();
        self.send_ext(
            method,
            path_and_query,
            headers,
            body,
            unsigned,
            &secret,
            &[],
        )
    }

    /// As [`send`](Self::send), signed with `secret`, with `after` added
    /// once the request is signed (so they are not among the signed
    /// headers).
    #[allow(clippy::too_many_arguments)]
    pub fn send_ext(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
        secret: &str,
        after: &[(&str, &str)],
    ) -> Answer {
        let what = format!("{method} {}{path_and_query}", self.url);
        let mut req = self
            .signed(method, path_and_query, headers, body, unsigned, secret)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for (k, v) in after {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        self.request(req).unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// As [`send`](Self::send), with a connection error as an error.
    pub fn try_send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        unsigned: bool,
    ) -> Result<Answer, String> {
        let req = self.signed(
            method,
            path_and_query,
            headers,
            body,
            unsigned,
            &self.secret_key,
        )?;
        self.request(req)
    }

    /// A signed request given up once `abandon` completes: its connection
    /// is closed while the server may still be serving it. `None` when it
    /// was given up, the answer when it came first. (`abandon` runs on this
    /// client's runtime: a timer, or a channel another thread signals on
    /// an event.)
    pub fn send_abandoned(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        abandon: impl std::future::Future<Output = ()>,
    ) -> Option<Answer> {
        let req = self
            .signed(
                method,
                path_and_query,
                headers,
                Vec::new(),
                true,
                &self.secret_key,
            )
            .unwrap();
        // A client of its own, so that no pooled connection survives.
        let client: Client<_, Body> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http();
        self.rt.block_on(async {
            let resp = tokio::select! {
                r = client.request(req) => r,
                () = abandon => return None,
            };
            let (parts, body) = resp.expect("HTTP request").into_parts();
            let body = body.collect().await.expect("HTTP body").to_bytes();
            Some(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        })
    }

    /// Sends a prepared (signed) request; its answer, its body read whole.
    pub fn request(&self, req: Request<Body>) -> Result<Answer, String> {
        self.rt.block_on(async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("HTTP request: {e}"))?;
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("HTTP body: {e}"))?
                .to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        })
    }

    /// A signed PUT of `body`.
    pub fn put_plain(&self, path: &str, body: Vec<u8>) -> Answer {
        self.send(Method::PUT, path, &[], body, false)
    }

    /// A signed GET.
    pub fn get_plain(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Vec::new(), false)
    }

    /// An unsigned GET (the health endpoints); panics when no answer comes.
    pub fn get_unsigned(&self, path: &str) -> Answer {
        let req = Request::get(format!("{}{path}", self.url))
            .body(Body::empty())
            .unwrap();
        self.request(req)
            .unwrap_or_else(|e| panic!("GET {}{path}: {e}", self.url))
    }

    /// An unsigned GET with `headers` (a presigned URL's `Host`, ...);
    /// panics when no answer comes.
    pub fn get_unsigned_with(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut req = Request::get(format!("{}{path}", self.url));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Body::empty()).unwrap();
        self.request(req)
            .unwrap_or_else(|e| panic!("GET {}{path}: {e}", self.url))
    }

    /// The sum of the values of metric `name` in the server's `/metrics`
    /// over the series whose labels include all of `labels`; 0 when there
    /// is none.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let body = self.get_unsigned("/metrics").text();
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (n, set) = match series.split_once('{') {
                    Some((n, rest)) => (n, rest.strip_suffix('}')?),
                    None => (series, ""),
                };
                let has =
                    |(k, v): &(&str, &str)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\""));
                (n == name && labels.iter().all(has)).then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }

    /// Waits until `cond` holds for [`metric`](Self::metric)`(name,
    /// labels)`, reading it every 20 ms for at most 60 s: the value that
    /// satisfied it; panics with the last value read when none did.
    #[track_caller]
    pub fn wait_metric(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        cond: impl Fn(f64) -> bool,
    ) -> f64 {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.metric(name, labels);
            if cond(v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}{labels:?} is still {v} after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Creates `bucket`; panics unless it is created.
    pub fn create_bucket(&self, bucket: &str) {
        let a = self.put_plain(&format!("/{bucket}"), Vec::new());
        assert!(
            a.status.is_success(),
            "create bucket {bucket}: {} {}",
            a.status,
            a.text()
        );
    }
}

/// The text of the first `<tag>` element of an XML body.
pub fn xml_field(body: &[u8], tag: &str) -> Option<String> {
    let s = String::from_utf8_lossy(body);
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = s.find(&open)? + open.len();
    let end = start + s[start..].find(&close)?;
    Some(s[start..end].to_string())
}

/// Asserts an S3 error answer exactly: HTTP status, `<Code>`, and the
/// `x-amz-rdma-reply` value (or its absence).
#[track_caller]
pub fn assert_error(a: &Answer, status: u16, code: &str, reply: Option<&str>, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: status ({})", a.text());
    assert_eq!(
        a.code().as_deref(),
        Some(code),
        "{what}: code ({})",
        a.text()
    );
    assert_eq!(a.reply().as_deref(), reply, "{what}: x-amz-rdma-reply");
}

/// Asserts that a plain signed GET of `path` answers 404 NoSuchKey.
#[track_caller]
pub fn assert_absent(s3: &S3, path: &str) {
    let a = s3.get_plain(path);
    assert_eq!(
        a.status.as_u16(),
        404,
        "{}{path} should be absent: {} bytes there",
        s3.url,
        a.body.len()
    );
    assert_eq!(
        a.code().as_deref(),
        Some("NoSuchKey"),
        "{}{path}: {}",
        s3.url,
        a.text()
    );
}

/// Asserts that a plain signed GET of `path` answers exactly `data`.
#[track_caller]
pub fn assert_object(s3: &S3, path: &str, data: &[u8]) {
    let a = s3.get_plain(path);
    assert_eq!(a.status.as_u16(), 200, "GET {}{path}: {}", s3.url, a.text());
    assert_eq!(a.body.len(), data.len(), "GET {}{path}: length", s3.url);
    assert!(a.body[..] == data[..], "GET {}{path}: bytes differ", s3.url);
}
