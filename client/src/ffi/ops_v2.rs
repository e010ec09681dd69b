//! The application's `hipObjOpsV2_t` callbacks and context as a
//! [`V2Ops`]: each request is laid out as a `hipObjTransferReqV2_t`, and
//! each reply struct the application filled is turned back into headers
//! and read by the wire crate, so a C reply is checked exactly as an HTTP
//! answer would be.

use super::types::{
    FinishReadyFn, HipObjControlEndpointV2, HipObjFinalReplyV2, HipObjOpsV2, HipObjPrepareReplyV2,
    HipObjTransferReqV2, SendCancelFn, SendPrepareFn, SendReadyRequestFn,
};
use crate::error::{Error, Result};
use crate::v2::{V2Ops, V2Response};
use hipobj_wire::rc_v2::{
    Cookie, Final, Prepare, PrepareAnswer, Ready, SessionId, H_BYTES, H_CHECKSUM, H_COOKIE, H_ETAG,
    H_MR_ADDR, H_MR_RKEY, H_PROTOCOL, H_PROTOCOL_STATUS, H_PSN, H_REPLY, H_SESSION, H_VERSION_ID,
    PROTOCOL, UNSUPPORTED,
};
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr;
use std::time::Duration;

/// The strings of the transfer the requests describe, kept for the calls.
#[derive(Debug, Default)]
struct Strings {
    method: CString,
    bucket: CString,
    key: CString,
    query: Option<CString>,
    token: CString,
    target: CString,
}

/// `hipObjOpsV2_t` and its `ctx`, checked: every callback is present.
#[derive(Debug)]
pub struct CallbackOpsV2 {
    prepare: SendPrepareFn,
    ready_request: SendReadyRequestFn,
    finish_ready: FinishReadyFn,
    cancel: SendCancelFn,
    ctx: *mut c_void,
    endpoint: Option<CString>,
    nic: CString,
    nic_port: c_int,
    nic_gid_index: c_int,
    strings: Strings,
    size: u64,
    offset: u64,
    cookie: u32,
    psn: u32,
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} has a NUL")))
}

/// Milliseconds, saturated to `u32`.
fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// A C array's text: up to the first NUL (the whole array if none), or
/// `None` if it is not UTF-8.
fn array_str(a: &[c_char]) -> Option<String> {
    let bytes: Vec<u8> = a.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8(bytes).ok()
}

/// The status as a `u16` (0, which nothing accepts, for a value outside).
fn status(s: c_int) -> u16 {
    u16::try_from(s).unwrap_or(0)
}

impl CallbackOpsV2 {
    /// Checks `ops` (NULL, or any NULL callback, is `hipObjInvalidValue`).
    /// The callbacks are then called only through [`V2Ops`], under the
    /// header's contract.
    pub fn new(
        ops: Option<&HipObjOpsV2>,
        ctx: *mut c_void,
        endpoint: Option<CString>,
        nic: &str,
        nic_port: u8,
        nic_gid_index: u8,
    ) -> Result<CallbackOpsV2> {
        let ops = ops.ok_or_else(|| Error::invalid("ops is NULL"))?;
        Ok(CallbackOpsV2 {
            prepare: ops
                .send_prepare
                .ok_or_else(|| Error::invalid("ops->sendPrepare is NULL"))?,
            ready_request: ops
                .send_ready_request
                .ok_or_else(|| Error::invalid("ops->sendReadyRequest is NULL"))?,
            finish_ready: ops
                .finish_ready
                .ok_or_else(|| Error::invalid("ops->finishReady is NULL"))?,
            cancel: ops
                .send_cancel
                .ok_or_else(|| Error::invalid("ops->sendCancel is NULL"))?,
            ctx,
            endpoint,
            nic: cstring(nic, "the NIC name")?,
            nic_port: c_int::from(nic_port),
            nic_gid_index: c_int::from(nic_gid_index),
            strings: Strings::default(),
            size: 0,
            offset: 0,
            cookie: 0,
            psn: 0,
        })
    }

    /// The request every callback gets; `session` and `ep` must outlive
    /// its use.
    fn request(
        &self,
        session: Option<&CString>,
        ep: &HipObjControlEndpointV2,
        remaining: Duration,
    ) -> HipObjTransferReqV2 {
        let s = &self.strings;
        HipObjTransferReqV2 {
            method: s.method.as_ptr(),
            bucket: s.bucket.as_ptr(),
            key: s.key.as_ptr(),
            query: s.query.as_ref().map_or(ptr::null(), |q| q.as_ptr()),
            token: s.token.as_ptr(),
            session: session.map_or(ptr::null(), |c| c.as_ptr()),
            target: s.target.as_ptr(),
            size: self.size,
            offset: self.offset,
            cookie: self.cookie,
            client_psn: self.psn,
            deadline_ms: ms(remaining),
            remaining_ms: ms(remaining),
            endpoint: if self.endpoint.is_some() {
                ep as *const HipObjControlEndpointV2
            } else {
                ptr::null()
            },
            nic: self.nic.as_ptr(),
            nic_port: self.nic_port,
            nic_gid_index: self.nic_gid_index,
            client_qpn: 0,
            client_mr_addr: 0,
            client_mr_rkey: 0,
        }
    }

    fn endpoint(&self) -> HipObjControlEndpointV2 {
        HipObjControlEndpointV2 {
            control_endpoint: self.endpoint.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
        }
    }
}

