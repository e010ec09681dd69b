//! PutObject and UploadPart with a token: the client's buffer is RDMA READ
//! in chunks, several in flight, and each chunk is handed to the upstream as
//! part of the request body (of known length) without a copy. Checksums the
//! client declared are verified on the bytes read before the last chunk is
//! released; any failure ends the upstream body with an error, so the store
//! keeps no object and no part.

use super::checksum::{self, Hasher};
use super::mover::{Initiator, Mover, RemoteBuffer};
use super::reply::{set_request_id, with_reply};
use super::transfer::Transfer;
use crate::body::{Body, BoxError};
use crate::header_filter::copy_object_headers;
use crate::s3err::S3Error;
use crate::upstream::Payload;
use bytes::Bytes;
use hipobj_net::sigv4::EMPTY_SHA256;
use http::{HeaderValue, Response, StatusCode};
use tokio::sync::mpsc;

type Answer = Result<Response<Body>, Response<Body>>;
type Chunk = Result<Bytes, BoxError>;

fn fail(e: S3Error, reply: &str, request_id: &str) -> Response<Body> {
    crate::metrics::rdma_failure(e.code);
    with_reply(e.into_response(request_id), reply)
}

pub(super) async fn run(
    ctx: &Transfer<'_>,
    parts: http::request::Parts,
    initiator: Initiator,
    remote: RemoteBuffer,
) -> Answer {
    let (upstream, request_id) = (ctx.upstream, ctx.request_id);
    let expected = checksum::expected(&parts.headers);
    let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
    // One chunk waits in the channel; the others are in flight or being sent.
    let (tx, rx) = mpsc::channel::<Chunk>(1);
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|c| (c, rx))
    }));
    let mut req = http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.clone());
    if let Some(x) = req.extensions_mut() {
        crate::tenancy::StoreIdentity::carry(&parts.extensions, x);
    }
    if let Some(h) = req.headers_mut() {
        *h = crate::header_filter::forwardable_headers(&parts.headers);
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(remote.len));
    }
    let req = req
        .body(body)
        .map_err(|e| fail(S3Error::internal(e.to_string()), "500", request_id))?;
    let payload = if remote.len == 0 {
        Payload::Sha256(EMPTY_SHA256.to_string())
    } else {
        Payload::Unsigned
    };
    let upload = tokio::spawn(crate::upstream::timed(op, upstream.send(req, payload)));
    let read = read_all(ctx, initiator, remote, &expected, tx).await;
    let sent = upload.await;
    if let Err((e, reply)) = read {
        return Err(fail(e, reply, request_id));
    }
    let resp = match sent {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(fail(S3Error::bad_gateway(e.to_string()), "502", request_id)),
        Err(e) => return Err(fail(S3Error::internal(e.to_string()), "500", request_id)),
    };
    if !resp.status().is_success() {
        crate::metrics::rdma_failure("StoreError");
        let code = resp.status().as_u16().to_string();
        return Err(with_reply(resp, &code));
    }
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::OK;
    copy_object_headers(resp.headers(), r.headers_mut());
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    h.insert(
        hipobj_wire::headers::RDMA_REPLY,
        HeaderValue::from_static("200"),
    );
    h.insert(
        hipobj_wire::headers::RDMA_BYTES_TRANSFERRED,
        HeaderValue::from(remote.len),
    );
    set_request_id(&mut r, request_id);
    Ok(r)
}

fn verify(hashers: Vec<(checksum::Expected, Hasher)>) -> Result<(), S3Error> {
    for (want, h) in hashers {
        let got = h.finish();
        if got != want.value {
            return Err(S3Error::checksum_mismatch(format!(
                "{} of the bytes read is {got}, the request declared {}",
                want.algorithm.header(),
                want.value
            )));
        }
    }
    Ok(())
}

/// Ends the upstream body with an error, so the store keeps nothing.
async fn abort(tx: &mpsc::Sender<Chunk>, why: String) {
    let _ = tx.send(Err(why.into())).await;
}

/// Reads the whole buffer into the channel; on any failure the channel
/// gets an error item, which aborts the upstream request.
async fn read_all(
    ctx: &Transfer<'_>,
    initiator: Initiator,
    remote: RemoteBuffer,
    expected: &[checksum::Expected],
    tx: mpsc::Sender<Chunk>,
) -> Result<(), (S3Error, &'static str)> {
    let mut hashers: Vec<_> = expected
        .iter()
        .map(|e| (e.clone(), Hasher::new(e.algorithm)))
        .collect();
    let len = remote.len;
    if len == 0 {
        return match verify(hashers) {
            Ok(()) => Ok(()),
            Err(e) => {
                abort(&tx, e.message.clone()).await;
                Err((e, "400"))
            }
        };
    }
    let chunk = ctx.pool.chunk() as u64;
    let depth = ctx.depth;
    let mut mover = Mover::new(initiator, remote, ctx.progress_timeout, ctx.device);
    let (mut posted, mut delivered) = (0u64, 0u64);
    while delivered < len {
        while mover.inflight() < depth && posted < len {
            // Never retire a READ just to free its buffer: its bytes belong
            // to the body. With READs in flight and the pool empty, deliver
            // the oldest first (below), which frees a buffer once sent.
            let staging = match ctx.pool.try_acquire(ctx.share) {
                Some(s) => s,
                None if mover.inflight() > 0 => break,
                None => match ctx.pool.acquire(ctx.share, ctx.pool_timeout).await {
                    Ok(s) => s,
                    Err(e) => {
                        abort(&tx, e.to_string()).await;
                        return Err((S3Error::pool_timeout(e.to_string()), "503"));
                    }
                },
            };
            let n = (len - posted).min(chunk);
            if let Err(e) = mover.post(false, staging, n as usize, posted) {
                abort(&tx, e.to_string()).await;
                let _ = mover.drain(false).await;
                return Err((S3Error::transfer_failed(e.to_string()), "500"));
            }
            posted += n;
        }
        let (staging, n) = match mover.complete_oldest(false).await {
            // A READ lands in staging, never in a mapped range.
            Ok(Some((held, n))) => match held.into_staging() {
                Some(s) => (s, n),
                None => unreachable!("a READ posted from a mapped range"),
            },
            Ok(None) => break,
            Err(e) => {
                abort(&tx, e.to_string()).await;
                let _ = mover.drain(false).await;
                return Err((S3Error::transfer_failed(e.to_string()), "500"));
            }
        };
        let bytes = staging.into_bytes(n);
        for (_, h) in hashers.iter_mut() {
            h.update(&bytes);
        }
        delivered += n as u64;
        if delivered == len {
            if let Err(e) = verify(std::mem::take(&mut hashers)) {
                drop(bytes);
                abort(&tx, e.message.clone()).await;
                return Err((e, "400"));
            }
        }
        if tx.send(Ok(bytes)).await.is_err() {
            // The store stopped reading: its answer says why.
            let _ = mover.drain(false).await;
            return Ok(());
        }
    }
    if delivered != len {
        // Unreachable by construction; never let a short body look complete.
        let why = format!("read {delivered} of {len} bytes");
        abort(&tx, why.clone()).await;
        return Err((S3Error::transfer_failed(why), "500"));
    }
    Ok(())
}
