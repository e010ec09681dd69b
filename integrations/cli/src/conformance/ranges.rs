//! GETs by RDMA: the whole object, a range and a part (206 and the
//! bytes-transferred header), buffers at unaligned offsets, 1 byte, the
//! chunk size minus and plus one, and a 1 GiB object; each byte-exact
//! against the same object read over plain HTTP, with nothing written
//! around the bytes.

use hipobj_s3::{CompletedPart, Selection};

use super::ctx::{pattern, pattern_into, Ctx, GUARD};
use super::report::{
    expect, expect_bytes, expect_transferred, CheckResult, Expect, Failure, Observed, Outcome,
};
use super::{Check, Dialect};

const GET: &str = "docs/protocol.md, The server's answers: GetObject succeeded (200, reply 200, x-amz-rdma-bytes-transferred)";
const RANGE: &str = "docs/protocol.md, The server's answers: Range or partNumber GetObject succeeded (206, as AIStor and NVIDIA's draft)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new("get.whole", GET, Dialect::Rc, |c| {
            get_sized(c, "get-whole", (3 << 20) + 5, 0)
        }),
        Check::new("get.range.206", RANGE, Dialect::Rc, get_range),
        Check::new("get.part.206", RANGE, Dialect::Rc, get_part),
        Check::new("get.unaligned", GET, Dialect::Rc, |c| {
            get_sized(c, "get-unaligned", 65_537, 4093)
        }),
        Check::new("get.one-byte", GET, Dialect::Rc, |c| {
            get_sized(c, "get-one-byte", 1, 3)
        }),
        Check::new("get.chunk-minus-one", GET, Dialect::Rc, |c| {
            let n = c.chunk - 1;
            get_sized(c, "get-chunk-minus-one", n, 1)
        }),
        Check::new("get.chunk-plus-one", GET, Dialect::Rc, |c| {
            let n = c.chunk + 1;
            get_sized(c, "get-chunk-plus-one", n, 1)
        }),
        Check::new("transfer.1gib", GET, Dialect::Rc, one_gib).big(),
    ]
}

/// An object of `n` bytes stored over HTTP, read by RDMA into a buffer at
/// `off` with guard bytes around: 200, reply 200, `n` transferred, the bytes
/// equal to the plain HTTP GET and nothing else written.
fn get_sized(c: &mut Ctx, name: &str, n: usize, off: usize) -> CheckResult {
    let data = pattern(10 + n as u64, n);
    c.put_http(name, &data)?;
    let reg = c.buffer(off + n + 64)?;
    let path = c.path(name);
    let a = c.rdma_get(&path, &reg, off, n, &[])?;
    expect("RDMA GET", &a, Expect::ok(200))?;
    expect_transferred("RDMA GET", &a, n as u64)?;
    if !a.body.is_empty() {
        return Err(Failure::new(
            "RDMA GET",
            "an empty body",
            Observed::bytes(format!("a body of {} bytes", a.body.len())),
        ));
    }
    let reference = c.get_http(name, Selection::Whole)?;
    expect_bytes("the object over plain HTTP", &reference, &data)?;
    let mut want = vec![GUARD; off + n + 64];
    want[off..off + n].copy_from_slice(&reference);
    expect_bytes(
        "the buffer (guard bytes around the object)",
        &c.contents(&reg)?,
        &want,
    )?;
    Ok(Outcome::Pass(format!(
        "{n} bytes at buffer offset {off}, byte-exact, nothing written around them"
    )))
}

/// `Range: bytes=1000-200999` (and a suffix range): 206, reply 206,
/// bytes-transferred the range's length, the bytes of the plain HTTP range.
fn get_range(c: &mut Ctx) -> CheckResult {
    let n = 1 << 20;
    let data = pattern(20, n);
    c.put_http("get-range", &data)?;
    let (first, last) = (1000usize, 200_999usize);
    let len = last - first + 1;
    let reg = c.buffer(len + 3 + 64)?;
    let path = c.path("get-range");
    let range = format!("bytes={first}-{last}");
    let a = c.rdma_get(&path, &reg, 3, len, &[("range", &range)])?;
    expect(&format!("RDMA GET, Range: {range}"), &a, Expect::ok(206))?;
    expect_transferred("RDMA GET of a range", &a, len as u64)?;
    let cr = a.header("content-range");
    let want_cr = format!("bytes {first}-{last}/{n}");
    if cr.as_deref() != Some(want_cr.as_str()) {
        let mut got = Observed::of(&a);
        got.bytes = Some(format!("Content-Range {cr:?}"));
        return Err(Failure::new(
            "RDMA GET of a range",
            format!("Content-Range {want_cr}"),
            got,
        ));
    }
    let reference = c.get_http(
        "get-range",
        Selection::Range {
            first: first as u64,
            last: last as u64,
        },
    )?;
    expect_bytes("the range over plain HTTP", &reference, &data[first..=last])?;
    let mut want = vec![GUARD; len + 3 + 64];
    want[3..3 + len].copy_from_slice(&reference);
    expect_bytes(
        "the buffer (guard bytes around the range)",
        &c.contents(&reg)?,
        &want,
    )?;
    Ok(Outcome::Pass(format!(
        "206, reply 206, {len} bytes transferred, Content-Range {want_cr}"
    )))
}

