//! The HTTP front's accept loop: HTTP/1.1 connections served by hyper, each
//! under timers, at most a fixed number at once.
//!
//! A connection is always in one of three phases, and each has its bound:
//!
//! - waiting for a request head (from the accept, or from the first byte
//!   of a keep-alive connection's next request): closed when the head has
//!   not arrived whole within [`ServerConfig::header_read_timeout`]
//!   (slowloris: a client that trickles header lines holds nothing long);
//! - idle (a keep-alive connection, no request in flight, no byte of the
//!   next): closed after [`ServerConfig::idle_timeout`];
//! - serving a request: its body is read through [`StallTimeout`] (fails
//!   when no byte comes for [`ServerConfig::body_read_timeout`] while the
//!   engine waits for one), and in every phase a write to the client that
//!   makes no progress for that long (a client that stops reading its
//!   answer) closes the connection.
//!
//! Beyond [`ServerConfig::max_connections`] (lowered at start so that the
//! connections and a reserve for the rest of the process fit under the
//! open-file limit, which is raised to its hard limit first), a new
//! connection is answered at once with 503 `SlowDown` and
//! `Connection: close`, and closed. Shutdown stops accepting and lets the
//! requests in flight finish.
//!
//! Every request carries its connection's peer as [`ClientAddr`].

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::body::{Body, StallTimeout};
use crate::config::ServerConfig;
use crate::engine::{ClientAddr, Engine};
use crate::s3err::S3Error;

/// File descriptors kept out of the connection cap at least, for upstream
/// connections, RDMA sockets, files and the listener.
pub const FD_RESERVE_MIN: u64 = 256;

/// Refusals (503 answers beyond the cap) being written at once; a
/// connection beyond both caps is closed without an answer.
pub const MAX_REFUSALS: usize = 64;

/// How long a refused connection is kept to deliver the 503 and read what
/// the client sent (closing on unread bytes would reset the connection and
/// could destroy the answer before the client reads it).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The most a refused client's request is read before its connection is
/// closed.
const REFUSAL_DRAIN: usize = 64 << 10;

/// The wait after an accept that failed for lack of resources (EMFILE,
/// ENFILE, ENOMEM, ...), so that a full table is not spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The most connections served at once whatever the limits say.
const MAX_CAP: usize = 1 << 20;

/// The longest any connection timer runs (a longer setting is taken as
/// this), so that no deadline overflows the clock.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The process's open-file limit (`RLIMIT_NOFILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit, the one that applies.
    pub soft: u64,
    /// The hard limit, the most the soft one can be raised to.
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard one, and returns the limit
/// then in force (as it was when it cannot be raised; `None` when it
/// cannot even be read).
#[allow(unsafe_code)]
pub fn raise_fd_limit() -> Option<FdLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable `rlimit` that getrlimit fills; the
    // call has no other effect.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), "the open-file limit could not be read");
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid `rlimit` read by setrlimit; raising a
        // soft limit up to the hard one needs no privilege and changes
        // nothing else (on failure the limit is unchanged).
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        } else {
            tracing::warn!(
                error = %io::Error::last_os_error(),
                soft = lim.rlim_cur,
                hard = lim.rlim_max,
                "the open-file limit could not be raised to its hard limit"
            );
        }
    }
    Some(FdLimit {
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// The descriptors kept out of the connection cap under a limit of
/// `fd_limit`: a quarter of it, at least [`FD_RESERVE_MIN`].
pub fn fd_reserve(fd_limit: u64) -> u64 {
    (fd_limit / 4).max(FD_RESERVE_MIN)
}

/// The connections served at once: `asked`, lowered so that they, the
/// refusals in flight and the [`fd_reserve`] stay below `fd_limit` (at
/// least 1).
pub fn connection_cap(asked: usize, fd_limit: u64) -> usize {
    let room = fd_limit
        .saturating_sub(fd_reserve(fd_limit))
        .saturating_sub(MAX_REFUSALS as u64);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    asked.min(room).clamp(1, MAX_CAP)
}

/// Serves `engine` on `listener` as `cfg` says until `shutdown` completes,
/// then stops accepting and returns once the requests in flight are done.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    cfg: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let fd = raise_fd_limit();
    // An unreadable limit is taken as the usual default.
    let fd_soft = fd.map_or(1024, |l| l.soft);
    let cap = connection_cap(cfg.max_connections, fd_soft);
    if cap < cfg.max_connections {
        tracing::warn!(
            asked = cfg.max_connections,
            cap,
            fd_limit = fd_soft,
            reserve = fd_reserve(fd_soft),
            "--max-connections lowered to fit under the open-file limit"
        );
    }
    tracing::info!(
        max_connections = cap,
        fd_limit = fd_soft,
        fd_hard_limit = fd.map(|l| l.hard),
        fd_reserve = fd_reserve(fd_soft),
        header_read_timeout = ?cfg.header_read_timeout,
        idle_timeout = ?cfg.idle_timeout,
        body_read_timeout = ?cfg.body_read_timeout,
        "HTTP front"
    );
    let limits = Arc::new(Limits::new(cfg));
    let conns = Arc::new(Semaphore::new(cap));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // EMFILE and the like: the connection stays queued; wait
                // for descriptors to come free rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        // Small answers (headers, XML errors, ACK-sized bodies) go out at
        // once instead of waiting for Nagle's algorithm and the peer's
        // delayed ACK.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        match conns.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(connection(
                    stream,
                    peer,
                    engine.clone(),
                    limits.clone(),
                    stopping.clone(),
                    permit,
                ));
            }
            Err(_) => refuse(stream, peer, &refusals),
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a permit until it is done.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = conns.acquire_many(all).await;
    Ok(())
}

