//! PUTs by RDMA: PutObject from buffers at unaligned offsets, 1 byte, the
//! chunk size minus and plus one; UploadPart by RDMA then
//! CompleteMultipartUpload. Each object is read back over plain HTTP and
//! compared byte for byte.

use hipobj_s3::{CompletedPart, Selection};
use hipobj_wire::headers::CHECKSUM_CRC64NVME;

use super::ctx::{crc, pattern, Ctx};
use super::report::{expect, expect_bytes, CheckResult, Expect, Failure, Observed, Outcome};
use super::{Check, Dialect};

const PUT: &str =
    "docs/protocol.md, The server's answers: PutObject / UploadPart succeeded (200, reply 200, the store's ETag)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new("put.whole", PUT, Dialect::Rc, |c| {
            put_sized(c, "put-whole", (3 << 20) + 5, 0)
        }),
        Check::new("put.unaligned", PUT, Dialect::Rc, |c| {
            put_sized(c, "put-unaligned", 65_537, 4093)
        }),
        Check::new("put.one-byte", PUT, Dialect::Rc, |c| {
            put_sized(c, "put-one-byte", 1, 5)
        }),
        Check::new("put.chunk-minus-one", PUT, Dialect::Rc, |c| {
            let n = c.chunk - 1;
            put_sized(c, "put-chunk-minus-one", n, 1)
        }),
        Check::new("put.chunk-plus-one", PUT, Dialect::Rc, |c| {
            let n = c.chunk + 1;
            put_sized(c, "put-chunk-plus-one", n, 1)
        }),
        Check::new("multipart.rdma", PUT, Dialect::Rc, multipart),
    ]
}

/// `n` bytes at `off` of a buffer PUT by RDMA (with their CRC-64/NVME
/// declared): 200, reply 200, an ETag, the object equal over plain HTTP.
fn put_sized(c: &mut Ctx, name: &str, n: usize, off: usize) -> CheckResult {
    let data = pattern(40 + n as u64, n);
    let reg = c.buffer(off + n + 64)?;
    c.fill(&reg, off, &data)?;
    let path = c.path(name);
    let a = c.rdma_put(&path, &reg, off, n, &[(CHECKSUM_CRC64NVME, &crc(&data))])?;
    expect("RDMA PUT", &a, Expect::ok(200))?;
    if a.header("etag").is_none() {
        return Err(Failure::new("RDMA PUT", "an ETag", Observed::of(&a)));
    }
    let back = c.get_http(name, Selection::Whole)?;
    expect_bytes("the object over plain HTTP", &back, &data)?;
    Ok(Outcome::Pass(format!(
        "{n} bytes from buffer offset {off}, byte-exact over plain HTTP"
    )))
}

/// CreateMultipartUpload, UploadPart 1 (5 MiB) and 2 (12345 bytes, from an
/// odd offset) by RDMA, CompleteMultipartUpload: the object is the parts.
fn multipart(c: &mut Ctx) -> CheckResult {
    let (p1, p2) = (5usize << 20, 12_345usize);
    let data = pattern(50, p1 + p2);
    let key = c.key("multipart");
    // Part 2 sits at an odd offset after a gap.
    let off2 = p1 + 1001;
    let reg = c.buffer(off2 + p2)?;
    c.fill(&reg, 0, &data[..p1])?;
    c.fill(&reg, off2, &data[p1..])?;
    let upload = c
        .block(c.plain.create_multipart_upload(&c.bucket, &key))
        .map_err(|e| Failure::error("CreateMultipartUpload", e))?;
    let r = (|| {
        let mut parts = Vec::new();
        for (n, off, range) in [(1u32, 0usize, 0..p1), (2, off2, p1..p1 + p2)] {
            let path = format!("{}?partNumber={n}&uploadId={upload}", c.path("multipart"));
            let len = range.len();
            let sum = crc(&data[range]);
            let a = c.rdma_put(&path, &reg, off, len, &[(CHECKSUM_CRC64NVME, &sum)])?;
            expect(&format!("UploadPart {n} by RDMA"), &a, Expect::ok(200))?;
            let etag = a.header("etag").ok_or_else(|| {
                Failure::new(
                    format!("UploadPart {n} by RDMA"),
                    "an ETag",
                    Observed::of(&a),
                )
            })?;
            parts.push(CompletedPart {
                part_number: n,
                etag,
            });
        }
        c.block(
            c.plain
                .complete_multipart_upload(&c.bucket, &key, &upload, &parts),
        )
        .map_err(|e| Failure::error("CompleteMultipartUpload", e))
    })();
    if r.is_err() {
        let _ = c.block(c.plain.abort_multipart_upload(&c.bucket, &key, &upload));
    }
    r?;
    let back = c.get_http("multipart", Selection::Whole)?;
    expect_bytes("the completed object over plain HTTP", &back, &data)?;
    Ok(Outcome::Pass(format!(
        "2 parts by RDMA ({p1} + {p2} bytes), completed, byte-exact"
    )))
}
