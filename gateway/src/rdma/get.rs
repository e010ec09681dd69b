//! GetObject with a token: the upstream body streams into staging buffers,
//! and each full chunk is RDMA WRITTEN at its offset while the next fills,
//! with several writes in flight. Nothing is written past the client's
//! buffer: a larger object is refused before the first byte is written when
//! its length is known, and stops at the edge otherwise.
//!
//! From the embedded store the body is not read at all: its answer carries
//! the object's open file and range ([`hipobj_store::FileRange`]), and each
//! chunk is read from the file straight into its staging buffer (one copy
//! where the body would take two). The store has already done everything
//! else of the GET: authentication, conditions, range and part selection,
//! the headers.

use super::mapped::{MappedSource, MAP_MIN};
use super::mover::{AcquireError, Initiator, MoveError, Mover, RemoteBuffer};
use super::reply::{set_request_id, with_reply};
use super::staging::Staging;
use super::transfer::Transfer;
use crate::body::Body;
use crate::header_filter::copy_object_headers;
use crate::s3err::S3Error;
use crate::upstream::Payload;
use hipobj_net::sigv4::EMPTY_SHA256;
use hipobj_store::FileRange;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use std::sync::Arc;

type Answer = Result<Response<Body>, Response<Body>>;

fn fail(e: S3Error, reply: &str, request_id: &str) -> Response<Body> {
    crate::metrics::rdma_failure(e.code);
    with_reply(e.into_response(request_id), reply)
}

fn ranged(parts: &http::request::Parts) -> bool {
    parts.headers.contains_key(http::header::RANGE)
        || parts
            .uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p.starts_with("partNumber=")))
}

