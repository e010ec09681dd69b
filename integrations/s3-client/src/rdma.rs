//! The RDMA side: the library's callbacks over signed S3 requests, the
//! blocking transfer run off the caller's runtime, and what is remembered
//! about endpoints without RDMA.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hipobj::transfer::Step;
use hipobj::{Direction, Registered, S3Ops};
use hipobj_wire::{headers, Reply, Token};
use http::header::HeaderMap;
use http::{Method, StatusCode};

use crate::http::{self as h, Answer, HttpClient};
use crate::sign::Signer;
use crate::{Error, Result};

/// The largest error body kept from an RDMA answer.
const BODY_CAP: usize = 64 << 10;

/// Endpoints remembered for a while (without RDMA, without v2), each
/// until an instant: one map per fact.
pub(crate) struct Remembered(LazyLock<Mutex<HashMap<String, Instant>>>);

impl Remembered {
    /// An empty map.
    pub(crate) const fn new() -> Remembered {
        Remembered(LazyLock::new(Default::default))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How much longer `endpoint` is remembered, if it is (an expired
    /// entry is dropped).
    pub(crate) fn left(&self, endpoint: &str) -> Option<Duration> {
        let mut m = self.lock();
        match m.get(endpoint) {
            Some(until) if *until > Instant::now() => Some(*until - Instant::now()),
            Some(_) => {
                m.remove(endpoint);
                None
            }
            None => None,
        }
    }

    /// Remembers `endpoint` for `ttl` (nothing for a zero `ttl`).
    pub(crate) fn remember(&self, endpoint: &str, ttl: Duration) {
        if !ttl.is_zero() {
            self.lock()
                .insert(endpoint.to_string(), Instant::now() + ttl);
        }
    }

    /// Forgets `endpoint`.
    pub(crate) fn forget(&self, endpoint: &str) {
        self.lock().remove(endpoint);
    }
}

/// Endpoints whose handshake was answered without `x-amz-rdma-reply`, and
/// until when that is believed.
static NO_RDMA: Remembered = Remembered::new();

/// Why RDMA is not used with `endpoint` now, if it is remembered.
pub(crate) fn remembered_no_rdma(endpoint: &str) -> Option<Duration> {
    NO_RDMA.left(endpoint)
}

pub(crate) fn remember_no_rdma(endpoint: &str, ttl: Duration) {
    NO_RDMA.remember(endpoint, ttl);
}

pub(crate) fn forget(endpoint: &str) {
    NO_RDMA.forget(endpoint);
}

/// Server GID → endpoint base → (the endpoint, the path of a handshake).
type Paired = HashMap<hipobj_wire::Gid, HashMap<String, (h::Endpoint, String)>>;

/// What the RDMA requests need, shared with the blocking threads.
#[derive(Debug)]
pub(crate) struct RdmaContext {
    pub rt: RdmaRuntime,
    pub signer: Signer,
    pub connect_timeout: Duration,
    pub bind: bool,
    /// Clients whose connections run on the RDMA runtime (blocking
    /// transfers) and on the caller's (stepwise ones), by local address.
    clients: Mutex<HashMap<(Option<IpAddr>, bool), HttpClient>>,
    /// The servers (by GID) the endpoints paired the library's QPs with,
    /// each with the endpoints that answered a handshake for it and the
    /// path of one such handshake: where a goodbye goes
    /// ([`RdmaContext::goodbyes`]). Several endpoints on one host share a
    /// GID.
    paired: Mutex<Paired>,
}

impl RdmaContext {
    pub(crate) fn new(
        signer: Signer,
        connect_timeout: Duration,
        bind: bool,
    ) -> Result<RdmaContext> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hipobj-s3-rdma")
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("starting the RDMA runtime: {e}")))?;
        Ok(RdmaContext {
            rt: RdmaRuntime(Some(rt)),
            signer,
            connect_timeout,
            bind,
            clients: Mutex::new(HashMap::new()),
            paired: Mutex::new(HashMap::new()),
        })
    }

    /// The client whose connections are bound to `local`; `caller`: the
    /// one used from the caller's runtime (its connections' tasks run
    /// there), else the RDMA runtime's.
    pub(crate) fn client(&self, local: Option<IpAddr>, caller: bool) -> HttpClient {
        let mut m = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        m.entry((local, caller))
            .or_insert_with(|| h::client(local, self.connect_timeout))
            .clone()
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.handle()
    }

    /// Remembers that a handshake sent to `path_query` at `endpoint`
    /// paired a QP with the server whose reply is `reply`.
    fn paired_with(&self, endpoint: &h::Endpoint, reply: &[u8], path_query: &str) {
        if let Some(server) = Reply::parse(reply)
            .ok()
            .and_then(|r| r.peer_token().copied())
        {
            let path = path_query.split('?').next().unwrap_or(path_query);
            self.paired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(server.gid)
                .or_default()
                .insert(endpoint.base.clone(), (endpoint.clone(), path.to_string()));
        }
    }

    /// Says goodbye for every pair `lib` lets go of with the endpoints'
    /// servers (to each endpoint that paired with the server's GID): a
    /// signed `HEAD` of a path a handshake used, with the
    /// handshake-form token naming the QP and `x-amz-rdma-goodbye: 1`, so
    /// that the server releases its pair at once. Pairs with other servers
    /// go back untouched to no one: the library reset them (they connect
    /// again when used). Best effort: an answer other than 200 or no answer
    /// within `limit` is ignored (the server's probes release the pair
    /// later). How many goodbyes were answered 200.
    pub(crate) async fn goodbyes(&self, lib: &hipobj::Hipobj, limit: Duration) -> usize {
        let paired = self
            .paired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut said = 0;
        for pair in lib.take_pairs() {
            let Some(endpoints) = paired.get(&pair.server_gid) else {
                continue;
            };
            let mut answered = false;
            for (endpoint, path) in endpoints.values() {
                let mut hm = HeaderMap::new();
                let (Ok(()), Ok(())) = (
                    h::set(&mut hm, headers::RDMA_TOKEN, &pair.token),
                    h::set(&mut hm, headers::RDMA_GOODBYE, "1"),
                ) else {
                    continue;
                };
                let Ok(target) = endpoint.target(path) else {
                    continue;
                };
                let Ok(req) = h::signed(
                    &self.signer,
                    Method::HEAD,
                    target,
                    hm,
                    h::empty(),
                    0,
                    headers::UNSIGNED_PAYLOAD,
                ) else {
                    continue;
                };
                let client = self.client(None, true);
                if let Ok(a) = exchange(client, req, limit).await {
                    answered |= a.status == StatusCode::OK;
                }
            }
            said += usize::from(answered);
        }
        said
    }
}

