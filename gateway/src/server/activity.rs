//! What each connection is doing (waiting for a head, idle, serving), as
//! its socket, its service and its timer see it, and the deadline that
//! follows from it.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::body::Body;
use crate::config::ServerConfig;

/// The longest any connection timer runs (a longer setting is taken as
/// this), so that no deadline overflows the clock.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The timeouts of every connection.
#[derive(Debug)]
pub(super) struct Limits {
    pub(super) header: Duration,
    pub(super) idle: Duration,
    pub(super) stall: Duration,
}

impl Limits {
    pub(super) fn new(cfg: &ServerConfig) -> Limits {
        Limits {
            header: cfg.header_read_timeout.min(MAX_TIMEOUT),
            idle: cfg.idle_timeout.min(MAX_TIMEOUT),
            stall: cfg.body_read_timeout.min(MAX_TIMEOUT),
        }
    }
}

/// What a connection is doing, for its timers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// Requests in flight (hyper serves one at a time on HTTP/1.1).
    Busy(usize),
    /// No request in flight, no byte of the next one, since then.
    Idle(Instant),
}

/// Why a connection's time is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expiry {
    Head,
    Idle,
    SendStall,
    /// An idle connection asked to close did not within the grace.
    Closing,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) phase: Phase,
    /// Since when a write to the client has been waiting for room.
    pub(super) write_blocked: Option<Instant>,
}

/// A connection's phase, shared by its socket, its service and its timer.
#[derive(Debug)]
pub(super) struct Activity {
    pub(super) state: Mutex<State>,
    /// Wakes the timer when a deadline may have come nearer.
    pub(super) changed: Notify,
}

impl Activity {
    pub(super) fn new() -> Activity {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Head(Instant::now()),
                write_blocked: None,
            }),
            changed: Notify::new(),
        }
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data, valid whatever a panicking holder did.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes came from the client.
    pub(super) fn read_some(&self) {
        let mut s = self.state();
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Head(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// A write to the client found no room (`true`) or made progress.
    pub(super) fn write_blocked(&self, blocked: bool) {
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
    pub(super) fn request_started(&self) {
        let mut s = self.state();
        s.phase = match s.phase {
            Phase::Busy(n) => Phase::Busy(n.saturating_add(1)),
            Phase::Head(_) | Phase::Idle(_) => Phase::Busy(1),
        };
    }

    /// A request's response was sent (or given up).
    pub(super) fn request_done(&self) {
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
    pub(super) fn deadline(
        &self,
        limits: &Limits,
        closing: Option<Instant>,
    ) -> Option<(Instant, Expiry)> {
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
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(super) fn start(activity: &Arc<Activity>) -> InFlight {
        activity.request_started();
        crate::metrics::http_request_in_flight(true);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_done();
        crate::metrics::http_request_in_flight(false);
    }
}

/// A response body that holds its request's [`InFlight`].
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) inner: Body,
    pub(super) _in_flight: InFlight,
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
pub(super) struct Watched {
    pub(super) io: TcpStream,
    pub(super) activity: Arc<Activity>,
}

impl Watched {
    pub(super) fn wrote<T>(&self, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
