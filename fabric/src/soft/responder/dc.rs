//! Requests for a DC target: the DC key, PSN order per target, and
//! WRITE and READ (a DC target takes no sends).

use super::access::{check_read, check_write, place, read_out, respond};
use crate::soft::memory;
use crate::soft::packet::{ReqOp, Request, Response, Syndrome, FLAG_CMA};
use crate::soft::psn;
use crate::soft::shared::{segments, DctInner, DeviceShared};
use std::collections::HashMap;
use std::io;
use std::net::TcpStream;

pub(super) fn dct_request(
    dev: &DeviceShared,
    dct: &DctInner,
    stream: &TcpStream,
    req: &Request,
    epsn_by_dct: &mut HashMap<u32, u32>,
) -> io::Result<()> {
    if req.dc_key != dct.key {
        // A wrong DC key is dropped and counted, never answered.
        dct.count_violation();
        return memory::drain(stream, req.seg_len as usize);
    }
    if req.flags & FLAG_CMA != 0 {
        // The same-host path is for RC; a DC initiator never asks for it.
        return respond(stream, Response::nak(req.psn, Syndrome::InvalidRequest, 0));
    }
    // A DC initiator's stream starts at whatever PSN it sends first.
    let epsn = epsn_by_dct.entry(dct.dctn).or_insert(req.psn);
    let d = psn::diff(req.psn, *epsn);
    if d > 0 {
        memory::drain(stream, req.seg_len as usize)?;
        return respond(stream, Response::nak(*epsn, Syndrome::Sequence, 0));
    }
    let access = dct.access;
    match req.op {
        ReqOp::ReadReq => {
            if check_read(dev, dct.pd_id, req, access).is_err() {
                return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
            }
            if d == 0 {
                *epsn = psn::add(req.psn, segments(req.msg_len));
            }
            read_out(dev, stream, req, dct.pd_id, access)
        }
        ReqOp::Write => {
            if d < 0 {
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::ack(psn::add(*epsn, psn::PSN_MASK)));
            }
            let Ok(target) = check_write(dev, dct.pd_id, req, u64::from(req.seg_len), access)
            else {
                memory::drain(stream, req.seg_len as usize)?;
                return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
            };
            if let Some((mr, host)) = target {
                if let Err(e) = place(dev, stream, &mr, host, req.seg_len as usize) {
                    if e.kind() != io::ErrorKind::NotFound {
                        return Err(e);
                    }
                    return respond(stream, Response::nak(req.psn, Syndrome::RemoteAccess, 0));
                }
            }
            *epsn = psn::add(req.psn, 1);
            respond(stream, Response::ack(req.psn))
        }
        _ => {
            // A DCT without a shared receive queue takes no sends.
            memory::drain(stream, req.seg_len as usize)?;
            respond(stream, Response::nak(req.psn, Syndrome::InvalidRequest, 0))
        }
    }
}