/// A runtime that may be dropped anywhere (even in an async context).
#[derive(Debug)]
pub(crate) struct RdmaRuntime(Option<tokio::runtime::Runtime>);

impl RdmaRuntime {
    fn handle(&self) -> &tokio::runtime::Handle {
        match &self.0 {
            Some(rt) => rt.handle(),
            None => unreachable!("the runtime lives until drop"),
        }
    }
}

impl Drop for RdmaRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The S3 request an RDMA transfer makes.
#[derive(Debug, Clone)]
pub(crate) struct RdmaRequest {
    /// GET, or PUT (PutObject and UploadPart).
    pub method: Method,
    /// `/bucket/key?…`.
    pub path_query: String,
    /// Extra headers of the transfer (not of the handshake): Range,
    /// checksums.
    pub headers: HeaderMap,
    /// The limit of the transfer request.
    pub limit: Duration,
    /// The limit of a handshake (it moves nothing).
    pub handshake_limit: Duration,
}

/// The last answer the callbacks saw.
#[derive(Debug)]
pub(crate) struct Seen {
    pub answer: Answer,
    pub handshake: bool,
}

/// The callbacks: each token goes out in a signed request to the
/// attempt's endpoint, on the client's runtime, from the blocking thread of
/// the transfer.
pub(crate) struct Ops {
    ctx: Arc<RdmaContext>,
    req: Arc<RdmaRequest>,
    /// Where this attempt's requests go (its handshake pairs with that
    /// gateway; a pair made with another is answered 421 there, and the
    /// library connects again).
    endpoint: h::Endpoint,
    pub last: Option<Seen>,
    pub failure: Option<Error>,
    pub requests: u32,
}