/// An accept error that concerns one connection only (it went away before
/// it was accepted): the next accept can follow at once.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The answer to a connection beyond the cap.
fn refusal() -> Vec<u8> {
    let id = crate::engine::request_id();
    let xml = S3Error::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "SlowDown",
        "too many connections",
    )
    .to_xml(&id);
    format!(
        "HTTP/1.1 503 Service Unavailable\r\n\
         content-type: application/xml\r\n\
         content-length: {}\r\n\
         connection: close\r\n\
         retry-after: 1\r\n\
         x-amz-request-id: {id}\r\n\r\n{xml}",
        xml.len()
    )
    .into_bytes()
}

/// Answers a connection beyond the cap with 503 `SlowDown` and closes it,
/// in a task of its own bounded by [`REFUSAL_LINGER`]; beyond
/// [`MAX_REFUSALS`] of them at once, closes it at once.
fn refuse(mut stream: TcpStream, peer: SocketAddr, refusals: &Arc<Semaphore>) {
    crate::metrics::http_connection_closed("refused");
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        tracing::debug!(%peer, "connection closed: too many connections and refusals");
        return;
    };
    tracing::debug!(%peer, "connection refused: too many connections");
    tokio::spawn(async move {
        let _permit = permit;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&refusal()).await?;
            stream.shutdown().await?;
            let mut buf = [0u8; 4096];
            let mut read = 0;
            while read < REFUSAL_DRAIN {
                match stream.read(&mut buf).await? {
                    0 => break,
                    n => read += n,
                }
            }
            io::Result::Ok(())
        })
        .await;
    });
}

/// The timeouts of every connection.
#[derive(Debug)]
struct Limits {
    header: Duration,
    idle: Duration,
    stall: Duration,
}

impl Limits {
    fn new(cfg: &ServerConfig) -> Limits {
        Limits {
            header: cfg.header_read_timeout.min(MAX_TIMEOUT),
            idle: cfg.idle_timeout.min(MAX_TIMEOUT),
            stall: cfg.body_read_timeout.min(MAX_TIMEOUT),
        }
    }
}

/// What a connection is doing, for its timers.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// Requests in flight (hyper serves one at a time on HTTP/1.1).
    Busy(usize),
    /// No request in flight, no byte of the next one, since then.
    Idle(Instant),
}

/// Why a connection's time is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    Head,
    Idle,
    SendStall,
    /// An idle connection asked to close did not within the grace.
    Closing,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Since when a write to the client has been waiting for room.
    write_blocked: Option<Instant>,
}

