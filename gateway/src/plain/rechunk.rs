//! A decoded body framed again as aws-chunked with its trailing checksum,
//! unsigned (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`), for the store: so that a
//! checksum the client sent in an aws-chunked trailer reaches the store (which
//! records and echoes it) as it would without the gateway.
//!
//! The frames are of a fixed size ([`FRAME`]), the last one shorter, then
//! `0\r\n<name>:<value>\r\n\r\n`: the encoded length follows from the decoded
//! length and the checksum's length, so the request has a `Content-Length`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

use crate::auth::{AuthError, TrailingHeaders};
use crate::body::{Body, BoxError};
use crate::checksum::Algorithm;

/// The data bytes of every frame but the last.
pub const FRAME: usize = 64 * 1024;

/// The length of an algorithm's checksum in base64.
pub fn value_len(algorithm: Algorithm) -> u64 {
    match algorithm {
        Algorithm::Crc32 | Algorithm::Crc32c => 8,
        Algorithm::Crc64Nvme => 12,
        Algorithm::Sha1 => 28,
        Algorithm::Sha256 => 44,
    }
}

/// The encoded length of `decoded` bytes with `algorithm`'s trailer;
/// `None` on overflow.
pub fn encoded_len(decoded: u64, algorithm: Algorithm) -> Option<u64> {
    let frame = FRAME as u64;
    let hex_len = |n: u64| u64::from(n.max(1).ilog2() / 4 + 1);
    let full = decoded / frame;
    let rest = decoded % frame;
    let per_full = hex_len(frame) + 2 + frame + 2;
    let mut total = full.checked_mul(per_full)?;
    if rest > 0 {
        total = total.checked_add(hex_len(rest) + 2 + rest + 2)?;
    }
    // `0\r\n`, `<name>:<value>\r\n`, `\r\n`.
    let trailer = 3 + algorithm.header().len() as u64 + 1 + value_len(algorithm) + 2 + 2;
    total.checked_add(trailer)
}

/// The re-framing body.
#[derive(Debug)]
pub struct Rechunked {
    inner: Body,
    trailers: TrailingHeaders,
    algorithm: Algorithm,
    buf: BytesMut,
    remaining: u64,
    inner_done: bool,
    done: bool,
}

impl Rechunked {
    /// `inner` (decoded, whose trailing headers `trailers` gets at its end)
    /// framed with `algorithm`'s trailer; `encoded` is its length
    /// ([`encoded_len`]).
    pub fn new(inner: Body, trailers: TrailingHeaders, algorithm: Algorithm, encoded: u64) -> Self {
        Rechunked {
            inner,
            trailers,
            algorithm,
            buf: BytesMut::new(),
            remaining: encoded,
            inner_done: false,
            done: false,
        }
    }

    fn chunk(&mut self, n: usize) -> Bytes {
        let data = self.buf.split_to(n);
        let mut out = BytesMut::with_capacity(n + 16);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(b"\r\n");
        out.freeze()
    }

    fn last(&mut self) -> Result<Bytes, BoxError> {
        let header = self.algorithm.header();
        let value = self
            .trailers
            .take()
            .and_then(|m| m.get(header).cloned())
            .filter(|v| v.len() as u64 == value_len(self.algorithm))
            .ok_or_else(|| {
                AuthError::MalformedTrailer(format!("aws-chunked: {header} did not arrive whole"))
            })?;
        let mut out = BytesMut::with_capacity(header.len() + value.len() + 8);
        out.extend_from_slice(b"0\r\n");
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(b":");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        Ok(out.freeze())
    }

    fn emit(&mut self, b: Bytes) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.remaining = self.remaining.saturating_sub(b.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(b))))
    }
}

impl http_body::Body for Rechunked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if this.buf.len() >= FRAME {
                let b = this.chunk(FRAME);
                return this.emit(b);
            }
            if this.inner_done {
                if !this.buf.is_empty() {
                    let n = this.buf.len();
                    let b = this.chunk(n);
                    return this.emit(b);
                }
                this.done = true;
                return match this.last() {
                    Ok(b) => this.emit(b),
                    Err(e) => Poll::Ready(Some(Err(e))),
                };
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(None) => this.inner_done = true,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn encode(data: &[u8], pieces: usize, alg: Algorithm, value: &str) -> Vec<u8> {
        let trailers = TrailingHeaders::default();
        let chunks: Vec<Result<Frame<Bytes>, BoxError>> = data
            .chunks(pieces.max(1))
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let inner = Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            chunks,
        )));
        let mut map = http::HeaderMap::new();
        map.insert(alg.header(), value.parse().unwrap());
        trailers.set(map);
        let len = encoded_len(data.len() as u64, alg).unwrap();
        let body = Rechunked::new(inner, trailers, alg, len);
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(len));
        let out = body.collect().await.unwrap().to_bytes().to_vec();
        assert_eq!(out.len() as u64, len);
        out
    }

    #[tokio::test]
    async fn frames_and_lengths() {
        for n in [0usize, 1, FRAME - 1, FRAME, FRAME + 1, 3 * FRAME + 17] {
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            for pieces in [1000, FRAME, 3 * FRAME] {
                let out = encode(&data, pieces, Algorithm::Crc32, "AAAAAA==").await;
                // Decoded again: the data, then the trailer.
                let mut rest = &out[..];
                let mut back = Vec::new();
                loop {
                    let line = rest.iter().position(|&b| b == b'\r').unwrap();
                    let size =
                        usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap(), 16)
                            .unwrap();
                    rest = &rest[line + 2..];
                    if size == 0 {
                        break;
                    }
                    assert!(size <= FRAME);
                    back.extend_from_slice(&rest[..size]);
                    assert_eq!(&rest[size..size + 2], b"\r\n");
                    rest = &rest[size + 2..];
                }
                assert_eq!(back, data, "{n} {pieces}");
                assert_eq!(rest, b"x-amz-checksum-crc32:AAAAAA==\r\n\r\n");
            }
        }
        let sha = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
        assert_eq!(sha.len() as u64, value_len(Algorithm::Sha256));
        encode(b"abc", 1, Algorithm::Sha256, sha).await;
    }

    #[tokio::test]
    async fn a_missing_trailer_fails_the_body() {
        let inner = Body::from(Bytes::from_static(b"abc"));
        let len = encoded_len(3, Algorithm::Crc32).unwrap();
        let body = Rechunked::new(inner, TrailingHeaders::default(), Algorithm::Crc32, len);
        assert!(body.collect().await.is_err());
    }

    #[test]
    fn lengths_do_not_overflow() {
        assert!(encoded_len(u64::MAX, Algorithm::Crc32).is_none());
        assert_eq!(
            encoded_len(0, Algorithm::Crc32),
            Some(3 + "x-amz-checksum-crc32".len() as u64 + 1 + 8 + 4)
        );
    }
}
