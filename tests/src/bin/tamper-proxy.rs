//! `tamper-proxy --upstream URL --mode MODE`: an HTTP proxy between
//! `hipobj conformance` and a server that breaks one rule of
//! `docs/protocol.md` at a time, to prove the suite sees it. It prints
//! `tamper-proxy listening on http://ADDR` as its first line on stdout.
//!
//! Bytes moved by RDMA never pass through an HTTP proxy, so the modes that
//! need the fabric rewrite the request instead: the proxy holds the
//! suite's credentials and signs the rewritten request again (SigV4, over
//! every header it forwards). Each mode names the check it must make FAIL
//! (`--list`); `docs/conformance.md` has the table.

#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use hipobj_wire::{headers, Token};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The rule a mode breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Remove `x-amz-rdma-reply` from the answers to RDMA transfers (not
    /// from handshakes).
    DropReply,
    /// Answer 200 (and reply 200) where the server answered a Range GET 206.
    Range200,
    /// Flip one byte in the middle of every plain GET's body.
    FlipByte,
    /// Lengthen every RDMA GET's token by one byte, and sign again: the
    /// server writes one byte past the buffer the client named.
    WritePastEnd,
    /// Sign again any token request whose signature does not cover the
    /// token (or that has none): the server accepts an unsigned token.
    AcceptUnsigned,
    /// After a PutObject by RDMA failed, store a few bytes under its key
    /// (a partial object).
    PartialPut,
    /// Answer 500 (and reply 500) where the server answered a token
    /// request 400.
    Status500,
    /// Serve a token on a bucket operation (ListObjectsV2 and the like) as
    /// if it had none: the token is removed, the request signed again and
    /// answered plainly, where the server must answer 501.
    #[value(name = "serve-other-op")]
    ServeOtherOp,
    /// Where the server answered 421 (no pair with the token's QP), send
    /// the request again without the token and answer with the object in
    /// the body: a server that falls back to HTTP instead of asking for a
    /// new handshake.
    #[value(name = "fallback-on-421")]
    FallbackOn421,
    /// Change the cookie a hipobj-rc-v2 READY's answer (FINAL) echoes: a
    /// client that does not check the echo takes another transfer's
    /// outcome as its own.
    #[value(name = "v2-cookie-echo")]
    V2CookieEcho,
    /// Answer 200 where the server answered a hipobj-rc-v2 READY 404 (an
    /// unknown session, another key's, or a wrong cookie).
    #[value(name = "v2-ready-404-as-200")]
    V2Ready404As200,
    /// Answer 404 to every hipobj-rc-v2 CANCEL after the first of a
    /// session: CANCEL is not idempotent.
    #[value(name = "v2-cancel-once")]
    V2CancelOnce,
    /// Answer 200 where the server answered a hipobj-rc-v2 PREPARE 400.
    #[value(name = "v2-prepare-400-as-200")]
    V2Prepare400As200,
    /// Move a hipobj-rc-v2 PREPARE's offset by one byte (signed again):
    /// the server sends other bytes than the client asked for.
    #[value(name = "v2-shift-offset")]
    V2ShiftOffset,
    /// Shorten a hipobj-rc-v2 PUT's PREPARE by one byte (signed again):
    /// the staging region is too small for the client's write.
    #[value(name = "v2-put-short")]
    V2PutShort,
}

impl Mode {
    /// The checks of `hipobj conformance` this mode must make FAIL.
    fn breaks(self) -> &'static [&'static str] {
        match self {
            Mode::DropReply => &["reply.get"],
            Mode::Range200 => &["get.range.206"],
            Mode::FlipByte => &["get.whole"],
            Mode::WritePastEnd => &["status.buffer-too-small.400"],
            Mode::AcceptUnsigned => &[
                "status.token-not-signed.403",
                "v2.status.unsigned-header.403",
            ],
            Mode::PartialPut => &["put.failed.old-intact"],
            Mode::Status500 => &["status.malformed-token.400"],
            Mode::ServeOtherOp => &["status.other-operation.501"],
            Mode::FallbackOn421 => &["status.unknown-pair.421"],
            Mode::V2CookieEcho => &["v2.get.whole"],
            Mode::V2Ready404As200 => &[
                "v2.status.unknown-session.404",
                "v2.status.wrong-cookie.404",
            ],
            Mode::V2CancelOnce => &["v2.cancel.twice"],
            Mode::V2Prepare400As200 => &["v2.status.size-over-cap.400"],
            Mode::V2ShiftOffset => &["v2.get.range"],
            Mode::V2PutShort => &["v2.put.whole"],
        }
    }
}

