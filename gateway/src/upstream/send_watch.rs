//! What the gateway knows of a request body on its way to a remote store:
//! when it has been sent completely (the response-head timer starts then)
//! and whether the store has stopped taking it.
//!
//! The connection to the store pulls the body's frames as its socket takes
//! bytes. A body whose last pull returned a frame and that has not been
//! pulled again is waiting on the store; one whose last pull found nothing
//! ready is waiting on its own source (the client's upload, an RDMA READ),
//! which the gateway bounds elsewhere (`--body-read-timeout`, the RDMA
//! transfer's timers). `StallWatch::stalled` completes once the body has
//! waited on the store for the whole stall timeout: a store that stops
//! reading (a Ceph cluster with a full OSD blocks its writes until space is
//! freed) would otherwise hold the request, its client's connection and an
//! RDMA PUT's staging buffers for ever.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::oneshot;

use crate::body::Body;

/// The store stopped taking the request body for this long while the
/// gateway had bytes ready; carried in `UpstreamError::Request`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the store took no request body bytes for {0:?}")]
pub struct BodySendStall(pub Duration);

/// Where the body's sending stands.
#[derive(Debug)]
struct Progress {
    /// The last pull returned a frame, and none has followed since.
    waiting_on_store: bool,
    /// When that frame was taken.
    since: Instant,
}

/// The watch over one request body (see the module's documentation).
pub(super) struct SendWatch {
    /// Completes once the body has been sent completely, or let go of.
    pub sent: oneshot::Receiver<()>,
    /// Whether the store has stopped taking it.
    pub stall: StallWatch,
}

/// Whether the store has stopped taking a body.
pub(super) struct StallWatch {
    progress: Arc<Mutex<Progress>>,
}

impl SendWatch {
    /// `body` wrapped so that it reports its progress, and its watch.
    pub fn wrap(body: Body) -> (Body, SendWatch) {
        let (tx, rx) = oneshot::channel();
        let progress = Arc::new(Mutex::new(Progress {
            waiting_on_store: false,
            since: Instant::now(),
        }));
        let wrapped = WatchedBody {
            inner: body,
            done: Some(tx),
            progress: Arc::clone(&progress),
        };
        let watch = SendWatch {
            sent: rx,
            stall: StallWatch { progress },
        };
        (Body::new(wrapped), watch)
    }
}

impl StallWatch {
    /// Completes once the store has taken no byte of the body for `limit`
    /// while the body had one ready; never, while it keeps taking them.
    pub async fn stalled(&self, limit: Duration) -> BodySendStall {
        // Checked a few times per limit: the stall is noticed within a
        // quarter of it past the limit.
        let tick = (limit / 4).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(tick).await;
            let p = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            if p.waiting_on_store && p.since.elapsed() >= limit {
                return BodySendStall(limit);
            }
        }
    }
}

/// A request body that says when it is done with (its last frame was taken,
/// it failed, or the connection let go of it: it sent as many bytes as
/// `Content-Length` says, or gave up) and whether it waits on the store.
struct WatchedBody {
    inner: Body,
    done: Option<oneshot::Sender<()>>,
    progress: Arc<Mutex<Progress>>,
}

impl http_body::Body for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let out = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &out {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        {
            let mut p = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            // A frame handed over: the next pull is the store's to make.
            // Nothing ready, or the end: the wait is not the store's.
            p.waiting_on_store = matches!(out, Poll::Ready(Some(Ok(_)))) && !ended;
            p.since = Instant::now();
        }
        if ended {
            if let Some(done) = self.done.take() {
                let _ = done.send(());
            }
        }
        out
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::future::Future;

    #[tokio::test]
    async fn sent_fires_at_the_end_or_when_dropped() {
        let noop = std::task::Waker::noop();
        let mut cx = Context::from_waker(noop);

        // Read to its end (a stream knows its end only when it says None).
        let stream = futures::stream::iter([
            Ok::<_, std::io::Error>(Bytes::from("ab")),
            Ok(Bytes::from("cd")),
        ]);
        let (mut body, mut watch) = SendWatch::wrap(Body::from_stream(stream));
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_pending());
        body.frame().await.unwrap().unwrap();
        assert!(body.frame().await.is_none());
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_ready());

        // A full body ends with its one frame.
        let (mut body, mut watch) = SendWatch::wrap(Body::from("xyz"));
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_pending());
        body.frame().await.unwrap().unwrap();
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_ready());

        // Let go of before its end (Content-Length reached, or given up).
        let (body, mut watch) = SendWatch::wrap(Body::from("xyz"));
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_pending());
        drop(body);
        assert!(Pin::new(&mut watch.sent).poll(&mut cx).is_ready());
    }

    /// A frame taken and no pull after it: a stall once the limit passes.
    /// A body waiting on its own source is never one.
    #[tokio::test]
    async fn a_stall_is_a_frame_taken_and_no_pull_since() {
        let stream = futures::stream::iter([
            Ok::<_, std::io::Error>(Bytes::from("ab")),
            Ok(Bytes::from("cd")),
        ]);
        let (mut body, watch) = SendWatch::wrap(Body::from_stream(stream));
        body.frame().await.unwrap().unwrap();
        let limit = Duration::from_millis(200);
        let stall = tokio::time::timeout(Duration::from_secs(5), watch.stall.stalled(limit))
            .await
            .expect("a stall");
        assert_eq!(stall.0, limit);

        // The source is slow (nothing ready): the body waits on it.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let (mut body, watch) = SendWatch::wrap(Body::from_stream(tokio_stream_from(rx)));
        tx.send(Ok(Bytes::from("x"))).await.unwrap();
        body.frame().await.unwrap().unwrap();
        let pull = tokio::spawn(async move { body.frame().await.map(|f| f.is_ok()) });
        assert!(
            tokio::time::timeout(limit * 5, watch.stall.stalled(limit))
                .await
                .is_err(),
            "a body waiting on its source is no stall"
        );
        drop(tx);
        assert_eq!(pull.await.unwrap(), None);
    }

    /// A receiver as a stream, without another dependency.
    fn tokio_stream_from(
        mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