impl V2Ops for CallbackOpsV2 {
    fn prepare(
        &mut self,
        req: &Prepare,
        remaining: Duration,
    ) -> std::result::Result<V2Response<PrepareAnswer>, i32> {
        let t = &req.target;
        self.strings = Strings {
            method: cstring(req.op.as_str(), "method").map_err(|_| -1)?,
            bucket: cstring(&t.bucket, "bucket").map_err(|_| -1)?,
            key: cstring(&t.key, "key").map_err(|_| -1)?,
            query: match &t.query {
                Some(q) => Some(cstring(q, "query").map_err(|_| -1)?),
                None => None,
            },
            token: cstring(&req.token.encode(), "token").map_err(|_| -1)?,
            target: cstring(&t.encode(), "target").map_err(|_| -1)?,
        };
        self.size = req.span.size;
        self.offset = req.span.offset;
        self.cookie = req.cookie.0;
        self.psn = req.psn.0;
        let ep = self.endpoint();
        let r = self.request(None, &ep, remaining);
        // SAFETY: all-zero bytes are a valid `hipObjPrepareReplyV2_t`
        // (integers and character arrays).
        let mut out: HipObjPrepareReplyV2 = unsafe { std::mem::zeroed() };
        // SAFETY: the application's callback, given its own ctx, a request
        // whose pointers (into `self`, `ep`) live until it returns, and a
        // reply struct to fill, as the header documents for sendPrepare.
        let rc = unsafe { (self.prepare)(self.ctx, &r, &mut out) };
        if rc < 0 {
            return Err(rc);
        }
        let mut h: Vec<(&'static str, String)> = Vec::new();
        if out.protocol_echo != 0 {
            h.push((H_PROTOCOL, PROTOCOL.to_string()));
        }
        if out.unsupported_marker != 0 {
            h.push((H_PROTOCOL_STATUS, UNSUPPORTED.to_string()));
        }
        let token = array_str(&out.server_token).unwrap_or_default();
        if !token.is_empty() {
            h.push((H_REPLY, format!("200:{token}")));
        }
        let session = array_str(&out.session).unwrap_or_default();
        if !session.is_empty() {
            h.push((H_SESSION, session));
        }
        if out.server_psn != 0 {
            h.push((H_PSN, format!("{:06x}", out.server_psn)));
        }
        if out.staging_present != 0 {
            h.push((H_MR_ADDR, format!("{:x}", out.staging_addr)));
            h.push((H_MR_RKEY, format!("{:x}", out.staging_rkey)));
        }
        Ok(V2Response::from_headers(
            status(out.http_status),
            h.as_slice(),
        ))
    }

    fn ready(
        &mut self,
        req: &Ready,
        remaining: Duration,
    ) -> std::result::Result<V2Response<Final>, i32> {
        let session = cstring(&req.session.to_string(), "session").map_err(|_| -1)?;
        let ep = self.endpoint();
        let mut r = self.request(Some(&session), &ep, remaining);
        r.client_qpn = req.qpn;
        if let Some(b) = req.buffer {
            r.client_mr_addr = b.addr;
            r.client_mr_rkey = b.rkey;
        }
        // SAFETY: the application's callback with its ctx and a request
        // whose pointers live until it returns (sendReadyRequest).
        let rc = unsafe { (self.ready_request)(self.ctx, &r) };
        if rc < 0 {
            return Err(rc);
        }
        // SAFETY: all-zero bytes are a valid `hipObjFinalReplyV2_t`.
        let mut out: HipObjFinalReplyV2 = unsafe { std::mem::zeroed() };
        // SAFETY: the application's callback with its ctx, the same
        // request and a reply struct to fill (finishReady).
        let rc = unsafe { (self.finish_ready)(self.ctx, &r, &mut out) };
        if rc < 0 {
            return Err(rc);
        }
        let mut h: Vec<(&'static str, String)> = Vec::new();
        if out.protocol_echo != 0 {
            h.push((H_PROTOCOL, PROTOCOL.to_string()));
        }
        h.push((H_BYTES, out.bytes.to_string()));
        if out.cookie_present != 0 {
            h.push((H_COOKIE, format!("{:08x}", out.cookie_echo)));
        }
        for (name, v) in [(H_ETAG, &out.etag[..]), (H_VERSION_ID, &out.version_id[..])] {
            match array_str(v) {
                Some(s) if s.is_empty() => {}
                Some(s) => h.push((name, s)),
                // Not UTF-8: passed on as a control character, which the
                // reader refuses.
                None => h.push((name, "\u{1}".to_string())),
            }
        }
        match array_str(&out.checksum_b64) {
            Some(s) if s.is_empty() => {}
            Some(s) => h.push((H_CHECKSUM, format!("CRC64NVME {s}"))),
            None => h.push((H_CHECKSUM, "CRC64NVME ?".to_string())),
        }
        Ok(V2Response::from_headers(
            status(out.http_status),
            h.as_slice(),
        ))
    }

    fn cancel(
        &mut self,
        session: SessionId,
        _cookie: Cookie,
        remaining: Duration,
    ) -> std::result::Result<u16, i32> {
        let session = cstring(&session.to_string(), "session").map_err(|_| -1)?;
        let ep = self.endpoint();
        let r = self.request(Some(&session), &ep, remaining);
        // SAFETY: the application's callback with its ctx and a request
        // whose pointers live until it returns (sendCancel).
        let rc = unsafe { (self.cancel)(self.ctx, &r) };
        if rc < 0 {
            Err(rc)
        } else {
            Ok(200)
        }
    }
}
