//! The responder side: a thread per incoming connection that checks each
//! request against the target QP or DCT and its memory, as a NIC does,
//! places or reads the bytes, and answers with ACKs, NAKs and READ data.
//!
//! A request for a QP that is not in RTR or RTS, or that is connected to a
//! different peer, is dropped without an answer (its payload is read and
//! discarded): the requester's timer then retransmits and finally fails
//! with RETRY_EXC_ERR. A key, protection-domain, bounds or access failure
//! is answered with a remote-access NAK and moves the QP to ERR.

// In dependency order: each module uses only those above it.
mod access;
mod dc;
mod grant;
mod rc;

use crate::soft::cma;
use crate::soft::memory;
use crate::soft::packet::{
    self, Hello, HelloAck, ReqOp, Request, FLAG_CMA, HELLO_LEN, REQUEST_LEN,
};
use crate::soft::shared::{DeviceShared, Target};
use crate::soft::stats::Event;
use dc::dct_request;
use rc::rc_request;
use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// How long a new connection may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Reads and checks the hello a connection must open with, and answers it.
/// `None`: the stream is not a soft requester's (closed by the caller).
/// With the hello, whether the same-host path was offered.
fn accept_hello(dev: &DeviceShared, stream: &TcpStream) -> Option<(Hello, bool)> {
    let peer = stream.peer_addr().ok()?;
    stream.set_read_timeout(Some(HELLO_TIMEOUT)).ok()?;
    let hello = match memory::read_header::<HELLO_LEN>(stream) {
        Ok(Some(b)) => match packet::foreign_version(&b) {
            Some(theirs) => {
                tracing::warn!(
                    %peer,
                    theirs,
                    ours = packet::VERSION,
                    "soft responder: the requester speaks another soft wire version \
                     (another hipobj release: run the same one on both ends); closed"
                );
                // This provider's answer, whose version the requester
                // reports on its side in the same terms; nothing follows.
                let _ = memory::send_bytes(stream, &HelloAck::PLAIN.encode(), false);
                return None;
            }
            None => Hello::decode(&b),
        },
        _ => None,
    };
    let Some(hello) = hello else {
        tracing::warn!(%peer, "soft responder: a connection did not open with a hello; closed");
        return None;
    };
    // The GID a requester claims must be the address it connects from.
    let claimed = hello.src_gid.ipv4().map(std::net::IpAddr::V4);
    if claimed != Some(peer.ip()) {
        tracing::warn!(%peer, claimed = ?hello.src_gid, "soft responder: hello from another address than its GID; closed");
        return None;
    }
    stream.set_read_timeout(None).ok()?;
    let cma = dev.config.cma && cma::is_local(peer.ip(), std::net::IpAddr::V4(dev.ip));
    let ack = if cma {
        HelloAck {
            cma: true,
            pid: std::process::id(),
            // Non-negative: an open descriptor's number.
            fd: u32::try_from(std::os::fd::AsRawFd::as_raw_fd(stream)).unwrap_or(0),
        }
    } else {
        HelloAck::PLAIN
    };
    memory::send_bytes(stream, &ack.encode(), false).ok()?;
    tracing::trace!(%peer, dst = format_args!("{:#x}", hello.dst_qpn), dev = %dev.ip, cma, "soft responder: hello");
    Some((hello, cma))
}

/// Serves one connection until it closes.
pub(crate) fn serve(dev: Arc<DeviceShared>, stream: TcpStream, conn_id: u64) {
    let Some((hello, cma_offered)) = accept_hello(&dev, &stream) else {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        dev.unregister_conn(conn_id);
        return;
    };
    let mut dct_epsn: HashMap<u32, u32> = HashMap::new();
    let mut pending: Option<Request> = None;
    let r = loop {
        let req = match pending.take() {
            Some(r) => r,
            None => {
                let hdr = match memory::read_header::<REQUEST_LEN>(&stream) {
                    Ok(Some(h)) => h,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                let Some(req) = Request::decode(&hdr) else {
                    tracing::warn!("soft responder: malformed request; closing the connection");
                    break Ok(());
                };
                req
            }
        };
        if (req.flags & FLAG_CMA != 0 || req.op == ReqOp::CmaDone) && !cma_offered {
            tracing::warn!("soft responder: a same-host request where none was offered; closing the connection");
            break Ok(());
        }
        if req.op == ReqOp::CmaDone {
            // For a grant this responder no longer waits for.
            continue;
        }
        if req.src_gid != hello.src_gid
            || req.src_qpn != hello.src_qpn
            || req.dst_qpn != hello.dst_qpn
        {
            tracing::warn!(
                src_qpn = format_args!("{:#x}", req.src_qpn),
                dst_qpn = format_args!("{:#x}", req.dst_qpn),
                "soft responder: a request that is not the hello's; closing the connection"
            );
            break Ok(());
        }
        let no_target = || {
            dev.stats.count(Event::DroppedNoTarget);
            memory::drain(&stream, req.seg_len as usize)
        };
        let step = match dev.target(req.dst_qpn) {
            Some(Target::Rc(w)) => match w.upgrade() {
                Some(qp) => rc_request(&dev, &qp, &stream, &req, &mut pending),
                None => no_target(),
            },
            Some(Target::Dct(w)) => match w.upgrade() {
                Some(dct) => dct_request(&dev, &dct, &stream, &req, &mut dct_epsn),
                None => no_target(),
            },
            None => no_target(),
        };
        if let Err(e) = step {
            break Err(e);
        }
    };
    if let Err(e) = r {
        tracing::debug!(error = %e, "soft responder connection ended");
    }
    dev.unregister_conn(conn_id);
}
