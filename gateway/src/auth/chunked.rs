//! The body as the client meant it: aws-chunked decoded with its chunk
//! signatures and its trailing checksum checked, or a plain body whose
//! SHA-256 is checked at its end.
//!
//! Both are `http_body::Body` state machines over the incoming frames; the
//! body is never collected. A signed aws-chunked body buffers one chunk (at
//! most [`MAX_CHUNK_SIZE`]) so that no byte is released before its chunk
//! signature has been checked; an unsigned one without a trailing checksum
//! passes data through as it arrives; a plain body holds back its latest
//! frame, so that the error for a wrong hash replaces the last data.
//!
//! An aws-chunked body with a trailing checksum (`x-amz-trailer:
//! x-amz-checksum-crc32` etc., `STREAMING-UNSIGNED-PAYLOAD-TRAILER` or
//! `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`) has the declared
//! algorithm computed over its decoded bytes, and is held back one chunk:
//! each complete chunk is released only once the next chunk header has
//! been read, so the last data chunk waits for the final zero-size chunk
//! and the trailers. There the checksum is checked: the held chunk comes
//! out and the body ends, or an error ([`AuthError::BadDigest`]) comes
//! instead of it. A consumer (the store) therefore never sees the whole
//! body when its checksum is wrong, even one that stops reading at its
//! `Content-Length`. At most two chunks are buffered then: the one held and
//! the one being read.
//!
//! The aws-chunked decoding itself (sans I/O) is [`super::chunk_parser`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::canonical;
use super::chunk_parser::{ChunkParser, Mode};
use super::{AuthError, BodyMode, Verified};
use crate::body::{Body, BoxError};

/// The trailing headers of an aws-chunked body, once it has been read to its
/// end without error (the trailer signature itself left out).
#[derive(Clone, Debug, Default)]
pub struct TrailingHeaders(Arc<Mutex<Option<HeaderMap>>>);

impl TrailingHeaders {
    /// The trailing headers, if the body has ended well and carried some;
    /// taken, so a second call returns `None`.
    pub fn take(&self) -> Option<HeaderMap> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    pub(crate) fn set(&self, map: HeaderMap) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(map);
    }
}

/// The body as the client meant it: aws-chunked decoded (verifying each
/// chunk signature in order, the trailer signature, the presence of the
/// declared trailing headers and the value of a declared trailing checksum
/// `x-amz-checksum-*`), or a plain body whose SHA-256 is checked at the end
/// (an error item is yielded instead of the last chunk if it does not
/// match).
///
/// With a trailing checksum declared, each decoded chunk is released only
/// once the next chunk header has arrived, so the last one is held until
/// the checksum has been checked against the trailer: on a mismatch a
/// `BadDigest` error comes instead of it, and the body never carries all of
/// its bytes. Memory is bounded: at most one chunk (of at most
/// `MAX_CHUNK_SIZE`) is buffered, two with a trailing checksum.
///
/// Errors the body yields are [`AuthError`]s (boxed), or the incoming body's
/// own errors as they were. Data released before an error is data that
/// verified, but the body as a whole has not: a consumer must discard it.
pub fn decode_body(verified: &Verified, body: Body) -> Body {
    decode_body_with_trailers(verified, body).0
}

/// [`decode_body`], with a handle on the trailing headers of an aws-chunked
/// body (e.g. `x-amz-checksum-crc64nvme`), available once the body has been
/// read to its end.
pub fn decode_body_with_trailers(verified: &Verified, body: Body) -> (Body, TrailingHeaders) {
    let trailers = TrailingHeaders::default();
    let decoded = match &verified.body {
        BodyMode::Unsigned => body,
        BodyMode::Sha256(hex) => Body::new(Sha256Body::new(body, hex)),
        BodyMode::ChunkedSigned { trailer } => {
            let mode = if *trailer {
                Mode::SignedTrailer
            } else {
                Mode::Signed
            };
            Body::new(ChunkedBody::new(
                body,
                ChunkParser::new(mode, verified),
                trailers.clone(),
            ))
        }
        BodyMode::ChunkedUnsigned => Body::new(ChunkedBody::new(
            body,
            ChunkParser::new(Mode::Unsigned, verified),
            trailers.clone(),
        )),
    };
    (decoded, trailers)
}

