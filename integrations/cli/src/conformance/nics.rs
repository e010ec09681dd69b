//! Several NICs (`--nic mlx5_0,mlx5_1`): a multipart upload whose parts go
//! by RDMA round robin over the NICs, part i through NIC i mod n, then
//! ranged GETs of the same parts the same way; each NIC's client library
//! pairs with the server on its own (a handshake per NIC), and a server on
//! several devices answers each from the device that reaches it. SKIP with
//! one NIC.

use hipobj_s3::{CompletedPart, Path, Selection};

use super::ctx::{pattern, Ctx, GUARD};
use super::report::{expect_bytes, CheckResult, Failure, Observed, Outcome};
use super::{Check, Dialect};
use crate::common::nic_of_part;

const RULE: &str = "docs/protocol.md, The RC flow: connect first, then move data (a pair per client QP: one handshake per NIC)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![Check::new(
        "nics.round-robin",
        RULE,
        Dialect::Rc,
        round_robin,
    )]
}

/// A transfer's path must be RDMA.
fn by_rdma(step: &str, path: Path) -> Result<(), Failure> {
    if path == Path::Rdma {
        return Ok(());
    }
    Err(Failure::new(
        step,
        "the transfer by RDMA",
        Observed::bytes(format!("path {}", path.as_str())),
    ))
}

/// n + 1 parts (5 MiB each, the last 4099 bytes) over n NICs, up by
/// UploadPart and down by ranged GETs, part i through NIC i mod n.
fn round_robin(c: &mut Ctx) -> CheckResult {
    let n = c.nics.len();
    if n < 2 {
        return Ok(Outcome::Skip(
            "one NIC: name several (--nic mlx5_0,mlx5_1) to spread parts over them".into(),
        ));
    }
    const PART: usize = 5 << 20;
    const LAST: usize = 4099;
    let parts = n + 1;
    let span = |i: usize| (i * PART, if i + 1 == parts { LAST } else { PART });
    let data = pattern(60, PART * (parts - 1) + LAST);
    let key = c.key("nics");
    let upload = c
        .block(c.plain.create_multipart_upload(&c.bucket, &key))
        .map_err(|e| Failure::error("CreateMultipartUpload", e))?;
    let r = (|| {
        let mut done = Vec::new();
        for i in 0..parts {
            let nic = nic_of_part(i as u64, n);
            let (off, len) = span(i);
            let step = format!("UploadPart {} by RDMA through NIC {nic}", i + 1);
            let (lib, s3) = &c.nics[nic];
            let reg = lib
                .register_owned(data[off..off + len].to_vec())
                .map_err(|e| Failure::error(format!("registering part {}", i + 1), e))?;
            let o = c
                .block(s3.upload_part(&c.bucket, &key, &upload, i as u32 + 1, &reg, 0, len))
                .map_err(|e| Failure::error(&step, e))?;
            by_rdma(&step, o.path)?;
            done.push(CompletedPart {
                part_number: i as u32 + 1,
                etag: o.etag.unwrap_or_default(),
            });
        }
        c.block(
            c.plain
                .complete_multipart_upload(&c.bucket, &key, &upload, &done),
        )
        .map_err(|e| Failure::error("CompleteMultipartUpload", e))
    })();
    if r.is_err() {
        let _ = c.block(c.plain.abort_multipart_upload(&c.bucket, &key, &upload));
    }
    r?;
    for i in 0..parts {
        let nic = nic_of_part(i as u64, n);
        let (off, len) = span(i);
        let step = format!("ranged GET of part {} by RDMA through NIC {nic}", i + 1);
        let (lib, s3) = &c.nics[nic];
        let reg = lib
            .register_owned(vec![GUARD; len + 64])
            .map_err(|e| Failure::error(format!("registering {} bytes", len + 64), e))?;
        let range = Some((off as u64, (off + len - 1) as u64));
        let o = c
            .block(s3.get_object(&c.bucket, &key, &reg, 0, range))
            .map_err(|e| Failure::error(&step, e))?;
        by_rdma(&step, o.path)?;
        let mut want = vec![GUARD; len + 64];
        want[..len].copy_from_slice(&data[off..off + len]);
        let got = reg
            .to_vec()
            .map_err(|e| Failure::error("reading the buffer", e))?;
        expect_bytes(&step, &got, &want)?;
    }
    let back = c.get_http("nics", Selection::Whole)?;
    expect_bytes("the completed object over plain HTTP", &back, &data)?;
    Ok(Outcome::Pass(format!(
        "{parts} parts over {n} NICs (part i through NIC i mod {n}), up and down by RDMA, byte-exact"
    )))
}