impl Ops {
    pub(crate) fn new(ctx: Arc<RdmaContext>, req: Arc<RdmaRequest>, endpoint: h::Endpoint) -> Ops {
        Ops {
            ctx,
            req,
            endpoint,
            last: None,
            failure: None,
            requests: 0,
        }
    }

    /// The signed request of `token`, the client to send it with and its
    /// limit. `caller`: the client of the caller's runtime, else of the
    /// RDMA runtime.
    fn prepare(
        &self,
        token: &str,
        handshake: bool,
        caller: bool,
    ) -> Result<(HttpClient, http::Request<h::Body>, Duration)> {
        let local = if self.ctx.bind {
            Token::decode(token)
                .ok()
                .and_then(|t| t.client_ip())
                .map(IpAddr::V4)
        } else {
            None
        };
        let mut hm = if handshake {
            HeaderMap::new()
        } else {
            self.req.headers.clone()
        };
        h::set(&mut hm, headers::RDMA_TOKEN, token)?;
        // A handshake goes as a HEAD of the same key: harmless on a server
        // that ignores tokens, and it moves nothing.
        let method = if handshake {
            Method::HEAD
        } else {
            self.req.method.clone()
        };
        let target = self.endpoint.target(&self.req.path_query)?;
        let req = h::signed(
            &self.ctx.signer,
            method,
            target,
            hm,
            h::empty(),
            0,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let client = self.ctx.client(local, caller);
        let limit = if handshake {
            self.req.handshake_limit
        } else {
            self.req.limit
        };
        Ok((client, req, limit))
    }

    fn request(&self, token: &str, handshake: bool) -> Result<Answer> {
        let (client, req, limit) = self.prepare(token, handshake, false)?;
        self.ctx.handle().block_on(exchange(client, req, limit))
    }

    /// Keeps the outcome of one request as `sendRequest` does: counts it,
    /// and replaces what the previous request left.
    fn record(&mut self, r: Result<Answer>, handshake: bool) -> std::result::Result<(), i32> {
        self.requests += 1;
        self.last = None;
        self.failure = None;
        match r {
            Ok(answer) => {
                if handshake && answer.status == StatusCode::OK {
                    if let Some(reply) = answer.headers.get(headers::RDMA_REPLY) {
                        self.ctx.paired_with(
                            &self.endpoint,
                            reply.as_bytes(),
                            &self.req.path_query,
                        );
                    }
                }
                self.last = Some(Seen { answer, handshake });
                Ok(())
            }
            Err(e) => {
                self.failure = Some(e);
                Err(-1)
            }
        }
    }

    /// `sendRequest` from the caller's runtime, without blocking.
    async fn send_async(&mut self, token: &str, handshake: bool) -> std::result::Result<(), i32> {
        let r = match self.prepare(token, handshake, true) {
            Ok((client, req, limit)) => exchange(client, req, limit).await,
            Err(e) => Err(e),
        };
        self.record(r, handshake)
    }
}

/// Sends `req` and reads the answer (the body only when it is an error).
pub(crate) async fn exchange(
    client: HttpClient,
    req: http::Request<h::Body>,
    limit: Duration,
) -> Result<Answer> {
    let resp = h::send(&client, req, limit).await?;
    let (parts, mut body) = resp.into_parts();
    let body = if parts.status.is_success() && parts.headers.contains_key(headers::RDMA_REPLY) {
        Bytes::new()
    } else {
        h::read_capped(&mut body, BODY_CAP, limit).await?
    };
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Transfers up to this size are driven from the caller's runtime
/// ([`stepwise`]); larger ones run on a blocking thread ([`run_blocking`]),
/// where their checksum pass does not hold up the caller's runtime.
pub(crate) const STEPWISE_MAX: usize = 1 << 20;

/// One RDMA attempt driven from the caller's task, request by request, with
/// no thread of its own (see `hipobj::transfer::Stepwise`); `None` when it
/// cannot run that way now (every connection leased): use [`run_blocking`].
pub(crate) async fn stepwise(
    ctx: &Arc<RdmaContext>,
    req: &Arc<RdmaRequest>,
    endpoint: &h::Endpoint,
    reg: &Registered<'_, '_>,
    dir: Direction,
    offset: u64,
    len: usize,
) -> Option<Attempt> {
    let mut ops = Ops::new(ctx.clone(), req.clone(), endpoint.clone());
    let (mut t, mut token) = match reg.start_stepwise(dir, offset, len) {
        Ok(Some(started)) => started,
        Ok(None) => return None,
        Err(e) => return Some(classify(Err(e), ops)),
    };
    let res = loop {
        let sent = ops.send_async(&token, t.is_handshake()).await;
        match t.advance(sent, |out| ops.recv_reply(out)) {
            Ok(Step::Send(next)) => token = next,
            Ok(Step::Done) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    drop(t);
    Some(classify(res, ops))
}

impl S3Ops for Ops {
    fn send_request(&mut self, token: &str) -> std::result::Result<(), i32> {
        let handshake = Token::decode(token).is_ok_and(|t| t.is_handshake());
        let r = self.request(token, handshake);
        self.record(r, handshake)
    }

    fn recv_reply(&mut self, out: &mut [u8]) -> std::result::Result<usize, i32> {
        let seen = self.last.as_ref().ok_or(-1)?;
        let v = seen
            .answer
            .headers
            .get(headers::RDMA_REPLY)
            .ok_or(-2)?
            .as_bytes();
        out.get_mut(..v.len()).ok_or(-3)?.copy_from_slice(v);
        Ok(v.len())
    }
}

/// How an RDMA attempt ended.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The transfer succeeded; the answer of the transfer request.
    Done(Answer),
    /// The server does not do RDMA (no `x-amz-rdma-reply`): remember it
    /// and fall back.
    NoRdma(String),
    /// The server declined this request (501): fall back.
    Declined(String),
    /// The server is at its RDMA capacity for now (503 with
    /// `x-amz-rdma-reply: 503`): no QP pair free at the handshake, or no
    /// staging buffer free for the transfer. Not remembered (capacity frees
    /// up): this request falls back, or retries a transfer's refusal.
    Busy {
        /// Whether the handshake was refused (else the transfer).
        handshake: bool,
        /// Why, for the fallback or the `require_rdma` error.
        reason: String,
    },
    /// A failure; retried when [`Error::is_retryable`].
    Failed(Error),
    /// The handshake (a HEAD) was answered with an S3 error whose code
    /// only the status gave (a HEAD's answer has no error document): the
    /// caller may learn the code ([`S3Client`](crate::S3Client) asks a GET),
    /// then it is a [`Attempt::Failed`].
    HandshakeFailed(Error),
}

/// The failure of an answer to the handshake or to the transfer.
fn failed(e: Error, handshake: bool) -> Attempt {
    if handshake && e.code_from_status() {
        Attempt::HandshakeFailed(e)
    } else {
        Attempt::Failed(e)
    }
}

/// Classifies the library's result with what the callbacks saw.
pub(crate) fn classify(res: hipobj::Result<()>, ops: Ops) -> Attempt {
    let Ops { last, failure, .. } = ops;
    if let Some(f) = failure {
        return Attempt::Failed(f);
    }
    let e = match res {
        Ok(()) => {
            return match last {
                Some(s) => Attempt::Done(s.answer),
                None => Attempt::Failed(Error::Protocol(
                    "the transfer succeeded without an answer".into(),
                )),
            }
        }
        Err(e) => e,
    };
    if e.op != hipobj::OpError::S3Error {
        return Attempt::Failed(Error::Library(e));
    }
    let Some(Seen { answer, handshake }) = last else {
        return Attempt::Failed(Error::Library(e));
    };
    let status = answer.status;
    let Some(reply) = answer.header(headers::RDMA_REPLY) else {
        // No reply header: a server that ignores tokens, unless this is an
        // ordinary S3 error (authentication, a missing bucket).
        let code = crate::xml::error_doc(&String::from_utf8_lossy(&answer.body)).code;
        let ignored = status.is_success()
            || (handshake && status == StatusCode::NOT_FOUND)
            || (!handshake
                && status == StatusCode::BAD_REQUEST
                && matches!(
                    code.as_deref(),
                    Some(
                        "BadDigest"
                            | "InvalidDigest"
                            | "XAmzContentChecksumMismatch"
                            | "IncompleteBody"
                    )
                ));
        return if ignored {
            Attempt::NoRdma(format!(
                "the server answered the {} with HTTP {} and no x-amz-rdma-reply: it does not do RDMA",
                if handshake { "RDMA handshake" } else { "RDMA request" },
                status.as_u16()
            ))
        } else {
            failed(answer.error(None), handshake)
        };
    };
    match Reply::parse(reply.as_bytes()) {
        Ok(r) if r.is_declined() => Attempt::Declined(format!(
            "the server declined RDMA (x-amz-rdma-reply: {reply})"
        )),
        Ok(r) if r.status() == Some(503) && status == StatusCode::SERVICE_UNAVAILABLE => {
            let text = String::from_utf8_lossy(&answer.body);
            let doc = crate::xml::error_doc(&text);
            let code = doc.code.unwrap_or_else(|| "SlowDown".into());
            let message = doc.message.map(|m| format!(": {m}")).unwrap_or_default();
            let what = if handshake {
                "refused the RDMA handshake for capacity (no QP pair free)"
            } else {
                "had no RDMA staging buffer free for the transfer"
            };
            Attempt::Busy {
                handshake,
                reason: format!(
                    "the server {what}: HTTP 503 {code}, x-amz-rdma-reply: {reply}{message}"
                ),
            }
        }
        Ok(_) if status.is_success() => Attempt::Failed(Error::Protocol(format!(
            "HTTP {} with x-amz-rdma-reply {reply:?}: {}",
            status.as_u16(),
            e.message
        ))),
        Ok(_) => failed(answer.error(Some(reply)), handshake),
        Err(err) => Attempt::Failed(Error::Protocol(format!(
            "invalid x-amz-rdma-reply {reply:?}: {err}"
        ))),
    }
}

/// Set when a blocking transfer is over.
#[derive(Default)]
struct Completion {
    done: Mutex<bool>,
    cv: Condvar,
}

/// Held by the transfer's closure; signals when dropped, run or not.
struct SignalOnDrop(Arc<Completion>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        *self.0.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.0.cv.notify_all();
    }
}

/// Held by the awaiting future; waits when dropped until the closure is
/// gone (only a cancelled future waits: an awaited one has seen it end), so
/// that a caller that cancels a transfer finds the buffer quiet when the
/// drop returns. Soundness does not depend on it (a forgotten future never
/// waits): the closure owns a handle of its own.
struct WaitOnDrop(Arc<Completion>);

impl Drop for WaitOnDrop {
    fn drop(&mut self) {
        let mut done = self.0.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self.0.cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `f(reg)` on a blocking thread of the RDMA runtime, so that the
/// caller's runtime keeps running and several transfers run in parallel.
///
/// The thread owns `reg`, a handle of its own to the registration (and to
/// its memory, which `'static` says is owned or never freed): whatever
/// becomes of this future, even `mem::forget`, the buffer stays registered
/// and allocated until the closure ends. A cancelled (dropped) future also
/// waits for the closure's end; the closure depends only on the RDMA
/// runtime, whose requests all have timeouts, so that wait is bounded.
pub(crate) async fn run_blocking<R, F>(
    ctx: &RdmaContext,
    reg: Registered<'static, 'static>,
    f: F,
) -> Result<R>
where
    R: Send + 'static,
    F: FnOnce(&Registered<'static, 'static>) -> R + Send + 'static,
{
    let completion = Arc::new(Completion::default());
    let wait = WaitOnDrop(completion.clone());
    let signal = SignalOnDrop(completion);
    let task = ctx.handle().spawn_blocking(move || {
        let _signal = signal;
        f(&reg)
    });
    let r = task.await;
    drop(wait);
    match r {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::Transport(format!(
            "the RDMA transfer did not run: {e}"
        ))),
    }
}