// ---------------------------------------------------------------------------
// Plain body, SHA-256 checked at the end.

struct Sha256Body {
    inner: Body,
    hasher: Sha256,
    /// `None` when the announced hash was not 64 hex digits.
    expected: Option<[u8; 32]>,
    held: Option<Bytes>,
    done: bool,
}

impl Sha256Body {
    fn new(inner: Body, hex: &str) -> Sha256Body {
        Sha256Body {
            inner,
            hasher: Sha256::new(),
            expected: canonical::parse_hex32(hex),
            held: None,
            done: false,
        }
    }
}

impl http_body::Body for Sha256Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(this.held.take().map(|b| Ok(Frame::data(b))));
            }
            if this.expected.is_none() {
                this.done = true;
                this.held = None;
                return Poll::Ready(Some(Err(Box::new(AuthError::XAmzContentSha256Mismatch))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    this.hasher.update(&data);
                    if let Some(prev) = this.held.replace(data) {
                        return Poll::Ready(Some(Ok(Frame::data(prev))));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    this.held = None;
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    let digest: [u8; 32] = std::mem::take(&mut this.hasher).finalize().into();
                    let ok = this.expected.is_some_and(|e| bool::from(e.ct_eq(&digest)));
                    if !ok {
                        tracing::debug!("body does not match x-amz-content-sha256");
                        this.held = None;
                        return Poll::Ready(Some(Err(Box::new(
                            AuthError::XAmzContentSha256Mismatch,
                        ))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.held.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        if let Some(held) = &self.held {
            let n = held.len() as u64;
            hint.set_lower(hint.lower().saturating_add(n));
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper.saturating_add(n));
            }
        }
        hint
    }
}

/// The decoding body: polls the incoming frames through a [`ChunkParser`].
struct ChunkedBody {
    inner: Body,
    parser: ChunkParser,
    out: VecDeque<Bytes>,
    /// Decoded bytes released so far.
    released: u64,
    /// The error to yield once the data verified before it is out.
    failed: Option<BoxError>,
    done: bool,
    trailers: TrailingHeaders,
}

impl ChunkedBody {
    fn new(inner: Body, parser: ChunkParser, trailers: TrailingHeaders) -> ChunkedBody {
        ChunkedBody {
            inner,
            parser,
            out: VecDeque::new(),
            released: 0,
            failed: None,
            done: false,
            trailers,
        }
    }
}

impl http_body::Body for ChunkedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.out.pop_front() {
                this.released = this.released.saturating_add(data.len() as u64);
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if let Some(e) = this.failed.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    // HTTP-level trailers of the encoded body carry nothing here.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    // Chunks verified (and released) before a failure in
                    // the same frame still come out, then the error; a chunk
                    // held back for the trailing checksum does not.
                    if let Err(e) = this.parser.push(data, &mut this.out) {
                        this.done = true;
                        this.failed = Some(Box::new(e));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    this.failed = Some(e.into());
                }
                Poll::Ready(None) => {
                    this.done = true;
                    match this.parser.finish(&mut this.out) {
                        Ok(map) if !map.is_empty() => this.trailers.set(map),
                        Ok(_) => {}
                        Err(e) => this.failed = Some(Box::new(e)),
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.out.is_empty() && self.failed.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.parser.declared_length() {
            Some(n) if !self.done => SizeHint::with_exact(n.saturating_sub(self.released)),
            _ if self.done => SizeHint::with_exact(self.out.iter().map(|b| b.len() as u64).sum()),
            _ => SizeHint::default(),
        }
    }
}
