//! The hipobj-rc-v2 dialect (`--dialect v2`): transfers through the
//! client's v2 flow (PREPARE, READY), and v2's own rules played with raw
//! control requests: an unsigned rdma header is refused, an unknown session
//! and a wrong cookie are 404, CANCEL twice is 200 both times and leaves
//! nothing to READY, a size over the protocol's cap is 400, and busy is a
//! 409 with `Retry-After` after which the session is still there. A server
//! that does not speak v2 (501 with `x-amz-rdma-protocol-status:
//! unsupported`, or an answer without the protocol echo) SKIPs them all.

use std::time::Duration;

use hipobj_s3::{RawAnswer, RawAuth, RawRequest};
use hipobj_wire::rc_v2::{
    self as v2, Cookie, Op, Prepare, PrepareAnswer, Psn, Ready, SessionId, Span, Staging, Target,
};
use hipobj_wire::Token;
use http::Method;

use super::ctx::{pattern, Ctx};
use super::report::{expect_bytes, CheckResult, Failure, Observed, Outcome};
use super::{Check, Dialect};

const RULE: &str = "docs/protocol.md, hipobj-rc-v2";
const CODES: &str = "docs/protocol.md, hipobj-rc-v2: status codes";

pub fn checks() -> Vec<Check> {
    vec![
        Check::new("v2.get.whole", RULE, Dialect::V2, |c| {
            get(c, "v2-get-whole", (3 << 20) + 5, None)
        }),
        Check::new("v2.get.range", RULE, Dialect::V2, |c| {
            let n = c.chunk + 3;
            get(c, "v2-get-range", n + 10, Some((7, n as u64)))
        }),
        Check::new("v2.put.whole", RULE, Dialect::V2, put),
        Check::new(
            "v2.status.unsigned-header.403",
            CODES,
            Dialect::V2,
            unsigned,
        ),
        Check::new("v2.status.size-over-cap.400", CODES, Dialect::V2, over_cap),
        Check::new("v2.status.unknown-session.404", CODES, Dialect::V2, unknown),
        Check::new(
            "v2.status.wrong-cookie.404",
            CODES,
            Dialect::V2,
            wrong_cookie,
        ),
        Check::new("v2.cancel.twice", CODES, Dialect::V2, cancel_twice),
        Check::new("v2.status.busy.409", CODES, Dialect::V2, busy),
    ]
}

/// Whether the server speaks v2: a PREPARE with a malformed size is
/// answered with the protocol echo unless v2 is declined.
fn speaks(c: &mut Ctx) -> Result<Option<String>, Failure> {
    if let Some(known) = &c.v2_declined {
        return Ok(known.clone());
    }
    let req = RawRequest::new(Method::POST, v2::PREPARE_PATH)
        .with_header(v2::H_PROTOCOL, v2::PROTOCOL)
        .map_err(|e| Failure::error("building PREPARE", e))?;
    let a = c.raw("PREPARE (is v2 spoken?)", req)?;
    let declined = if a.status == 501
        && a.header(v2::H_PROTOCOL_STATUS).as_deref() == Some(v2::UNSUPPORTED)
    {
        Some("the server declines hipobj-rc-v2 (501, unsupported)".to_string())
    } else if a.header(v2::H_PROTOCOL).as_deref() != Some(v2::PROTOCOL) {
        Some(format!(
            "the server does not speak hipobj-rc-v2 (PREPARE answered {} without the protocol echo)",
            a.status
        ))
    } else {
        None
    };
    c.v2_declined = Some(declined.clone());
    Ok(declined)
}

macro_rules! gate {
    ($c:expr) => {
        if let Some(why) = speaks($c)? {
            return Ok(Outcome::Skip(why));
        }
    };
}

fn v2_client(c: &Ctx) -> Result<hipobj_s3::S3Client, Failure> {
    c.v2.clone()
        .ok_or_else(|| Failure::error("the v2 client", "not configured"))
}

fn protocol_of(step: &str, o: &hipobj_s3::Outcome) -> Result<(), Failure> {
    if o.rdma_protocol != Some(v2::PROTOCOL) {
        return Err(Failure::error(
            step,
            format!(
                "the bytes were to move by hipobj-rc-v2; they moved by {:?} ({:?})",
                o.rdma_protocol, o.fallback_reason
            ),
        ));
    }
    Ok(())
}

/// GET of `len` bytes (or `range`: first and length) by v2.
fn get(c: &mut Ctx, name: &str, len: usize, range: Option<(u64, u64)>) -> CheckResult {
    gate!(c);
    let data = pattern(500 + len as u64, len);
    c.put_http(name, &data)?;
    let (first, n) = range.unwrap_or((0, len as u64));
    let reg = c.buffer(n as usize)?;
    let s3 = v2_client(c)?;
    let key = c.key(name);
    let o = c
        .block(s3.get_object(&c.bucket, &key, &reg, 0, range.map(|(f, n)| (f, f + n - 1))))
        .map_err(|e| Failure::error("v2 GET", e))?;
    protocol_of("v2 GET", &o)?;
    let back = c.contents(&reg)?;
    expect_bytes("v2 GET", &back, &data[first as usize..(first + n) as usize])?;
    Ok(Outcome::Pass(format!(
        "{n} bytes from offset {first} by hipobj-rc-v2, byte-exact (FINAL's cookie and checksum checked)"
    )))
}

