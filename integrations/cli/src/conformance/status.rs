//! The status table: what the server answers when a token request is
//! wrong, and that it moves no bytes then (the buffer's guard bytes stay).

use hipobj::Direction;
use hipobj_s3::{RawAuth, RawRequest};
use hipobj_wire::headers::CHECKSUM_CRC64NVME;
use hipobj_wire::Token;
use http::Method;

use super::ctx::{crc, pattern, Ctx, GUARD};
use super::report::{
    expect, expect_bytes, CheckResult, Expect, Failure, Observed, Outcome, ReplyRule,
};
use super::{Check, Dialect};

const TABLE: &str = "docs/protocol.md, The server's answers";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new("status.unsigned.403", TABLE, Dialect::Rc, |c| {
            refused_auth(c, RawAuth::Anonymous)
        }),
        Check::new("status.token-not-signed.403", TABLE, Dialect::Rc, |c| {
            refused_auth(c, RawAuth::TokenNotSigned)
        }),
        Check::new("status.malformed-token.400", TABLE, Dialect::Rc, malformed),
        Check::new("status.buffer-too-small.400", TABLE, Dialect::Rc, too_small),
        Check::new(
            "status.checksum-mismatch.400",
            TABLE,
            Dialect::Rc,
            bad_digest,
        ),
        Check::new("status.other-operation.501", TABLE, Dialect::Rc, other_op),
        Check::new("status.unknown-pair.421", TABLE, Dialect::Rc, unknown_pair),
        Check::new("status.other-key.403", TABLE, Dialect::Rc, other_key),
    ]
}

const N: usize = 100_000;

/// An object `name` of [`N`] bytes, and a buffer of guard bytes for it.
fn object_and_buffer(
    c: &mut Ctx,
    name: &str,
) -> Result<hipobj::Registered<'static, 'static>, Failure> {
    c.put_http(name, &pattern(70, N))?;
    c.buffer(N + 64)
}

/// Nothing was written into `reg`.
fn untouched(step: &str, c: &Ctx, reg: &hipobj::Registered<'_, '_>) -> Result<(), Failure> {
    expect_bytes(step, &c.contents(reg)?, &vec![GUARD; reg.len()])
}

/// A GET token on a request without a signature, or whose signature does
/// not cover the token: 403 AccessDenied, no bytes moved.
fn refused_auth(c: &mut Ctx, auth: RawAuth) -> CheckResult {
    let name = format!("auth-{auth:?}");
    let reg = object_and_buffer(c, &name)?;
    let token = c.token(&reg, Direction::Get, 0, N)?;
    let a = c.with_token(Method::GET, &c.path(&name), &token, auth)?;
    let want = Expect {
        status: 403,
        code: Some("AccessDenied"),
        reply: ReplyRule::AbsentOrStatus,
    };
    expect("GET", &a, want)?;
    untouched("the buffer (no RDMA may happen)", c, &reg)?;
    Ok(Outcome::Pass(format!(
        "403 {}, nothing written",
        a.code().unwrap_or_default()
    )))
}

/// A token no dialect parses: 400 InvalidRDMAToken.
fn malformed(c: &mut Ctx) -> CheckResult {
    c.put_http("malformed", b"x")?;
    let a = c.with_token(
        Method::GET,
        &c.path("malformed"),
        "not-a-token",
        RawAuth::Signed,
    )?;
    let want = Expect {
        status: 400,
        code: Some("InvalidRDMAToken"),
        reply: ReplyRule::AbsentOrStatus,
    };
    expect("GET with x-amz-rdma-token: not-a-token", &a, want)?;
    Ok(Outcome::Pass("400 InvalidRDMAToken".into()))
}

/// The object is one byte longer than the token's buffer, which has guard
/// bytes after it in the same registration: 400 InvalidRDMABufferSize,
/// reply 400, nothing written past the buffer.
fn too_small(c: &mut Ctx) -> CheckResult {
    let reg = object_and_buffer(c, "too-small")?;
    let path = c.path("too-small");
    let a = c.rdma_get(&path, &reg, 0, N - 1, &[])?;
    let after = c.contents(&reg)?;
    let past = after[N - 1..].iter().position(|b| *b != GUARD);
    let want = Expect {
        status: 400,
        code: Some("InvalidRDMABufferSize"),
        reply: ReplyRule::Status(400),
    };
    let r = expect("GET of 100000 bytes into 99999", &a, want);
    if let Some(p) = past {
        let mut got = Observed::of(&a);
        got.bytes = Some(format!("byte {} past the buffer's end was written", p + 1));
        return Err(Failure::new(
            "the guard bytes after the buffer",
            "status 400, code InvalidRDMABufferSize, nothing written past the buffer",
            got,
        ));
    }
    r?;
    Ok(Outcome::Pass(
        "400 InvalidRDMABufferSize, reply 400, nothing past the buffer".into(),
    ))
}