pub(crate) async fn run(
    ctx: &Transfer<'_>,
    parts: http::request::Parts,
    initiator: Initiator,
    remote: RemoteBuffer,
) -> Answer {
    let (upstream, request_id) = (ctx.upstream, ctx.request_id);
    let partial = ranged(&parts);
    let mut req = http::Request::builder()
        .method(http::Method::GET)
        .uri(parts.uri.clone());
    if let Some(x) = req.extensions_mut() {
        crate::tenancy::StoreIdentity::carry(&parts.extensions, x);
    }
    if let Some(h) = req.headers_mut() {
        *h = crate::header_filter::forwardable_headers(&parts.headers);
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    let req = req
        .body(Body::empty())
        .map_err(|e| fail(S3Error::internal(e.to_string()), "500", request_id))?;
    let sent = upstream.send(req, Payload::Sha256(EMPTY_SHA256.to_string()));
    let resp = crate::upstream::timed("GetObject", sent)
        .await
        .map_err(|e| fail(S3Error::bad_gateway(e.to_string()), "502", request_id))?;
    let status = resp.status();
    if !status.is_success() {
        // The store's own answer (NoSuchKey, InvalidRange, ...), with its status as the reply.
        crate::metrics::rdma_failure("StoreError");
        let code = status.as_u16().to_string();
        return Err(with_reply(resp, &code));
    }
    let (head, mut body) = resp.into_parts();
    let known = head
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let (Some(v2), Some(n)) = (ctx.v2, known) {
        if n != v2.size {
            return Err(fail(
                S3Error::new(
                    StatusCode::BAD_REQUEST,
                    "InvalidRange",
                    format!(
                        "the object (or part) has {n} bytes there, not the {} asked for",
                        v2.size
                    ),
                ),
                "400",
                request_id,
            ));
        }
    }
    if let Some(n) = known {
        if n > remote.len {
            return Err(fail(
                S3Error::buffer_too_small(format!(
                    "the object (or range) is {n} bytes, the RDMA buffer {}",
                    remote.len
                )),
                "400",
                request_id,
            ));
        }
    }
    let chunk = ctx.pool.chunk();
    let depth = ctx.depth;
    let mut mover = Mover::new(initiator, remote, ctx.progress_timeout, ctx.device);
    if let Some(v2) = ctx.v2 {
        mover.imm_at_end(v2.size, v2.imm);
    }
    // hipobj-rc-v2's answer names the CRC-64/NVME of the bytes moved.
    let mut crc = ctx.v2.map(|_| crc64fast_nvme::Digest::new());
    // The bytes' CRC where it is known without reading them (a mapped
    // object's stored one).
    let mut known_crc: Option<u64> = None;
    let mut offset: u64 = 0; // bytes posted so far
    let mut current: Option<(Staging, usize)> = None;
    let mut failure: Option<(S3Error, &'static str)> = None;

    if let Some(range) = head.extensions.get::<FileRange>().cloned() {
        drop(body);
        failure = match from_mapping(ctx, &mut mover, &range, remote.len, &mut offset).await {
            Some(Mapped {
                failure,
                crc: stored,
            }) => {
                if failure.is_none() {
                    crate::metrics::store_mapped_bytes(offset);
                }
                known_crc = stored;
                failure
            }
            None => from_file(ctx, &mut mover, &range, remote.len, &mut offset, &mut crc).await,
        };
        if failure.is_none() {
            crate::metrics::store_direct_bytes(offset);
        }
    } else {
        'outer: while let Some(frame) = body.frame().await {
            let data = match frame {
                Ok(f) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
                Err(e) => {
                    failure = Some((
                        S3Error::bad_gateway(format!(
                            "reading the object from the store failed: {e}"
                        )),
                        "502",
                    ));
                    break;
                }
            };
            let mut rest = &data[..];
            while !rest.is_empty() {
                if current.is_none() {
                    match mover
                        .staging(ctx.pool, ctx.share, true, ctx.pool_timeout)
                        .await
                    {
                        Ok(s) => current = Some((s, 0)),
                        Err(AcquireError::Pool(e)) => {
                            failure = Some((S3Error::pool_timeout(e.to_string()), "503"));
                            break 'outer;
                        }
                        Err(AcquireError::Move(e)) => {
                            failure = Some((S3Error::transfer_failed(e.to_string()), "500"));
                            break 'outer;
                        }
                    }
                }
                let Some((staging, filled)) = current.as_mut() else {
                    break;
                };
                let n = rest.len().min(chunk - *filled);
                let end = offset + (*filled + n) as u64;
                if end > remote.len {
                    failure = Some((
                        S3Error::buffer_too_small(format!(
                            "the object is larger than the {}-byte RDMA buffer",
                            remote.len
                        )),
                        "400",
                    ));
                    break 'outer;
                }
                if let Some(c) = crc.as_mut() {
                    c.write(&rest[..n]);
                }
                if let Err(e) = staging.write_at(*filled, &rest[..n]) {
                    failure = Some((S3Error::internal(e.to_string()), "500"));
                    break 'outer;
                }
                *filled += n;
                rest = &rest[n..];
                if *filled == chunk {
                    if let Some((s, len)) = current.take() {
                        if let Err(e) = post(&mut mover, s, len, &mut offset, depth).await {
                            failure = Some((S3Error::transfer_failed(e.to_string()), "500"));
                            break 'outer;
                        }
                    }
                }
            }
        }
    }
    if failure.is_none() {
        if let Some((s, len)) = current.take() {
            if len > 0 {
                if let Err(e) = post(&mut mover, s, len, &mut offset, depth).await {
                    failure = Some((S3Error::transfer_failed(e.to_string()), "500"));
                }
            }
        }
    }
    drop(current);
    // Whatever happened, nothing may still be writing the client's buffer
    // when the answer goes out.
    let drained = mover.drain(true).await;
    if let Some((e, reply)) = failure {
        return Err(fail(e, reply, request_id));
    }
    if let Err(e) = drained {
        return Err(fail(
            S3Error::transfer_failed(e.to_string()),
            "500",
            request_id,
        ));
    }
    if let Some(v2) = ctx.v2 {
        if offset != v2.size {
            return Err(fail(
                S3Error::bad_gateway(format!(
                    "the store sent {offset} bytes, not the {} asked for",
                    v2.size
                )),
                "502",
                request_id,
            ));
        }
    }
    if let Some(n) = known {
        if n != offset {
            return Err(fail(
                S3Error::bad_gateway(format!("the store sent {offset} of {n} bytes")),
                "502",
                request_id,
            ));
        }
    }
    let code = if partial || status == StatusCode::PARTIAL_CONTENT {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let mut r = Response::new(Body::empty());
    *r.status_mut() = code;
    copy_object_headers(&head.headers, r.headers_mut());
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    h.insert(
        hipobj_wire::headers::RDMA_REPLY,
        HeaderValue::from(code.as_u16()),
    );
    h.insert(
        hipobj_wire::headers::RDMA_BYTES_TRANSFERRED,
        HeaderValue::from(offset),
    );
    if let Some(c) = known_crc.or(crc.map(|c| c.sum64())) {
        if let Ok(v) = HeaderValue::from_str(&hipobj_wire::rc_v2::fields::format_checksum(c)) {
            h.insert(hipobj_wire::rc_v2::H_CHECKSUM, v);
        }
    }
    set_request_id(&mut r, request_id);
    Ok(r)
}

/// How a GET from a mapped object ended: the failure, if any, and the
/// checksum to name (hipobj-rc-v2), the object's stored one.
struct Mapped {
    failure: Option<(S3Error, &'static str)>,
    crc: Option<u64>,
}

/// Sends `range` by RDMA WRITEs straight from the object's file, mapped
/// and registered ([`MappedSource`]): one copy, from the page cache to the
/// client, and no staging buffer. `None` where that is not done, and the
/// caller reads into staging instead: a range under [`MAP_MIN`], a
/// hipobj-rc-v2 GET of anything but a whole object with a
/// stored CRC-64/NVME (the checksum v2 names, which the client then checks
/// against the bytes end to end: the gateway never reads a mapping), or a
/// mapping the provider does not register.
async fn from_mapping(
    ctx: &Transfer<'_>,
    mover: &mut Mover,
    range: &FileRange,
    room: u64,
    offset: &mut u64,
) -> Option<Mapped> {
    if !ctx.map_files || range.len() < MAP_MIN || range.len() > room || *offset != 0 {
        return None;
    }
    let stored = match ctx.v2 {
        Some(_) => Some(
            range
                .object_crc64nvme()
                .and_then(hipobj_wire::checksum::crc64nvme_from_value)?,
        ),
        None => None,
    };
    let (kept, r) = (ctx.mapped.clone(), range.clone());
    let mapped = tokio::task::spawn_blocking(move || kept.map(r.file(), r.start(), r.len())).await;
    let src = match mapped {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "the object is not mapped; it is read into staging");
            return None;
        }
        Err(e) => {
            return Some(Mapped {
                failure: Some((S3Error::internal(e.to_string()), "500")),
                crc: None,
            })
        }
    };
    let chunk = ctx.pool.chunk() as u64;
    while *offset < range.len() {
        let n = (range.len() - *offset).min(chunk) as usize;
        if let Err(e) = post_mapped(mover, &src, n, offset, ctx.depth).await {
            return Some(Mapped {
                failure: Some((S3Error::transfer_failed(e.to_string()), "500")),
                crc: None,
            });
        }
    }
    Some(Mapped {
        failure: None,
        crc: stored,
    })
}

/// Reads `range` from the store's file chunk by chunk straight into
/// staging buffers (a blocking task each), posting each as it fills; the
/// failure, if any.
async fn from_file(
    ctx: &Transfer<'_>,
    mover: &mut Mover,
    range: &FileRange,
    room: u64,
    offset: &mut u64,
    crc: &mut Option<crc64fast_nvme::Digest>,
) -> Option<(S3Error, &'static str)> {
    if range.len() > room {
        return Some((
            S3Error::buffer_too_small(format!(
                "the object (or range) is {} bytes, the RDMA buffer {room}",
                range.len()
            )),
            "400",
        ));
    }
    let chunk = ctx.pool.chunk() as u64;
    while *offset < range.len() {
        let staging = match mover
            .staging(ctx.pool, ctx.share, true, ctx.pool_timeout)
            .await
        {
            Ok(s) => s,
            Err(AcquireError::Pool(e)) => {
                return Some((S3Error::pool_timeout(e.to_string()), "503"))
            }
            Err(AcquireError::Move(e)) => {
                return Some((S3Error::transfer_failed(e.to_string()), "500"))
            }
        };
        let (at, n) = (*offset, (range.len() - *offset).min(chunk) as usize);
        let mut digest = crc.take();
        // The buffer is ours alone (no work request names it) until it is
        // posted below; a blocking task fills it and hands it back, unless
        // the bytes are already in memory (a small object, read with its
        // open), which `read_into` copies without blocking, here.
        let joined = if range.bytes().is_some() {
            let mut staging = staging;
            let read = fill(&mut staging, range, at, n, &mut digest);
            Ok((staging, read, digest))
        } else {
            let r = range.clone();
            tokio::task::spawn_blocking(move || {
                let mut staging = staging;
                let read = fill(&mut staging, &r, at, n, &mut digest);
                (staging, read, digest)
            })
            .await
        };
        let staging = match joined {
            Ok((s, Ok(()), digest)) => {
                *crc = digest;
                s
            }
            Ok((_, Err(e), _)) => {
                return Some((
                    S3Error::bad_gateway(format!("reading the object from the store failed: {e}")),
                    "502",
                ))
            }
            Err(e) => return Some((S3Error::internal(e.to_string()), "500")),
        };
        if let Err(e) = post(mover, staging, n, offset, ctx.depth).await {
            return Some((S3Error::transfer_failed(e.to_string()), "500"));
        }
    }
    None
}

/// Fills the first `n` bytes of `staging` from byte `at` of `range`, and
/// adds them to `digest` (blocking unless the range's bytes are in memory).
fn fill(
    staging: &mut Staging,
    range: &FileRange,
    at: u64,
    n: usize,
    digest: &mut Option<crc64fast_nvme::Digest>,
) -> std::io::Result<()> {
    let buf = staging.slice_mut(n).map_err(std::io::Error::other)?;
    range.read_into(at, buf)?;
    if let Some(d) = digest.as_mut() {
        d.write(buf);
    }
    Ok(())
}

/// Posts one chunk at `offset`, then retires the oldest write once `depth`
/// are in flight.
async fn post(
    mover: &mut Mover,
    staging: Staging,
    len: usize,
    offset: &mut u64,
    depth: usize,
) -> Result<(), MoveError> {
    mover.post(true, staging, len, *offset)?;
    advance(mover, len, offset, depth).await
}

/// [`post`] from the mapped file, whose range starts at the object's
/// first byte sent (`offset` in both).
async fn post_mapped(
    mover: &mut Mover,
    src: &Arc<MappedSource>,
    len: usize,
    offset: &mut u64,
    depth: usize,
) -> Result<(), MoveError> {
    mover.post_mapped(src, *offset, len, *offset)?;
    advance(mover, len, offset, depth).await
}

/// After a chunk of `len` bytes was posted at `offset`: moves `offset` past
/// it and retires the oldest writes while `depth` are in flight.
async fn advance(
    mover: &mut Mover,
    len: usize,
    offset: &mut u64,
    depth: usize,
) -> Result<(), MoveError> {
    *offset += len as u64;
    while mover.inflight() >= depth {
        mover.complete_oldest(true).await?;
    }
    Ok(())
}
