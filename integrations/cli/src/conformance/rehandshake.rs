//! Re-handshake after the server restarts: a token of the old pair is
//! answered 421 (and moves nothing), then the client library's own flow
//! reconnects and the transfer succeeds. The suite restarts nothing unless
//! the operator gives it the command (`--restart-cmd`).

use std::process::Command;

use hipobj::Direction;

use super::ctx::{pattern, Ctx, GUARD};
use super::report::{
    expect, expect_bytes, CheckResult, Expect, Failure, Observed, Outcome, ReplyRule,
};
use super::{Check, Dialect};

const RULE: &str =
    "docs/protocol.md, The RC flow, 4. Reconnect (421, then a new handshake and one retry)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![Check::new(
        "rehandshake.after-restart",
        RULE,
        Dialect::Rc,
        after_restart,
    )]
}

fn after_restart(c: &mut Ctx) -> CheckResult {
    let Some(cmd) = c.restart_cmd.clone() else {
        return Ok(Outcome::Skip(
            "the suite may restart nothing (give --restart-cmd to run it)".into(),
        ));
    };
    let n = 65_536;
    let reg = c.buffer(n)?;
    // A pair, and a token of it, made before the restart.
    let token = c.token(&reg, Direction::Get, 0, n)?;
    let status = Command::new("sh")
        .args(["-c", &cmd])
        .status()
        .map_err(|e| Failure::error("running the restart command", e))?;
    if !status.success() {
        return Err(Failure::error(
            "running the restart command",
            format!("{cmd:?} exited with {status}"),
        ));
    }
    c.unpair();
    // The store may have gone with the server (the test server's does).
    match c.block(c.plain.create_bucket(&c.bucket)) {
        Ok(()) => {}
        Err(e) if e.status() == Some(409) => {}
        Err(e) => return Err(Failure::error("the bucket after the restart", e)),
    }
    let data = pattern(90, n);
    c.put_http("rehandshake", &data)?;
    let a = c.with_token(
        http::Method::GET,
        &c.path("rehandshake"),
        &token,
        hipobj_s3::RawAuth::Signed,
    )?;
    let want = Expect {
        status: 421,
        code: Some("RDMAConnectionUnknown"),
        reply: ReplyRule::Status(421),
    };
    expect(
        "GET with a token of the pair from before the restart",
        &a,
        want,
    )?;
    expect_bytes(
        "the buffer after the 421",
        &c.contents(&reg)?,
        &vec![GUARD; n],
    )?;
    // The library's flow: its pool's pairs are gone too; it must reconnect.
    let key = c.key("rehandshake");
    let got = c
        .block(c.s3.get_object(&c.bucket, &key, &reg, 0, None))
        .map_err(|e| Failure::error("GET through the client library after the restart", e))?;
    if got.bytes != n as u64 {
        return Err(Failure::new(
            "GET through the client library after the restart",
            format!("{n} bytes"),
            Observed::bytes(format!("{} bytes", got.bytes)),
        ));
    }
    expect_bytes("the buffer after the reconnect", &c.contents(&reg)?, &data)?;
    // And the raw flow: a new handshake, then a transfer.
    let reg2 = c.buffer(n)?;
    let g = c.rdma_get(&c.path("rehandshake"), &reg2, 0, n, &[])?;
    expect("GET on the new pair", &g, Expect::ok(200))?;
    expect_bytes("the buffer on the new pair", &c.contents(&reg2)?, &data)?;
    Ok(Outcome::Pass(
        "421 RDMAConnectionUnknown for the old pair, then the reconnect and the GET succeeded"
            .into(),
    ))
}