/// A connection's phase, shared by its socket, its service and its timer.
#[derive(Debug)]
struct Activity {
    state: Mutex<State>,
    /// Wakes the timer when a deadline may have come nearer.
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Head(Instant::now()),
                write_blocked: None,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data, valid whatever a panicking holder did.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes came from the client.
    fn read_some(&self) {
        let mut s = self.state();
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Head(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// A write to the client found no room (`true`) or made progress.
    fn write_blocked(&self, blocked: bool) {
        let mut s = self.state();
        match (blocked, s.write_blocked) {
            (true, None) => {
                s.write_blocked = Some(Instant::now());
                drop(s);
                self.changed.notify_one();
            }
            (false, Some(_)) => s.write_blocked = None,
            _ => {}
        }
    }

    /// A request head was read: the service is called.
    fn request_started(&self) {
        let mut s = self.state();
        s.phase = match s.phase {
            Phase::Busy(n) => Phase::Busy(n.saturating_add(1)),
            Phase::Head(_) | Phase::Idle(_) => Phase::Busy(1),
        };
    }

    /// A request's response was sent (or given up).
    fn request_done(&self) {
        let mut s = self.state();
        if let Phase::Busy(n) = s.phase {
            s.phase = if n <= 1 {
                Phase::Idle(Instant::now())
            } else {
                Phase::Busy(n - 1)
            };
        }
        drop(s);
        self.changed.notify_one();
    }

    /// The nearest deadline and what it is.
    fn deadline(&self, limits: &Limits, closing: Option<Instant>) -> Option<(Instant, Expiry)> {
        let s = self.state();
        let phase = match (s.phase, closing) {
            (_, Some(at)) => Some((at, Expiry::Closing)),
            (Phase::Head(since), None) => Some((since + limits.header, Expiry::Head)),
            (Phase::Idle(since), None) => Some((since + limits.idle, Expiry::Idle)),
            (Phase::Busy(_), None) => None,
        };
        let stall = s
            .write_blocked
            .map(|t| (t + limits.stall, Expiry::SendStall));
        match (phase, stall) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// Ends a request's part in its connection's phase when dropped: with the
/// response body, once it is sent (or given up).
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.request_started();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_done();
    }
}

/// A response body that holds its request's [`InFlight`].
#[derive(Debug)]
struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The client's socket, telling its connection's [`Activity`] when bytes
/// come and when writes wait.
#[derive(Debug)]
struct Watched {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn wrote<T>(&self, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        self.activity.write_blocked(r.is_pending());
        r
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read_some();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.wrote(r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Serves one connection until it ends, its time is up, or (after
/// `stopping`) its requests in flight are done.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    engine: Arc<Engine>,
    limits: Arc<Limits>,
    mut stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    crate::metrics::http_connection(true);
    let _open = scopeguard(|| crate::metrics::http_connection(false));
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        io: stream,
        activity: activity.clone(),
    });
    let stall = limits.stall;
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = InFlight::start(&service_activity);
        let engine = engine.clone();
        async move {
            let (mut parts, body) = req.into_parts();
            parts.extensions.insert(ClientAddr(peer));
            let req = Request::from_parts(parts, Body::new(StallTimeout::new(body, stall)));
            let resp = engine.handle(req).await;
            Ok::<Response<Tracked>, Infallible>(resp.map(|inner| Tracked {
                inner,
                _in_flight: in_flight,
            }))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    // hyper's own header timer runs from the moment a connection waits for
    // a head, idle time included: here it is only a backstop behind the
    // phase timers below, which always come first.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header + limits.idle)
        .keep_alive(true);
    let conn = http.serve_connection(io, service);
    tokio::pin!(conn);
    let mut graceful = false;
    let mut closing: Option<Instant> = None;
    loop {
        let deadline = activity.deadline(&limits, closing);
        if let Some((at, why)) = deadline {
            if at <= Instant::now() {
                match why {
                    Expiry::Idle => {
                        // Nothing in flight: hyper closes at once, after
                        // whatever it still has to write.
                        crate::metrics::http_connection_closed("idle_timeout");
                        tracing::debug!(%peer, "connection closed: idle");
                        if !graceful {
                            conn.as_mut().graceful_shutdown();
                            graceful = true;
                        }
                        closing = Some(Instant::now() + limits.header);
                        continue;
                    }
                    Expiry::Head => {
                        crate::metrics::http_connection_closed("header_timeout");
                        tracing::debug!(%peer, timeout = ?limits.header, "connection closed: request head not received in time");
                    }
                    Expiry::SendStall => {
                        crate::metrics::http_connection_closed("send_stall");
                        tracing::debug!(%peer, timeout = ?limits.stall, "connection closed: the client stopped reading");
                    }
                    Expiry::Closing => {
                        tracing::debug!(%peer, "connection closed: did not close when idle");
                    }
                }
                return;
            }
        }
        let sleep = deadline.map(|(at, _)| tokio::time::sleep_until(at));
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = activity.changed.notified() => {}
            () = async { sleep.expect("a deadline").await }, if deadline.is_some() => {}
            _ = stopping.changed(), if !graceful => {
                conn.as_mut().graceful_shutdown();
                graceful = true;
            }
        }
    }
}

/// Runs `f` when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_reserve() {
        // 1024 descriptors: 256 reserved, 64 for refusals.
        assert_eq!(fd_reserve(1024), 256);
        assert_eq!(connection_cap(4096, 1024), 1024 - 256 - 64);
        assert_eq!(connection_cap(64, 1024), 64);
        // A large limit reserves a quarter.
        assert_eq!(fd_reserve(1 << 20), 1 << 18);
        assert_eq!(connection_cap(4096, 1 << 20), 4096);
        assert_eq!(
            connection_cap(usize::MAX, 1 << 20),
            (1 << 20) - (1 << 18) - 64
        );
        // A tiny limit still serves one.
        assert_eq!(connection_cap(4096, 100), 1);
        assert_eq!(connection_cap(0, 1 << 20), 1);
        assert_eq!(connection_cap(usize::MAX, u64::MAX), MAX_CAP);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let l = raise_fd_limit().expect("the limit");
        assert!(l.soft == l.hard || l.hard == libc::RLIM_INFINITY, "{l:?}");
    }

    #[test]
    fn the_refusal_is_a_complete_s3_error() {
        let r = String::from_utf8(refusal()).unwrap();
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
        assert!(
            head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())),
            "{head}"
        );
        assert!(
            body.contains("<Code>SlowDown</Code><Message>too many connections</Message>"),
            "{body}"
        );
    }

    #[test]
    fn huge_timeouts_are_bounded() {
        let cfg = ServerConfig {
            header_read_timeout: Duration::MAX,
            idle_timeout: Duration::MAX,
            body_read_timeout: Duration::MAX,
            max_connections: 1,
            ..ServerConfig::default()
        };
        let l = Limits::new(&cfg);
        assert_eq!(
            (l.header, l.idle, l.stall),
            (MAX_TIMEOUT, MAX_TIMEOUT, MAX_TIMEOUT)
        );
        let _ = Instant::now() + l.header + l.idle;
    }

    #[tokio::test]
    async fn deadlines_follow_the_phase() {
        let limits = Limits {
            header: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            stall: Duration::from_secs(30),
        };
        let a = Arc::new(Activity::new());
        let (at, why) = a.deadline(&limits, None).unwrap();
        assert_eq!(why, Expiry::Head);
        assert!(at <= Instant::now() + limits.header);
        let f = InFlight::start(&a);
        assert_eq!(a.deadline(&limits, None), None);
        a.read_some();
        assert_eq!(
            a.deadline(&limits, None),
            None,
            "body bytes are no new head"
        );
        a.write_blocked(true);
        assert_eq!(a.deadline(&limits, None).unwrap().1, Expiry::SendStall);
        a.write_blocked(false);
        drop(f);
        assert_eq!(a.deadline(&limits, None).unwrap().1, Expiry::Idle);
        a.read_some();
        assert_eq!(a.deadline(&limits, None).unwrap().1, Expiry::Head);
        let soon = Instant::now() + Duration::from_secs(1);
        assert_eq!(
            a.deadline(&limits, Some(soon)),
            Some((soon, Expiry::Closing))
        );
    }
}
