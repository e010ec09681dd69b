//! What RC and DC requests share: the checks of a remote access against
//! the device's live regions, placing a segment's payload, sending READ
//! data, and answering.

use crate::soft::hooks;
use crate::soft::memory::{self, dead_region, MrInner};
use crate::soft::packet::{Request, Response, Syndrome, FLAG_FIRST, SEGMENT};
use crate::soft::psn;
use crate::soft::shared::{segments, DeviceShared};
use crate::soft::stats::Gauge;
use crate::types::AccessFlags;
use std::io;
use std::net::TcpStream;
use std::sync::Arc;

/// Sends one response.
pub(super) fn respond(stream: &TcpStream, r: Response) -> io::Result<()> {
    memory::send_bytes(stream, &r.encode(), false)
}

/// Checks a remote access of `len` bytes at `va` through key `rkey`.
/// A zero-length access needs no valid key, as in the IB specification.
pub(super) fn check_remote(
    dev: &DeviceShared,
    pd_id: u64,
    rkey: u32,
    va: u64,
    len: u64,
    need: AccessFlags,
    qp_access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    if len == 0 {
        return Ok(None);
    }
    let mr = dev.mr(rkey).ok_or(())?;
    let host = mr.check(pd_id, va, len, need, qp_access).map_err(|_| ())?;
    Ok(Some((mr, host)))
}

/// Checks a WRITE request's range of `len` bytes from `va` (its segment,
/// or what a same-host request covers); on the first segment also the whole
/// message, whose length it carries (RETH).
pub(super) fn check_write(
    dev: &DeviceShared,
    pd_id: u64,
    req: &Request,
    len: u64,
    access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    if req.flags & FLAG_FIRST != 0 {
        check_remote(
            dev,
            pd_id,
            req.rkey,
            req.va,
            req.msg_len,
            AccessFlags::REMOTE_WRITE,
            access,
        )?;
    }
    check_remote(
        dev,
        pd_id,
        req.rkey,
        req.va,
        len,
        AccessFlags::REMOTE_WRITE,
        access,
    )
}

/// Checks a READ request's whole range.
pub(super) fn check_read(
    dev: &DeviceShared,
    pd_id: u64,
    req: &Request,
    access: AccessFlags,
) -> Result<Option<(Arc<MrInner>, usize)>, ()> {
    check_remote(
        dev,
        pd_id,
        req.rkey,
        req.va,
        req.msg_len,
        AccessFlags::REMOTE_READ,
        access,
    )
}

/// Runs `f`, which moves the `len` bytes at `host` of `mr`, while the
/// region stays registered (its guard held), counted as an access in
/// flight; `None` if it has been deregistered. A `testing` gate may stop
/// the thread here first, guard held.
pub(super) fn while_accessing<R>(
    dev: &DeviceShared,
    mr: &MrInner,
    host: usize,
    len: usize,
    f: impl FnOnce() -> R,
) -> Option<R> {
    mr.while_live(|| {
        let _in_flight = dev.stats.up(Gauge::AccessesInFlight);
        hooks::responder_access(mr, host, len);
        f()
    })
}

/// Receives a segment's payload into `host` of live region `mr`.
pub(super) fn place(
    dev: &DeviceShared,
    stream: &TcpStream,
    mr: &MrInner,
    host: usize,
    len: usize,
) -> io::Result<()> {
    // SAFETY: `host..host + len` was checked to lie inside `mr`, which is
    // registered for remote write; its live guard is held for the call.
    while_accessing(dev, mr, host, len, || unsafe {
        memory::recv_into(stream, host, len)
    })
    .unwrap_or_else(|| Err(dead_region()))
}

/// Sends READ data for the request `req` (already checked), segment by
/// segment, starting at PSN `req.psn`.
pub(super) fn read_out(
    dev: &DeviceShared,
    stream: &TcpStream,
    req: &Request,
    pd_id: u64,
    qp_access: AccessFlags,
) -> io::Result<()> {
    let n = segments(req.msg_len);
    for k in 0..n {
        let off = u64::from(k) * u64::from(SEGMENT);
        let len = (req.msg_len - off).min(u64::from(SEGMENT)) as u32;
        let p = psn::add(req.psn, k);
        let va = req.va.wrapping_add(off);
        // Checked again per segment: a region deregistered mid-read stops it.
        let target = check_remote(
            dev,
            pd_id,
            req.rkey,
            va,
            u64::from(len),
            AccessFlags::REMOTE_READ,
            qp_access,
        );
        match target {
            Err(()) => return respond(stream, Response::nak(p, Syndrome::RemoteAccess, 0)),
            Ok(None) => respond(stream, Response::read(p, 0))?,
            Ok(Some((mr, host))) => {
                let sent = while_accessing(dev, &mr, host, len as usize, || {
                    memory::send_bytes(stream, &Response::read(p, len).encode(), true)?;
                    // SAFETY: the range lies inside `mr`, which allows remote
                    // reads; its live guard is held for the call.
                    unsafe { memory::send_from(stream, host, len as usize, false) }
                });
                match sent {
                    Some(r) => r?,
                    None => return respond(stream, Response::nak(p, Syndrome::RemoteAccess, 0)),
                }
            }
        }
    }
    Ok(())
}