/// Part 2 of an object uploaded in two parts (5 MiB + 4099 bytes, over
/// plain HTTP): `?partNumber=2` by RDMA answers 206, reply 206, the part's
/// length transferred, the part's bytes.
fn get_part(c: &mut Ctx) -> CheckResult {
    let p1 = 5 << 20;
    let p2 = 4099;
    let data = pattern(21, p1 + p2);
    let key = c.key("get-part");
    let reg = c.buffer(p1 + p2)?;
    c.fill(&reg, 0, &data)?;
    let upload = c
        .block(c.plain.create_multipart_upload(&c.bucket, &key))
        .map_err(|e| Failure::error("CreateMultipartUpload", e))?;
    let mut parts = Vec::new();
    for (n, off, len) in [(1u32, 0, p1), (2, p1, p2)] {
        let o = c
            .block(
                c.plain
                    .upload_part(&c.bucket, &key, &upload, n, &reg, off, len),
            )
            .map_err(|e| Failure::error(format!("UploadPart {n} over plain HTTP"), e))?;
        parts.push(CompletedPart {
            part_number: n,
            etag: o.etag.unwrap_or_default(),
        });
    }
    c.block(
        c.plain
            .complete_multipart_upload(&c.bucket, &key, &upload, &parts),
    )
    .map_err(|e| Failure::error("CompleteMultipartUpload", e))?;
    // A store that does not serve part GETs over plain HTTP (s3s-fs 0.14.1
    // answers the whole object, 200) leaves nothing for RDMA to match.
    let mut reference = Vec::new();
    let http = c
        .block(
            c.plain
                .get_object_http(&c.bucket, &key, Selection::Part(2), &mut reference),
        )
        .map_err(|e| Failure::error("GET ?partNumber=2 over plain HTTP", e))?;
    if http.status != 206 {
        return Ok(Outcome::Skip(format!(
            "the server answers ?partNumber=2 over plain HTTP with {} and {} bytes, not 206 and the part: it does not serve part GETs",
            http.status,
            reference.len()
        )));
    }
    let out = c.buffer(p2 + 64)?;
    let path = format!("{}?partNumber=2", c.path("get-part"));
    let a = c.rdma_get(&path, &out, 0, p2, &[])?;
    expect("RDMA GET ?partNumber=2", &a, Expect::ok(206))?;
    expect_transferred("RDMA GET ?partNumber=2", &a, p2 as u64)?;
    expect_bytes("part 2 over plain HTTP", &reference, &data[p1..])?;
    let mut want = vec![GUARD; p2 + 64];
    want[..p2].copy_from_slice(&reference);
    expect_bytes(
        "the buffer (guard bytes after the part)",
        &c.contents(&out)?,
        &want,
    )?;
    Ok(Outcome::Pass(format!(
        "206, reply 206, part 2's {p2} bytes, byte-exact"
    )))
}

/// 1 GiB: PUT by RDMA through the client library (a multipart upload
/// whose parts go by RDMA), GET by RDMA into a zeroed buffer, both compared
/// by CRC-64/NVME with the pattern and with the object read over plain
/// HTTP.
fn one_gib(c: &mut Ctx) -> CheckResult {
    const N: usize = 1 << 30;
    const PIECE: usize = 8 << 20;
    let key = c.key("one-gib");
    let reg = c.buffer(N)?;
    let mut piece = vec![0u8; PIECE];
    let mut want = hipobj_s3::Crc64Nvme::new();
    for at in (0..N).step_by(PIECE) {
        pattern_into(30, at as u64, &mut piece);
        want.update(&piece);
        c.fill(&reg, at, &piece)?;
    }
    let want = want.header_value();
    let put = c
        .block(c.s3.put_object(&c.bucket, &key, &reg, 0, N))
        .map_err(|e| Failure::error("PUT of 1 GiB by RDMA", e))?;
    piece.fill(0);
    for at in (0..N).step_by(PIECE) {
        c.fill(&reg, at, &piece)?;
    }
    let got = c
        .block(c.s3.get_object(&c.bucket, &key, &reg, 0, None))
        .map_err(|e| Failure::error("GET of 1 GiB by RDMA", e))?;
    let mut crc = hipobj_s3::Crc64Nvme::new();
    reg.with_bytes(0, N, |b| crc.update(b))
        .map_err(|e| Failure::error("reading the buffer", e))?;
    let rdma = crc.header_value();
    let mut http = CrcWriter(hipobj_s3::Crc64Nvme::new(), 0);
    c.block(
        c.plain
            .get_object_http(&c.bucket, &key, Selection::Whole, &mut http),
    )
    .map_err(|e| Failure::error("GET of 1 GiB over plain HTTP", e))?;
    let http_n = http.1;
    let http = http.0.header_value();
    if rdma != want || http != want || got.bytes != N as u64 || http_n != N as u64 {
        return Err(Failure::new(
            "1 GiB by RDMA both ways",
            format!("{N} bytes of CRC-64/NVME {want} both ways"),
            Observed::bytes(format!(
                "RDMA GET {} bytes CRC {rdma}; plain HTTP {http_n} bytes CRC {http}",
                got.bytes
            )),
        ));
    }
    Ok(Outcome::Pass(format!(
        "PUT in {} parts and GET of 1 GiB by RDMA, CRC-64/NVME {want} both ways",
        put.parts
    )))
}

/// An `AsyncWrite` that only checksums and counts.
struct CrcWriter(hipobj_s3::Crc64Nvme, u64);

impl tokio::io::AsyncWrite for CrcWriter {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.update(buf);
        self.1 += buf.len() as u64;
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
