//! No partial object after a failed RDMA PUT: an object already stored
//! under the key stays as it was, byte for byte, whether the PUT failed on
//! its checksum (400) or in the fabric (a wrong rkey: 500).

use hipobj::Direction;
use hipobj_s3::{RawRequest, Selection};
use hipobj_wire::headers::CHECKSUM_CRC64NVME;
use hipobj_wire::Token;
use http::Method;

use super::ctx::{crc, pattern, Ctx};
use super::report::{expect, expect_bytes, CheckResult, Expect, Failure, Outcome, ReplyRule};
use super::{Check, Dialect};

const RULE: &str = "docs/protocol.md, The server's answers: a declared checksum that does not match (the store keeps no object), an RDMA work request failed (a PUT leaves nothing behind)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![Check::new(
        "put.failed.old-intact",
        RULE,
        Dialect::Rc,
        old_intact,
    )]
}

fn old_intact(c: &mut Ctx) -> CheckResult {
    let n = 200_000;
    let old = pattern(80, n);
    c.put_http("old-intact", &old)?;
    let new = pattern(81, n);
    let reg = c.buffer(n)?;
    c.fill(&reg, 0, &new)?;
    let path = c.path("old-intact");

    // 1. The checksum of other bytes.
    let wrong = crc(&old);
    let a = c.rdma_put(&path, &reg, 0, n, &[(CHECKSUM_CRC64NVME, &wrong)])?;
    let want = Expect {
        status: 400,
        code: Some("BadDigest"),
        reply: ReplyRule::Status(400),
    };
    expect("PUT over the old object with a wrong checksum", &a, want)?;
    let back = c.get_http("old-intact", Selection::Whole)?;
    expect_bytes("the old object after the refused PUT", &back, &old)?;

    // 2. A token whose rkey the client never registered: the server's RDMA
    // READ fails.
    let token = c.token(&reg, Direction::Put, 0, n)?;
    let mut t = Token::decode(&token).map_err(|e| Failure::error("decoding our token", e))?;
    t.rkey ^= 0x5a5a_0000;
    let mut req = RawRequest::new(Method::PUT, path)
        .with_token(t.encode())
        .with_header(CHECKSUM_CRC64NVME, &crc(&new))
        .map_err(|e| Failure::error("building the request", e))?;
    req.moves = n as u64;
    let a = c.raw("PUT over the old object with a wrong rkey", req)?;
    // The server drops the pair of a failed transfer.
    c.unpair();
    if a.status < 400 {
        return Err(Failure::new(
            "PUT over the old object with a wrong rkey",
            "a failure (500 RDMATransferFailed)",
            super::report::Observed::of(&a),
        ));
    }
    let back = c.get_http("old-intact", Selection::Whole)?;
    expect_bytes("the old object after the failed RDMA PUT", &back, &old)?;
    Ok(Outcome::Pass(format!(
        "400 BadDigest, then {} {} for a wrong rkey; the old object intact both times",
        a.status,
        a.code().unwrap_or_default()
    )))
}