/// Flags.
#[derive(Debug, Parser)]
#[command(name = "tamper-proxy", about)]
struct Args {
    /// The server, http://host:port.
    #[arg(long, required_unless_present = "list")]
    upstream: Option<String>,
    /// The rule to break.
    #[arg(long, value_enum, required_unless_present = "list")]
    mode: Option<Mode>,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The access key requests are signed again with.
    #[arg(long, default_value = "hipobj-test-key")]
    access_key: String,
    /// Its secret.
    #[arg(long, env = "TAMPER_SECRET_KEY", default_value = "hipobj-test-secret")]
    secret_key: String,
    /// The SigV4 region.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Print each mode and the check it breaks, and exit.
    #[arg(long)]
    list: bool,
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

struct Proxy {
    mode: Mode,
    /// The sessions cancelled once (v2-cancel-once).
    cancelled: std::sync::Mutex<std::collections::HashSet<String>>,
    upstream: Uri,
    client: HttpClient,
    access_key: String,
    secret_key: String,
    region: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if a.list {
        for m in Mode::value_variants() {
            let name = m.to_possible_value().map(|v| v.get_name().to_string());
            for check in m.breaks() {
                println!("{:<22} {check}", name.clone().unwrap_or_default());
            }
        }
        return Ok(());
    }
    let (Some(upstream), Some(mode)) = (a.upstream, a.mode) else {
        anyhow::bail!("--upstream and --mode are required");
    };
    let upstream: Uri = upstream.parse().context("--upstream")?;
    let proxy = Arc::new(Proxy {
        mode,
        cancelled: std::sync::Mutex::new(std::collections::HashSet::new()),
        upstream,
        client: Client::builder(TokioExecutor::new()).build_http(),
        access_key: a.access_key,
        secret_key: a.secret_key,
        region: a.region,
    });
    let listener = tokio::net::TcpListener::bind(a.listen)
        .await
        .with_context(|| format!("listening on {}", a.listen))?;
    println!(
        "tamper-proxy listening on http://{}",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = listener.accept().await?;
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, Infallible>(proxy.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The token of a request, when it has one.
fn token_of(h: &HeaderMap) -> Option<String> {
    h.get(headers::RDMA_TOKEN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Whether `token` is an RC handshake (a hipObject RC token of length 0).
fn is_handshake(token: &str) -> bool {
    Token::decode(token).is_ok_and(|t| t.is_handshake())
}

/// Whether the request's SigV4 signature covers the token.
fn token_signed(h: &HeaderMap) -> bool {
    let Some(auth) = h
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    auth.split(',')
        .filter_map(|p| p.trim().strip_prefix("SignedHeaders="))
        .any(|s| s.split(';').any(|n| n == headers::RDMA_TOKEN))
}

/// Whether the request names a bucket rather than an object (`/bucket`,
/// `/bucket/`, with any query).
fn is_bucket_operation(path_query: &str) -> bool {
    let path = path_query.split('?').next().unwrap_or("");
    !path
        .trim_start_matches('/')
        .trim_end_matches('/')
        .contains('/')
}

fn error_response(status: StatusCode, msg: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(msg)));
    *r.status_mut() = status;
    r
}

impl Proxy {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        match self.forward(req).await {
            Ok(r) => r,
            Err(e) => error_response(StatusCode::BAD_GATEWAY, format!("tamper-proxy: {e:#}")),
        }
    }

    /// Signs `h` again for `method` and `path_query`, the payload unsigned.
    fn sign(&self, method: &Method, path_query: &str, h: &mut HeaderMap) -> anyhow::Result<()> {
        let host = h
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .context("a request without Host")?
            .to_string();
        let uri: Uri = format!("http://{host}{path_query}").parse()?;
        hipobj_net::sigv4::sign_headers(
            method,
            &uri,
            h,
            &self.access_key,
            &self.secret_key,
            &self.region,
            headers::UNSIGNED_PAYLOAD,
            SystemTime::now(),
        )
        .map_err(|e| anyhow::anyhow!("signing again: {e}"))
    }

    async fn send(
        &self,
        method: Method,
        path_query: &str,
        h: HeaderMap,
        body: Bytes,
    ) -> anyhow::Result<(http::response::Parts, Bytes)> {
        let uri: Uri = format!(
            "{}{}",
            self.upstream.to_string().trim_end_matches('/'),
            path_query
        )
        .parse()?;
        let mut up = Request::new(Full::new(body));
        *up.method_mut() = method;
        *up.uri_mut() = uri;
        *up.headers_mut() = h;
        let resp = self.client.request(up).await.context("the upstream")?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .context("the upstream's body")?
            .to_bytes();
        Ok((parts, body))
    }

    async fn forward(&self, req: Request<Incoming>) -> anyhow::Result<Response<Full<Bytes>>> {
        let (parts, body) = req.into_parts();
        let body = body.collect().await.context("the request body")?.to_bytes();
        let method = parts.method.clone();
        let path_query = parts
            .uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.to_string());
        let mut h = parts.headers.clone();
        let token = token_of(&h);
        let transfer = token.as_deref().is_some_and(|t| !is_handshake(t));

        // Rewrites of the request.
        match (self.mode, &token) {
            (Mode::WritePastEnd, Some(t))
                if method == Method::GET && transfer && token_signed(&h) =>
            {
                if let Ok(mut tok) = Token::decode(t) {
                    tok.len += 1;
                    h.insert(headers::RDMA_TOKEN, HeaderValue::from_str(&tok.encode())?);
                    self.sign(&method, &path_query, &mut h)?;
                }
            }
            (Mode::AcceptUnsigned, Some(_)) if !token_signed(&h) => {
                self.sign(&method, &path_query, &mut h)?;
            }
            (Mode::V2ShiftOffset, _) if path_query == hipobj_wire::rc_v2::PREPARE_PATH => {
                let offset = h
                    .get(hipobj_wire::rc_v2::H_OFFSET)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                if let Some(o) = offset {
                    h.insert(hipobj_wire::rc_v2::H_OFFSET, HeaderValue::from(o + 1));
                    self.sign(&method, &path_query, &mut h)?;
                }
            }
            (Mode::V2PutShort, _)
                if path_query == hipobj_wire::rc_v2::PREPARE_PATH
                    && h.get(hipobj_wire::rc_v2::H_OP).is_some_and(|v| v == "PUT") =>
            {
                let size = h
                    .get(hipobj_wire::rc_v2::H_SIZE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                if let Some(n) = size.filter(|n| *n > 1) {
                    h.insert(hipobj_wire::rc_v2::H_SIZE, HeaderValue::from(n - 1));
                    self.sign(&method, &path_query, &mut h)?;
                }
            }
            (Mode::ServeOtherOp, Some(_)) if transfer && is_bucket_operation(&path_query) => {
                h.remove(headers::RDMA_TOKEN);
                self.sign(&method, &path_query, &mut h)?;
            }
            _ => {}
        }

        let has_range = h.contains_key(http::header::RANGE);
        let (mut rp, mut rbody) = self
            .send(method.clone(), &path_query, h.clone(), body)
            .await?;

        // Rewrites of the answer.
        match self.mode {
            Mode::DropReply if transfer => {
                rp.headers.remove(headers::RDMA_REPLY);
            }
            Mode::Range200 if has_range && rp.status == StatusCode::PARTIAL_CONTENT => {
                rp.status = StatusCode::OK;
                if rp.headers.contains_key(headers::RDMA_REPLY) {
                    rp.headers
                        .insert(headers::RDMA_REPLY, HeaderValue::from_static("200"));
                }
            }
            Mode::FlipByte
                if token.is_none()
                    && method == Method::GET
                    && rp.status == StatusCode::OK
                    && !rbody.is_empty() =>
            {
                let mut b = rbody.to_vec();
                let mid = b.len() / 2;
                b[mid] ^= 0x01;
                rbody = Bytes::from(b);
            }
            Mode::Status500 if token.is_some() && rp.status == StatusCode::BAD_REQUEST => {
                rp.status = StatusCode::INTERNAL_SERVER_ERROR;
                if rp.headers.contains_key(headers::RDMA_REPLY) {
                    rp.headers
                        .insert(headers::RDMA_REPLY, HeaderValue::from_static("500"));
                }
            }
            Mode::FallbackOn421
                if transfer
                    && method == Method::GET
                    && rp.status == StatusCode::MISDIRECTED_REQUEST =>
            {
                let mut plain = h.clone();
                plain.remove(headers::RDMA_TOKEN);
                self.sign(&method, &path_query, &mut plain)?;
                (rp, rbody) = self
                    .send(method.clone(), &path_query, plain, Bytes::new())
                    .await?;
            }
            Mode::PartialPut
                if transfer
                    && method == Method::PUT
                    && !path_query.contains("uploadId=")
                    && rp.status.as_u16() >= 400 =>
            {
                // What a server that streams a PUT into place would leave.
                let junk = Bytes::from_static(b"partial");
                let mut ph = HeaderMap::new();
                if let Some(host) = h.get(http::header::HOST) {
                    ph.insert(http::header::HOST, host.clone());
                }
                ph.insert(http::header::CONTENT_LENGTH, HeaderValue::from(junk.len()));
                self.sign(&Method::PUT, &path_query, &mut ph)?;
                let (p, _) = self.send(Method::PUT, &path_query, ph, junk).await?;
                anyhow::ensure!(
                    p.status.is_success(),
                    "storing the partial object: {}",
                    p.status
                );
            }
            Mode::V2CookieEcho
                if path_query == hipobj_wire::rc_v2::READY_PATH && rp.status == StatusCode::OK =>
            {
                let echo = rp
                    .headers
                    .get(hipobj_wire::rc_v2::H_COOKIE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| u32::from_str_radix(v, 16).ok());
                if let Some(c) = echo {
                    let other = format!("{:08x}", c ^ 0x0000_0100);
                    rp.headers
                        .insert(hipobj_wire::rc_v2::H_COOKIE, HeaderValue::from_str(&other)?);
                }
            }
            Mode::V2Ready404As200
                if path_query == hipobj_wire::rc_v2::READY_PATH
                    && rp.status == StatusCode::NOT_FOUND =>
            {
                rp.status = StatusCode::OK;
                rbody = Bytes::new();
                rp.headers
                    .insert(http::header::CONTENT_LENGTH, HeaderValue::from(0));
            }
            Mode::V2Prepare400As200
                if path_query == hipobj_wire::rc_v2::PREPARE_PATH
                    && rp.status == StatusCode::BAD_REQUEST =>
            {
                rp.status = StatusCode::OK;
                rbody = Bytes::new();
                rp.headers
                    .insert(http::header::CONTENT_LENGTH, HeaderValue::from(0));
            }
            Mode::V2CancelOnce if path_query == hipobj_wire::rc_v2::CANCEL_PATH => {
                let session = h
                    .get(hipobj_wire::rc_v2::H_SESSION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let again = !self
                    .cancelled
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(session);
                if again {
                    rp.status = StatusCode::NOT_FOUND;
                    rbody = Bytes::from_static(
                        b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchRdmaSession</Code></Error>",
                    );
                    rp.headers
                        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(rbody.len()));
                }
            }
            _ => {}
        }
        // The body's length never changes; hyper frames it by the server's
        // Content-Length (kept for HEAD, whose body is not sent).
        rp.headers.remove(http::header::TRANSFER_ENCODING);
        let out = Response::from_parts(rp, Full::new(rbody));
        Ok(out)
    }
}
