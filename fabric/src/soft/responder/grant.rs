//! The same-host path on the responder side: granting a checked range to
//! the requester's process and keeping the region registered until the
//! requester says it has copied it.

use super::access::respond;
use crate::soft::memory::{self, MrInner};
use crate::soft::packet::{
    ReqOp, Request, Response, Syndrome, CMA_FAILED, CMA_GRANT_LEN, REQUEST_LEN,
};
use crate::soft::psn;
use crate::soft::shared::segments;
use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// How long a same-host grant keeps its region registered waiting for the
/// requester's done (the copy of at most 2 GiB between two processes);
/// after it the connection is closed.
const CMA_DONE_TIMEOUT: Duration = Duration::from_secs(30);

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
/// request `req`, and keeps the region registered until its answer.
pub(super) fn grant(
    stream: &TcpStream,
    mr: &MrInner,
    host: usize,
    req: &Request,
) -> io::Result<Granted> {
    let nonce = req.imm;
    let held = mr.while_live(|| -> io::Result<Granted> {
        let mut payload = [0u8; CMA_GRANT_LEN as usize];
        payload[0..8].copy_from_slice(&(host as u64).to_le_bytes());
        payload[8..12].copy_from_slice(&nonce.to_le_bytes());
        memory::send_bytes(stream, &Response::cma_grant(req.psn).encode(), true)?;
        memory::send_bytes(stream, &payload, false)?;
        stream.set_read_timeout(Some(CMA_DONE_TIMEOUT))?;
        let next = memory::read_header::<REQUEST_LEN>(stream);
        stream.set_read_timeout(None)?;
        let Some(hdr) = next? else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        let Some(r) = Request::decode(&hdr) else {
            return Err(io::Error::other(
                "malformed request after a same-host grant",
            ));
        };
        if r.op == ReqOp::CmaDone && r.psn == req.psn && r.rkey == nonce {
            return Ok(if r.imm == CMA_FAILED {
                Granted::Failed
            } else {
                Granted::Done
            });
        }
        Ok(Granted::Superseded(r))
    });
    held.unwrap_or(Ok(Granted::Dead))
}

/// A same-host READ, already checked (and its PSNs taken): grants its whole
/// range, at `host` of `mr`, and acknowledges its last PSN once the
/// requester has copied it.
pub(super) fn cma_read(
    stream: &TcpStream,
    req: &Request,
    mr: &MrInner,
    host: usize,
    pending: &mut Option<Request>,
) -> io::Result<()> {
    match grant(stream, mr, host, req)? {
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
