//! The C ABI's adapter (`ffi::CallbackOpsV2`) against the same fake
//! server: C callbacks that read the `hipObjTransferReqV2_t`, send its
//! fields as headers and fill the reply structs from the answers.

use crate::error::OpError;
use crate::ffi::{
    CallbackOpsV2, HipObjFinalReplyV2, HipObjOps, HipObjOpsV2, HipObjPrepareReplyV2,
    HipObjTransferReqV2,
};
use crate::v2::tests::*;
use crate::v2::*;
use hipobj_wire::rc_v2::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

struct Ctx {
    server: FakeServer,
    endpoint_seen: Option<String>,
    ready_requests: usize,
    finishes: usize,
}

/// # Safety
///
/// `p` is NULL or NUL-terminated.
unsafe fn text(p: *const c_char) -> Option<String> {
    // SAFETY: the caller's promise.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn fill(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes()) {
        *d = b as c_char;
    }
}

unsafe extern "C" fn prepare(
    ctx: *mut c_void,
    req: *const HipObjTransferReqV2,
    out: *mut HipObjPrepareReplyV2,
) -> c_int {
    // SAFETY: the library passes the ctx given (a `Ctx`), a valid
    // request and a reply struct, for the duration of the call.
    let (c, r, out) = unsafe { (&mut *ctx.cast::<Ctx>(), &*req, &mut *out) };
    // SAFETY: the request's strings are NUL-terminated or NULL.
    let (token, method, target, ep) = unsafe {
        (
            text(r.token).unwrap_or_default(),
            text(r.method).unwrap_or_default(),
            text(r.target).unwrap_or_default(),
            r.endpoint.as_ref().and_then(|e| text(e.control_endpoint)),
        )
    };
    c.endpoint_seen = ep;
    let mut h: Fields = vec![
        (H_PROTOCOL, PROTOCOL.into()),
        (H_TOKEN, token),
        (H_PSN, format!("{:06x}", r.client_psn)),
        (H_COOKIE, format!("{:08x}", r.cookie)),
        (H_OP, method),
        (H_TARGET, target),
        (H_SIZE, r.size.to_string()),
    ];
    if r.offset != 0 {
        h.push((H_OFFSET, r.offset.to_string()));
    }
    let Ok(p) = Prepare::read(h.as_slice()) else {
        return -1;
    };
    let Ok(a) = c.server.prepare(&p, Duration::from_secs(1)) else {
        return -1;
    };
    out.http_status = c_int::from(a.status);
    out.protocol_echo = 1;
    if let Some(Ok(m)) = a.message {
        fill(&mut out.server_token, &m.server.encode());
        fill(&mut out.session, &m.session.to_string());
        out.server_psn = m.psn.0;
        if let Some(s) = m.staging {
            out.staging_addr = s.addr;
            out.staging_rkey = s.rkey;
            out.staging_present = 1;
        }
    }
    0
}

unsafe extern "C" fn ready_request(ctx: *mut c_void, _req: *const HipObjTransferReqV2) -> c_int {
    // SAFETY: the ctx given.
    let c = unsafe { &mut *ctx.cast::<Ctx>() };
    c.ready_requests += 1;
    0
}

unsafe extern "C" fn finish_ready(
    ctx: *mut c_void,
    req: *const HipObjTransferReqV2,
    out: *mut HipObjFinalReplyV2,
) -> c_int {
    // SAFETY: as in `prepare`.
    let (c, r, out) = unsafe { (&mut *ctx.cast::<Ctx>(), &*req, &mut *out) };
    c.finishes += 1;
    // SAFETY: NUL-terminated or NULL.
    let session = unsafe { text(r.session) }.unwrap_or_default();
    let mut h: Fields = vec![
        (H_PROTOCOL, PROTOCOL.into()),
        (H_SESSION, session),
        (H_COOKIE, format!("{:08x}", r.cookie)),
        (H_QPN, format!("{:x}", r.client_qpn)),
    ];
    if r.client_mr_addr != 0 {
        h.push((H_MR_ADDR, format!("{:x}", r.client_mr_addr)));
        h.push((H_MR_RKEY, format!("{:x}", r.client_mr_rkey)));
    }
    let Ok(ready) = Ready::read(h.as_slice()) else {
        return -1;
    };
    let Ok(a) = c.server.ready(&ready, Duration::from_secs(1)) else {
        return -1;
    };
    out.http_status = c_int::from(a.status);
    out.protocol_echo = 1;
    if let Some(Ok(f)) = a.message {
        out.bytes = f.bytes;
        out.cookie_echo = f.cookie.0;
        out.cookie_present = 1;
        if let Some(e) = &f.etag {
            fill(&mut out.etag, e);
        }
        if let Some(crc) = f.checksum {
            fill(
                &mut out.checksum_b64,
                &hipobj_wire::checksum::crc64nvme_value(crc),
            );
        }
    }
    0
}

