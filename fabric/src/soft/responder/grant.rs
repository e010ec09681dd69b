//! The same-host path on the responder side: granting a checked range to
//! the requester's process and keeping the region registered until the
//! requester says it has copied it.

use super::access::{respond, while_accessing};
use crate::soft::memory::{self, MrInner};
use crate::soft::packet::{
    ReqOp, Request, Response, Syndrome, CMA_FAILED, CMA_GRANT_LEN, REQUEST_LEN,
};
use crate::soft::psn;
use crate::soft::shared::{segments, DeviceShared};
use crate::soft::stats::{Event, Gauge};
use std::io;
use std::net::{Shutdown, TcpStream};
use std::time::Instant;

/// How a same-host grant ended.
pub(super) enum Granted {
    /// The requester copied the range.
    Done,
    /// The requester could not copy; it sends the bytes over the stream.
    Failed,
    /// The requester sent another request instead (it gave up waiting for
    /// the grant, and copied nothing): served next.
    Superseded(Request),
    /// The region was deregistered before the grant.
    Dead,
}

/// Grants the requester the checked range at `host` of `mr` for the
/// request `req`, and keeps the region registered until its answer: its
/// done, another request, the end of the stream, or the device's done
/// timeout (`SoftConfig::cma_done_timeout`). On the timeout the
/// connection is shut down before the region is let go, so a requester
/// that wakes up late finds it closed.
pub(super) fn grant(
    dev: &DeviceShared,
    stream: &TcpStream,
    mr: &MrInner,
    host: usize,
    req: &Request,
) -> io::Result<Granted> {
    // Set from a u32 by the requester; any other value is not ours.
    let Ok(nonce) = u32::try_from(req.dc_key) else {
        return Err(io::Error::other(
            "a same-host request's nonce is over 32 bits",
        ));
    };
    let len = if req.op == ReqOp::ReadReq {
        req.msg_len
    } else {
        req.cma_len
    };
    let held = while_accessing(dev, mr, host, len as usize, || -> io::Result<Granted> {
        let mut payload = [0u8; CMA_GRANT_LEN as usize];
        payload[0..8].copy_from_slice(&(host as u64).to_le_bytes());
        payload[8..12].copy_from_slice(&nonce.to_le_bytes());
        let _outstanding = dev.stats.up(Gauge::GrantsOutstanding);
        memory::send_bytes(stream, &Response::cma_grant(req.psn).encode(), true)?;
        memory::send_bytes(stream, &payload, false)?;
        let next = read_until(stream, Instant::now() + dev.config.cma_done_timeout);
        stream.set_read_timeout(None)?;
        let hdr = match next {
            Ok(Some(hdr)) => hdr,
            Ok(None) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Err(e) if timed_out(&e) => {
                dev.stats.count(Event::GrantExpired);
                tracing::warn!(
                    psn = req.psn,
                    "soft responder: no done for a same-host grant in time; closing the connection"
                );
                // Closed while the region is still held: nothing the
                // requester does after this reaches it through this grant.
                let _ = stream.shutdown(Shutdown::Both);
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let Some(r) = Request::decode(&hdr) else {
            return Err(io::Error::other(
                "malformed request after a same-host grant",
            ));
        };
        if r.op == ReqOp::CmaDone && r.psn == req.psn && r.rkey == nonce {
            return Ok(if r.imm == CMA_FAILED {
                dev.stats.count(Event::GrantFailed);
                Granted::Failed
            } else {
                Granted::Done
            });
        }
        Ok(Granted::Superseded(r))
    });
    held.unwrap_or(Ok(Granted::Dead))
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Reads the next request header, waiting until `deadline` at most (by the
/// monotonic clock: a socket timeout that ends early is waited again).
fn read_until(stream: &TcpStream, deadline: Instant) -> io::Result<Option<[u8; REQUEST_LEN]>> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match memory::read_header::<REQUEST_LEN>(stream) {
            Err(e) if timed_out(&e) => continue,
            r => return r,
        }
    }
}

/// A same-host READ, already checked (and its PSNs taken): grants its whole
/// range, at `host` of `mr`, and acknowledges its last PSN once the
/// requester has copied it.
pub(super) fn cma_read(
    dev: &DeviceShared,
    stream: &TcpStream,
    req: &Request,
    mr: &MrInner,
    host: usize,
    pending: &mut Option<Request>,
) -> io::Result<()> {
    match grant(dev, stream, mr, host, req)? {
        Granted::Done => {
            let last = psn::add(req.psn, segments(req.msg_len) - 1);
            respond(stream, Response::ack(last))
        }
        Granted::Failed => Ok(()),
        Granted::Superseded(next) => {
            *pending = Some(next);
            Ok(())
        }
        Granted::Dead => respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0)),
    }
}
