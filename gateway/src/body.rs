//! The one body type the front uses for requests and responses, in both
//! directions: axum's, which wraps any `http_body::Body` of `Bytes`; and
//! [`StallTimeout`], the bound on a request body whose bytes stop coming.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Frame, SizeHint};

pub use axum::body::Body;

/// A boxed error for bodies and services.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body that stalled: no frame came for the allowed time while its
/// reader waited.
#[derive(Debug, thiserror::Error)]
#[error("the request body stalled: no byte for {0:?}")]
pub struct BodyStalled(pub Duration);

/// A body that fails with [`BodyStalled`] when its reader has waited
/// `limit` for the next frame. The clock runs only while the reader waits
/// (a reader that is busy elsewhere does not count against the sender),
/// and starts again with every frame.
#[derive(Debug)]
pub struct StallTimeout<B> {
    inner: B,
    limit: Duration,
    /// The deadline, made at the first wait and reset at each later one.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether `timer` runs for the present wait (cleared by each frame).
    armed: bool,
    stalled: bool,
}

impl<B> StallTimeout<B> {
    /// `inner`, failing after `limit` without a frame (a limit above a
    /// year is a year).
    pub fn new(inner: B, limit: Duration) -> StallTimeout<B> {
        StallTimeout {
            inner,
            limit: limit.min(Duration::from_secs(365 * 24 * 3600)),
            timer: None,
            armed: false,
            stalled: false,
        }
    }
}

impl<B> http_body::Body for StallTimeout<B>
where
    B: http_body::Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.stalled {
            return Poll::Ready(Some(Err(BodyStalled(this.limit).into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let limit = this.limit;
                let timer = match &mut this.timer {
                    Some(t) => {
                        if !this.armed {
                            t.as_mut().reset(tokio::time::Instant::now() + limit);
                        }
                        t
                    }
                    None => this.timer.insert(Box::pin(tokio::time::sleep(limit))),
                };
                this.armed = true;
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.armed = false;
                        this.stalled = true;
                        Poll::Ready(Some(Err(BodyStalled(limit).into())))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.stalled && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::BodyExt;

    /// A body of what comes through a channel; ends when the sender drops.
    struct Chan(tokio::sync::mpsc::Receiver<Bytes>);

    impl http_body::Body for Chan {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test]
    async fn a_body_that_keeps_coming_passes_and_one_that_stops_fails() {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut body = StallTimeout::new(Chan(rx), Duration::from_secs(2));
        let sender = tokio::spawn(async move {
            for _ in 0..3 {
                // Each gap is well below the limit.
                tokio::time::sleep(Duration::from_millis(20)).await;
                tx.send(Bytes::from_static(b"abc")).await.unwrap();
            }
            // Then nothing more, the sender kept open.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(tx);
        });
        let mut got = Vec::new();
        for _ in 0..3 {
            let f = body.frame().await.unwrap().unwrap();
            got.extend_from_slice(&f.into_data().unwrap());
        }
        assert_eq!(got, b"abcabcabc");
        let e = body.frame().await.unwrap().unwrap_err();
        assert!(e.is::<BodyStalled>(), "{e}");
        assert!(!http_body::Body::is_end_stream(&body));
        let e = body.frame().await.unwrap().unwrap_err();
        assert!(e.is::<BodyStalled>(), "{e}");
        sender.abort();
    }

    #[tokio::test]
    async fn a_finished_body_ends() {
        let mut body = StallTimeout::new(
            http_body_util::Full::new(Bytes::from_static(b"xyz")),
            Duration::from_secs(1),
        );
        let all = (&mut body).collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"xyz");
        assert!(http_body::Body::is_end_stream(&body));
    }
}