fn put(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let len = (3 << 20) + 5;
    let data = pattern(600, len);
    let reg = c.buffer(len)?;
    c.fill(&reg, 0, &data)?;
    let s3 = v2_client(c)?;
    let key = c.key("v2-put-whole");
    let o = c
        .block(s3.put_object(&c.bucket, &key, &reg, 0, len))
        .map_err(|e| Failure::error("v2 PUT", e))?;
    protocol_of("v2 PUT", &o)?;
    if o.etag.is_none() {
        return Err(Failure::error("v2 PUT", "FINAL named no ETag"));
    }
    let back = c.get_http("v2-put-whole", hipobj_s3::Selection::Whole)?;
    expect_bytes("the object over plain HTTP", &back, &data)?;
    Ok(Outcome::Pass(format!(
        "{len} bytes by hipobj-rc-v2 (the client's WRITE_WITH_IMM), byte-exact over plain HTTP"
    )))
}

/// A random nonzero 32-bit cookie.
fn cookie() -> Cookie {
    loop {
        let mut b = [0u8; 4];
        if getrandom::fill(&mut b).is_ok() && u32::from_le_bytes(b) != 0 {
            return Cookie(u32::from_le_bytes(b));
        }
    }
}

/// The PREPARE of a GET of `len` bytes of `name`, naming the library's
/// token connection as the client QP (no data moves in these checks).
fn prepare_of(c: &mut Ctx, name: &str, len: u64) -> Result<Prepare, Failure> {
    let token = c
        .lib
        .handshake_token()
        .map_err(|e| Failure::error("a token naming a QP", e))?;
    let token = Token::decode(&token).map_err(|e| Failure::error("the token", e))?;
    Ok(Prepare {
        token,
        psn: Psn::new(0x1234).unwrap_or(Psn(1)),
        cookie: cookie(),
        op: Op::Get,
        target: Target {
            bucket: c.bucket.clone(),
            key: c.key(name),
            query: None,
        },
        span: Span::new(0, len).map_err(|e| Failure::error("the span", e))?,
    })
}

/// A control request of `headers` (the token, if any, as `auth` says).
fn control(
    c: &Ctx,
    step: &str,
    path: &str,
    headers: Vec<(&'static str, String)>,
    auth: RawAuth,
) -> Result<RawAnswer, Failure> {
    let mut req = RawRequest::new(Method::POST, path).with_auth(auth);
    for (k, v) in headers {
        req = if k == v2::H_TOKEN {
            req.with_token(v)
        } else {
            req.with_header(k, &v)
                .map_err(|e| Failure::error("building the request", e))?
        };
    }
    c.raw(step, req)
}

fn answer_of(step: &str, a: &RawAnswer) -> Result<PrepareAnswer, Failure> {
    if a.status != 200 {
        return Err(Failure::new(step, "200", Observed::of(a)));
    }
    let h: Vec<(String, String)> = a
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let view: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    PrepareAnswer::read(view.as_slice()).map_err(|e| Failure::error(step, e))
}

fn expect_status(
    step: &str,
    a: &RawAnswer,
    status: u16,
    code: Option<&str>,
) -> Result<(), Failure> {
    let code_ok = code.is_none_or(|want| a.code().as_deref() == Some(want));
    if a.status != status || !code_ok {
        let want = match code {
            Some(k) => format!("{status} {k}"),
            None => status.to_string(),
        };
        return Err(Failure::new(step, want, Observed::of(a)));
    }
    Ok(())
}

fn ready_of(p: &Prepare, session: SessionId, cookie: Cookie) -> Ready {
    Ready {
        session,
        cookie,
        qpn: p.token.qp_num,
        buffer: Some(Staging {
            addr: 0x1000,
            rkey: 1,
        }),
    }
}

fn unsigned(c: &mut Ctx) -> CheckResult {
    gate!(c);
    c.put_http("v2-unsigned", b"0123456789")?;
    let p = prepare_of(c, "v2-unsigned", 10)?;
    let a = control(
        c,
        "PREPARE, token unsigned",
        v2::PREPARE_PATH,
        p.headers(),
        RawAuth::TokenNotSigned,
    )?;
    expect_status(
        "PREPARE with x-amz-rdma-token outside the signature",
        &a,
        403,
        None,
    )?;
    Ok(Outcome::Pass(
        "403: an unsigned rdma header aims nothing".into(),
    ))
}

fn over_cap(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let p = prepare_of(c, "v2-over-cap", 1)?;
    let mut h = p.headers();
    for (k, v) in h.iter_mut() {
        if *k == v2::H_SIZE {
            *v = (v2::MAX_TRANSFER + 1).to_string();
        }
    }
    let a = control(c, "PREPARE", v2::PREPARE_PATH, h, RawAuth::Signed)?;
    expect_status("PREPARE of 2^31 bytes", &a, 400, None)?;
    Ok(Outcome::Pass("400 for a size over 2^31 - 1".into()))
}

fn unknown(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| Failure::error("randomness", e))?;
    let p = prepare_of(c, "v2-unknown", 1)?;
    let r = ready_of(&p, SessionId(id), p.cookie);
    let a = control(c, "READY", v2::READY_PATH, r.headers(), RawAuth::Signed)?;
    expect_status(
        "READY of a session never prepared",
        &a,
        404,
        Some("NoSuchRdmaSession"),
    )?;
    Ok(Outcome::Pass("404 NoSuchRdmaSession".into()))
}

