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
//! At [`ServerConfig::max_connections`] (lowered at start so that the
//! connections and a reserve for the rest of the process fit under the
//! open-file limit, which is raised to its hard limit first), a new
//! connection makes room by closing the connection that has waited longest
//! for its client, for a request head or idle (see `table`); only when
//! every connection is serving a request is it answered at once with 503
//! `SlowDown` and `Connection: close`, and closed. A source address holds
//! at most [`ServerConfig::max_connections_per_source`] connections; at
//! it, its own longest-waiting connection makes room. Shutdown stops
//! accepting and lets the requests in flight finish.
//!
//! Every request carries its connection's peer as a [`ClientAddr`].

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::body::{Body, StallTimeout};
use crate::client_addr::ClientAddr;
use crate::config::ServerConfig;
use crate::s3err::request_id;

mod activity;
mod fd_limit;
mod table;

use crate::s3err::S3Error;
use activity::{Activity, Expiry, InFlight, Limits, Tracked, Watched};
pub use fd_limit::{
    connection_cap, fd_reserve, raise_fd_limit, FdLimit, FD_RESERVE_MIN, MAX_REFUSALS,
};
use table::{ConnTable, Registration};

/// The most a connection's read buffer grows to, and the largest request
/// head (request line and headers) served: a longer one is answered 431
/// and the connection closed. hyper's default buffer grows to 408 KiB per
/// connection and bounds nothing else; S3 heads are a few KiB (AWS caps a
/// PUT's headers at 8 KiB), and a body streams through reads of at most
/// this much, which keeps it at memory speed. Under 64 concurrent 16 MiB
/// transfers the gateway's peak fell by 54 MiB with it (docs/benchmarks.md).
pub const READ_BUFFER_MAX: usize = 64 << 10;

/// How long a refused connection is kept to deliver the 503 and read what
/// the client sent (closing on unread bytes would reset the connection and
/// could destroy the answer before the client reads it).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The most a refused client's request is read before its connection is
/// closed.
const REFUSAL_DRAIN: usize = 64 << 10;

/// The longest a new connection waits for the place of the connection it
/// closed to make room (that connection's task ends at its next poll).
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// The wait after an accept that failed for lack of resources (EMFILE,
/// ENFILE, ENOMEM, ...), so that a full table is not spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What answers the requests the front reads: the engine
/// (`crate::engine::Engine`), or a test's stand-in.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request (its extensions carry the [`ClientAddr`]).
    fn handle(&self, req: Request<Body>) -> impl Future<Output = Response<Body>> + Send;
}

/// Serves `engine` on `listener` as `cfg` says until `shutdown` completes,
/// then stops accepting and returns once the requests in flight are done.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    engine: Arc<H>,
    cfg: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let fd = raise_fd_limit();
    let fd_soft = fd.soft;
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
        fd_hard_limit = fd.hard,
        fd_reserve = fd_reserve(fd_soft),
        header_read_timeout = ?cfg.header_read_timeout,
        idle_timeout = ?cfg.idle_timeout,
        body_read_timeout = ?cfg.body_read_timeout,
        "HTTP front"
    );
    let limits = Arc::new(Limits::new(cfg));
    let conns = Arc::new(Semaphore::new(cap));
    let per_source = cfg
        .max_connections_per_source
        .unwrap_or(cap / 2)
        .clamp(1, cap.max(1));
    let table = ConnTable::new(per_source);
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
        // A source at its share makes room among its own connections.
        let ip = peer.ip();
        if table.from(ip) >= table.per_source && !table.evict_longest_waiting(Some(ip)) {
            refuse(stream, peer, &refusals);
            continue;
        }
        let activity = Arc::new(Activity::new());
        let evict = Arc::new(tokio::sync::Notify::new());
        let registration = table.register(ip, activity.clone(), evict.clone());
        let conn = Conn {
            stream,
            peer,
            activity,
            evict,
            _registration: registration,
        };
        match conns.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(connection(
                    conn,
                    engine.clone(),
                    limits.clone(),
                    stopping.clone(),
                    permit,
                ));
            }
            Err(_) if table.evict_longest_waiting(None) => {
                let (conns, engine, limits, stopping, refusals) = (
                    conns.clone(),
                    engine.clone(),
                    limits.clone(),
                    stopping.clone(),
                    refusals.clone(),
                );
                tokio::spawn(async move {
                    match tokio::time::timeout(EVICTION_WAIT, conns.acquire_owned()).await {
                        Ok(Ok(permit)) => {
                            connection(conn, engine, limits, stopping, permit).await;
                        }
                        _ => refuse(conn.stream, peer, &refusals),
                    }
                });
            }
            Err(_) => refuse(conn.stream, peer, &refusals),
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
    let id = request_id();
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

/// An accepted connection, in the table.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    activity: Arc<Activity>,
    /// Notified when it is to close to make room for another.
    evict: Arc<tokio::sync::Notify>,
    _registration: Registration,
}

/// Serves one connection until it ends, its time is up, it is closed to
/// make room for another, or (after `stopping`) its requests in flight are
/// done.
async fn connection<H: Handler>(
    conn: Conn,
    engine: Arc<H>,
    limits: Arc<Limits>,
    mut stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    crate::metrics::http_connection(true);
    let _open = scopeguard(|| crate::metrics::http_connection(false));
    let Conn {
        stream,
        peer,
        activity,
        evict,
        _registration,
    } = conn;
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
        .max_buf_size(READ_BUFFER_MAX)
        .max_header_size(READ_BUFFER_MAX)
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
            () = evict.notified() => {
                crate::metrics::http_connection_closed("evicted");
                tracing::debug!(%peer, "connection closed: it waited longest for its client, and a new one needed its place");
                return;
            }
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
}
