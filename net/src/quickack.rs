//! Connections to an S3 store that acknowledge what they read at once.
//!
//! A store that does not set `TCP_NODELAY` (s3s-fs 0.14) writes an
//! answer as two writes, the head and then the body; Nagle holds the body
//! until the head is acknowledged, and Linux holds that acknowledgement
//! for its delayed-ACK timer (~40 ms) on a connection it considers
//! interactive ("pingpong" mode). Setting `TCP_QUICKACK` after every read
//! that returned data makes the kernel acknowledge at once, so the body
//! follows the head without the stall. Linux clears `TCP_QUICKACK` by
//! itself, hence once per read, not once per connection. Elsewhere this is
//! a plain pass-through.
//!
//! [`QuickAckConnector`] wraps hyper-util's [`HttpConnector`] (which keeps
//! doing the connect timeout, `TCP_NODELAY`, keep-alive and the local
//! address); TLS, when used, is layered on top of it by `hyper-rustls`, so
//! it benefits too. Both the gateway's upstream client and `hipobj-s3` use
//! it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP stream that re-arms `TCP_QUICKACK` after every read that
/// returned data (Linux; elsewhere a pass-through).
#[derive(Debug)]
pub struct QuickAckStream {
    inner: TcpStream,
}

impl QuickAckStream {
    /// Wraps `stream`.
    pub fn new(stream: TcpStream) -> QuickAckStream {
        QuickAckStream { inner: stream }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }

    fn rearm(&self) {
        // A failure only means the stall may come back; the read itself
        // succeeded, so it is not reported.
        #[cfg(target_os = "linux")]
        let _ = self.inner.set_quickack(true);
    }
}

impl AsyncRead for QuickAckStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.rearm();
        }
        res
    }
}

impl AsyncWrite for QuickAckStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl Connection for QuickAckStream {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

/// [`HttpConnector`] whose connections are [`QuickAckStream`]s.
#[derive(Clone, Debug)]
pub struct QuickAckConnector {
    http: HttpConnector,
}

impl QuickAckConnector {
    /// Wraps `http`, configured as wanted (timeouts, nodelay, keep-alive).
    pub fn new(http: HttpConnector) -> QuickAckConnector {
        QuickAckConnector { http }
    }
}

type ConnectFuture =
    Pin<Box<dyn Future<Output = Result<TokioIo<QuickAckStream>, ConnectError>> + Send>>;
type ConnectError = <HttpConnector as tower_service::Service<Uri>>::Error;

impl tower_service::Service<Uri> for QuickAckConnector {
    type Response = TokioIo<QuickAckStream>;
    type Error = ConnectError;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.http.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.http.call(dst);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TokioIo::new(QuickAckStream::new(io.into_inner())))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[cfg(target_os = "linux")]
    fn quickack(stream: &TcpStream) -> bool {
        stream.quickack().expect("reading TCP_QUICKACK")
    }

    #[cfg(target_os = "linux")]
    fn set_quickack(stream: &TcpStream, on: bool) {
        stream.set_quickack(on).expect("setting TCP_QUICKACK");
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.unwrap(), server.unwrap().0)
    }

    #[tokio::test]
    async fn reads_and_writes_pass_through_byte_exact() {
        let (client, mut server) = pair().await;
        let mut s = QuickAckStream::new(client);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let echo = tokio::spawn(async move {
            let mut got = vec![0u8; 100_000];
            server.read_exact(&mut got).await.unwrap();
            server.write_all(&got).await.unwrap();
            server.shutdown().await.unwrap();
        });
        s.write_all(&data).await.unwrap();
        s.flush().await.unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).await.unwrap();
        echo.await.unwrap();
        assert_eq!(back, data);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_read_rearms_quickack() {
        let (client, mut server) = pair().await;
        // Enter "pingpong" mode (delayed ACKs), as the kernel does on an
        // interactive connection: TCP_QUICKACK then reads back off.
        set_quickack(&client, false);
        assert!(!quickack(&client));
        let mut s = QuickAckStream::new(client);
        server.write_all(b"head").await.unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"head");
        assert!(quickack(s.get_ref()), "TCP_QUICKACK re-armed after a read");

        // A plain stream left in the same state stays there after a read,
        // so it is the wrapper that set it.
        let (mut plain, mut server) = pair().await;
        set_quickack(&plain, false);
        server.write_all(b"head").await.unwrap();
        plain.read_exact(&mut buf).await.unwrap();
        assert!(!quickack(&plain));
    }

    #[tokio::test]
    async fn the_connector_yields_wrapped_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let mut c = QuickAckConnector::new(http);
        let uri: Uri = format!("http://{addr}").parse().unwrap();
        let (io, accepted) =
            tokio::join!(tower_service::Service::call(&mut c, uri), listener.accept());
        let io = io.unwrap();
        accepted.unwrap();
        assert!(io.inner().get_ref().nodelay().unwrap());
        assert!(!io.connected().is_proxied());
    }
}