/// PREPARE of a one-byte GET; the prepare and its answer.
fn prepared(c: &mut Ctx, name: &str) -> Result<(Prepare, PrepareAnswer), Failure> {
    c.put_http(name, b"x")?;
    let p = prepare_of(c, name, 1)?;
    let a = control(c, "PREPARE", v2::PREPARE_PATH, p.headers(), RawAuth::Signed)?;
    let ans = answer_of("PREPARE", &a)?;
    Ok((p, ans))
}

fn cancel(c: &Ctx, session: SessionId) -> Result<RawAnswer, Failure> {
    control(
        c,
        "CANCEL",
        v2::CANCEL_PATH,
        vec![
            (v2::H_PROTOCOL, v2::PROTOCOL.to_string()),
            (v2::H_SESSION, session.to_string()),
        ],
        RawAuth::Signed,
    )
}

fn wrong_cookie(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let (p, ans) = prepared(c, "v2-wrong-cookie")?;
    let wrong = Cookie(p.cookie.0 ^ 0x8000_0001);
    let a = control(
        c,
        "READY",
        v2::READY_PATH,
        ready_of(&p, ans.session, wrong).headers(),
        RawAuth::Signed,
    );
    let _ = cancel(c, ans.session);
    expect_status(
        "READY with another cookie",
        &a?,
        404,
        Some("NoSuchRdmaSession"),
    )?;
    Ok(Outcome::Pass(
        "404 NoSuchRdmaSession for a wrong cookie".into(),
    ))
}

fn cancel_twice(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let (p, ans) = prepared(c, "v2-cancel")?;
    expect_status("the first CANCEL", &cancel(c, ans.session)?, 200, None)?;
    expect_status("the second CANCEL", &cancel(c, ans.session)?, 200, None)?;
    let a = control(
        c,
        "READY",
        v2::READY_PATH,
        ready_of(&p, ans.session, p.cookie).headers(),
        RawAuth::Signed,
    )?;
    expect_status("READY after CANCEL", &a, 404, Some("NoSuchRdmaSession"))?;
    Ok(Outcome::Pass("200 and 200, then READY 404".into()))
}

/// Busy: one READY holds a data phase (its client QP never answers, so
/// the server's writes retry until they fail); a second session's READY
/// sent meanwhile may be refused with 409 and `Retry-After`, after which
/// the session must still be there (READY again is not 404 or 409).
fn busy(c: &mut Ctx) -> CheckResult {
    gate!(c);
    let (pa, a) = prepared(c, "v2-busy-a")?;
    let (pb, b) = prepared(c, "v2-busy-b")?;
    let s3 = c.s3.clone();
    let first = ready_of(&pa, a.session, pa.cookie);
    let held = c.handle().spawn(async move {
        let mut req = RawRequest::new(Method::POST, v2::READY_PATH);
        for (k, v) in first.headers() {
            req = req.with_header(k, &v).ok()?;
        }
        s3.raw(req).await.ok()
    });
    std::thread::sleep(Duration::from_millis(200));
    let rb = ready_of(&pb, b.session, pb.cookie);
    let second = control(
        c,
        "the second READY",
        v2::READY_PATH,
        rb.headers(),
        RawAuth::Signed,
    )?;
    let _ = c.block(held);
    let out = if second.status == 409 && second.header("retry-after").is_some() {
        let again = control(
            c,
            "READY again",
            v2::READY_PATH,
            rb.headers(),
            RawAuth::Signed,
        )?;
        if matches!(again.status, 404 | 409) {
            Err(Failure::new(
                "READY again after busy",
                "the session still prepared (neither 404 nor 409)",
                Observed::of(&again),
            ))
        } else {
            Ok(Outcome::Pass(format!(
                "409 with Retry-After, then READY again taken ({})",
                again.status
            )))
        }
    } else if second.status == 409 {
        Err(Failure::new(
            "the busy READY",
            "409 with Retry-After",
            Observed::of(&second),
        ))
    } else {
        Ok(Outcome::Skip(format!(
            "not busy with one data phase under way (the second READY: {}); a server with one data-phase slot (hipobj-gateway --rc-v2-ready-slots 1) exercises it",
            second.status
        )))
    };
    let _ = cancel(c, a.session);
    let _ = cancel(c, b.session);
    out
}
