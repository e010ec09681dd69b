//! The reply grammar: every `x-amz-rdma-reply` the server sends is parsed
//! as strictly as hipObject reads it (one header, at most 512 bytes, `ok`,
//! `err`, three digits 100 to 599 or `200:<88 hex>`, nothing else) and must
//! repeat the answer's HTTP status.

use hipobj::Direction;
use hipobj_s3::{RawAnswer, RawRequest};
use hipobj_wire::{headers, Reply, Transport};
use http::Method;

use super::ctx::{crc, pattern, Ctx};
use super::report::{CheckResult, Failure, Observed, Outcome};
use super::{Check, Dialect};

const GRAMMAR: &str = "docs/protocol.md, x-amz-rdma-reply (hipObject's grammar, strictly parsed) and The server's answers (the reply repeats the status)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new("reply.handshake", GRAMMAR, Dialect::Rc, handshake),
        Check::new("reply.get", GRAMMAR, Dialect::Rc, |c| {
            transfer(c, Which::Get)
        }),
        Check::new("reply.range", GRAMMAR, Dialect::Rc, |c| {
            transfer(c, Which::Range)
        }),
        Check::new("reply.put", GRAMMAR, Dialect::Rc, |c| {
            transfer(c, Which::Put)
        }),
        Check::new("reply.error", GRAMMAR, Dialect::Rc, |c| {
            transfer(c, Which::TooSmall)
        }),
    ]
}

/// The one reply of `a`, strictly parsed; its status must be the answer's.
fn strict(step: &str, a: &RawAnswer) -> Result<Reply, Failure> {
    let values: Vec<&[u8]> = a
        .headers
        .get_all(headers::RDMA_REPLY)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    let fail = |why: String| {
        let mut got = Observed::of(a);
        got.bytes = Some(why);
        Failure::new(
            step,
            format!(
                "one x-amz-rdma-reply in the grammar, with status {}",
                a.status
            ),
            got,
        )
    };
    let [value] = values[..] else {
        return Err(fail(format!("{} x-amz-rdma-reply headers", values.len())));
    };
    let r = Reply::parse(value).map_err(|e| fail(format!("outside the grammar: {e}")))?;
    if r.status() != Some(a.status) {
        return Err(fail(format!(
            "the reply's status {:?} is not the answer's",
            r.status()
        )));
    }
    Ok(r)
}

/// The handshake's reply: `200:` and an RC token of length 0.
fn handshake(c: &mut Ctx) -> CheckResult {
    let token = c
        .lib
        .handshake_token()
        .map_err(|e| Failure::error("minting a handshake token", e))?;
    c.unpair();
    let a = c.raw(
        "handshake",
        RawRequest::new(Method::HEAD, c.path("reply-handshake")).with_token(token),
    )?;
    let r = strict("handshake", &a)?;
    match r.peer_token() {
        Some(t) if t.transport == Transport::Rc && t.len == 0 => {
            let reply = a.reply().unwrap_or_default();
            c.lib
                .complete_handshake(&reply)
                .map_err(|e| Failure::error("connecting to the server's QP", e))?;
            Ok(Outcome::Pass(format!(
                "200:<token> naming RC QP {:#x}, length 0",
                t.qp_num
            )))
        }
        _ => Err(Failure::new(
            "handshake",
            "x-amz-rdma-reply \"200:<RC token of length 0>\"",
            Observed::of(&a),
        )),
    }
}

#[derive(Debug, Clone, Copy)]
enum Which {
    Get,
    Range,
    Put,
    TooSmall,
}

/// The reply of a GET, a range GET, a PUT and an error (a buffer too
/// small: 400).
fn transfer(c: &mut Ctx, which: Which) -> CheckResult {
    let n = 10_000;
    let data = pattern(60, n);
    let name = format!("reply-{which:?}");
    let reg = c.buffer(n)?;
    let path = c.path(&name);
    let a = match which {
        Which::Put => {
            c.fill(&reg, 0, &data)?;
            c.rdma_put(
                &path,
                &reg,
                0,
                n,
                &[(headers::CHECKSUM_CRC64NVME, &crc(&data))],
            )?
        }
        Which::Get => {
            c.put_http(&name, &data)?;
            c.rdma_get(&path, &reg, 0, n, &[])?
        }
        Which::Range => {
            c.put_http(&name, &data)?;
            c.rdma_get(&path, &reg, 0, 100, &[("range", "bytes=0-99")])?
        }
        Which::TooSmall => {
            c.put_http(&name, &data)?;
            let token = c.token(&reg, Direction::Get, 0, n - 1)?;
            c.raw(
                "RDMA GET into a buffer too small",
                RawRequest::new(Method::GET, path).with_token(token),
            )?
        }
    };
    let want = match which {
        Which::Get | Which::Put => 200,
        Which::Range => 206,
        Which::TooSmall => 400,
    };
    let r = strict(&format!("{which:?}"), &a)?;
    if a.status != want {
        return Err(Failure::new(
            format!("{which:?}"),
            format!("status {want}"),
            Observed::of(&a),
        ));
    }
    Ok(Outcome::Pass(format!(
        "{:?}, status {}",
        a.reply().unwrap_or_default(),
        r.status().unwrap_or(0)
    )))
}