/// A PUT whose declared CRC-64/NVME is not the bytes': 400 BadDigest,
/// reply 400, and no object.
fn bad_digest(c: &mut Ctx) -> CheckResult {
    let data = pattern(71, N);
    let reg = c.buffer(N)?;
    c.fill(&reg, 0, &data)?;
    let path = c.path("bad-digest");
    let wrong = crc(&pattern(72, N));
    let a = c.rdma_put(&path, &reg, 0, N, &[(CHECKSUM_CRC64NVME, &wrong)])?;
    let want = Expect {
        status: 400,
        code: Some("BadDigest"),
        reply: ReplyRule::Status(400),
    };
    expect("PUT with a wrong x-amz-checksum-crc64nvme", &a, want)?;
    if c.exists("bad-digest")? {
        return Err(Failure::new(
            "HEAD after the refused PUT",
            "404: no object stored",
            Observed::bytes("the object exists"),
        ));
    }
    Ok(Outcome::Pass(
        "400 BadDigest, reply 400, no object stored".into(),
    ))
}

/// A (non-handshake) token on ListObjectsV2: 501 NotImplemented, reply 501.
fn other_op(c: &mut Ctx) -> CheckResult {
    let reg = c.buffer(4096)?;
    let token = c.token(&reg, Direction::Get, 0, 4096)?;
    let a = c.with_token(
        Method::GET,
        &format!("/{}?list-type=2", c.bucket),
        &token,
        RawAuth::Signed,
    )?;
    let want = Expect {
        status: 501,
        code: Some("NotImplemented"),
        reply: ReplyRule::Status(501),
    };
    expect("ListObjectsV2 with a token", &a, want)?;
    untouched("the buffer", c, &reg)?;
    Ok(Outcome::Pass("501 NotImplemented, reply 501".into()))
}

/// A GET token naming a client QP the server never paired with: 421
/// RDMAConnectionUnknown, reply 421, nothing written.
fn unknown_pair(c: &mut Ctx) -> CheckResult {
    let reg = object_and_buffer(c, "unknown-pair")?;
    let token = c.token(&reg, Direction::Get, 0, N)?;
    let mut t = Token::decode(&token).map_err(|e| Failure::error("decoding our token", e))?;
    t.qp_num = 0xff_ffff - (t.qp_num & 0xff);
    let a = c.with_token(
        Method::GET,
        &c.path("unknown-pair"),
        &t.encode(),
        RawAuth::Signed,
    )?;
    let want = Expect {
        status: 421,
        code: Some("RDMAConnectionUnknown"),
        reply: ReplyRule::Status(421),
    };
    expect("GET naming an unpaired QP", &a, want)?;
    untouched("the buffer", c, &reg)?;
    Ok(Outcome::Pass("421 RDMAConnectionUnknown, reply 421".into()))
}

/// A token of the pair made under the suite's key, signed with another
/// key: 403 AccessDenied, reply 403, nothing written.
fn other_key(c: &mut Ctx) -> CheckResult {
    let Some(alt) = c.alt.clone() else {
        return Ok(Outcome::Skip(
            "needs a second key pair (--alt-access-key, --alt-secret-key)".into(),
        ));
    };
    let reg = object_and_buffer(c, "other-key")?;
    let token = c.token(&reg, Direction::Get, 0, N)?;
    let req = RawRequest::new(Method::GET, c.path("other-key")).with_token(token);
    let a = c.raw_with(&alt, "GET signed with the other key", req)?;
    let want = Expect {
        status: 403,
        code: Some("AccessDenied"),
        reply: ReplyRule::Status(403),
    };
    expect("GET on a pair of another key", &a, want)?;
    untouched("the buffer", c, &reg)?;
    Ok(Outcome::Pass("403 AccessDenied, reply 403".into()))
}