unsafe extern "C" fn cancel(ctx: *mut c_void, req: *const HipObjTransferReqV2) -> c_int {
    // SAFETY: as in `prepare`.
    let (c, r) = unsafe { (&mut *ctx.cast::<Ctx>(), &*req) };
    // SAFETY: NUL-terminated or NULL.
    let session = unsafe { text(r.session) }.unwrap_or_default();
    let Ok(s) = SessionId::parse(&session) else {
        return -1;
    };
    let _ = c.server.cancel(s, Cookie(r.cookie), Duration::from_secs(1));
    0
}

fn ops() -> HipObjOpsV2 {
    HipObjOpsV2 {
        v1: HipObjOps {
            send_request: None,
            recv_reply: None,
        },
        send_prepare: Some(prepare),
        send_ready_request: Some(ready_request),
        finish_ready: Some(finish_ready),
        send_cancel: Some(cancel),
    }
}

fn adapter(ops: &HipObjOpsV2, ctx: &mut Ctx) -> CallbackOpsV2 {
    CallbackOpsV2::new(
        Some(ops),
        (ctx as *mut Ctx).cast::<c_void>(),
        Some(c"http://127.0.0.1:9".to_owned()),
        "soft0",
        1,
        0,
    )
    .unwrap()
}

#[test]
fn get_and_put_through_the_c_callbacks() {
    let lib = lib();
    let want = pattern(70_000, 11);
    let mut ctx = Ctx {
        server: FakeServer::new(),
        endpoint_seen: None,
        ready_requests: 0,
        finishes: 0,
    };
    ctx.server.objects.insert("obj".into(), want.clone());
    let ops = ops();
    let mut mem = vec![0u8; 70_000];
    let buf = lib.register_host(&mut mem).unwrap();
    let mut a = adapter(&ops, &mut ctx);
    buf.get_v2(&whole("obj", 70_000), &mut a).unwrap();
    let mut a = adapter(&ops, &mut ctx);
    buf.put_v2(&whole("back", 70_000), &mut a).unwrap();
    drop(buf);
    assert!(mem == want);
    assert!(ctx.server.objects["back"] == want);
    assert_eq!((ctx.ready_requests, ctx.finishes), (2, 2));
    assert_eq!(ctx.endpoint_seen.as_deref(), Some("http://127.0.0.1:9"));
    assert!(ctx.server.cancels.is_empty());

    // A wrong cookie echo through the structs: refused, cancelled once.
    ctx.server.faults.wrong_cookie = true;
    let mut mem = vec![0u8; 100];
    let buf = lib.register_host(&mut mem).unwrap();
    let mut a = adapter(&ops, &mut ctx);
    let e = buf.get_v2(&whole("obj", 100), &mut a).unwrap_err();
    assert_eq!(e.op, OpError::RdmaError, "{e}");
    assert_eq!(ctx.server.cancels.len(), 1);
}

#[test]
fn a_missing_callback_is_invalid() {
    let mut o = ops();
    o.finish_ready = None;
    let e = CallbackOpsV2::new(Some(&o), std::ptr::null_mut(), None, "soft0", 1, 0).unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
    let e = CallbackOpsV2::new(None, std::ptr::null_mut(), None, "soft0", 1, 0).unwrap_err();
    assert_eq!(e.op, OpError::InvalidValue);
}
