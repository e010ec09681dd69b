//! The token dialects: hipObject RC through the connect-first handshake
//! (the raw handshake, and the client library's own flow), hipObject DC,
//! the 81-character cuObject descriptor and the legacy `:addr:size` suffix.
//!
//! The DC side is a DC target and a registered buffer on the client
//! library's own device and protection domain, as cuObject's client has
//! them. A provider without DC targets (libibverbs today) makes the DC
//! checks SKIP; a server that declines DC (501) too.

use hipobj_fabric::{AccessFlags, CompletionQueue, DcTarget, Gid, RegisteredBuffer};
use hipobj_s3::{RawAnswer, RawRequest, Selection};
use hipobj_wire::{DcDescriptor, LegacySuffix, Token, Transport};
use http::Method;

use super::ctx::{pattern, Ctx, Handshake, GUARD};
use super::report::{
    expect, expect_bytes, expect_transferred, CheckResult, Expect, Failure, Observed, Outcome,
};
use super::{Check, Dialect};

const RC: &str = "docs/protocol.md, The RC flow: connect first, then move data";
const HIPOBJ_DC: &str =
    "docs/protocol.md, Token dialects: hipObject binary token (DC); DC tokens need no handshake";
const CUOBJ: &str = "docs/protocol.md, Token dialects: cuObject DC descriptor, 81 characters";
const SUFFIX: &str = "docs/protocol.md, Token dialects: legacy :addr:size suffix (overrides the address and size, as AIStor)";

/// The checks of this group.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new("handshake.rc", RC, Dialect::Rc, handshake_rc),
        Check::new("dialect.rc.library", RC, Dialect::Rc, rc_library),
        Check::new("dialect.dc.get", HIPOBJ_DC, Dialect::Dc, |c| {
            dc_get(c, Kind::HipobjDc)
        }),
        Check::new("dialect.dc.put", HIPOBJ_DC, Dialect::Dc, |c| {
            dc_put(c, Kind::HipobjDc)
        }),
        Check::new("dialect.cuobject.get", CUOBJ, Dialect::CuObject, |c| {
            dc_get(c, Kind::Descriptor)
        }),
        Check::new("dialect.cuobject.put", CUOBJ, Dialect::CuObject, |c| {
            dc_put(c, Kind::Descriptor)
        }),
        Check::new(
            "dialect.legacy-suffix.get",
            SUFFIX,
            Dialect::CuObject,
            suffix_get,
        ),
    ]
}

/// A handshake (RC token of length 0) in a HEAD: 200 and
/// `x-amz-rdma-reply: 200:<server token>`, then a transfer on the pair.
fn handshake_rc(c: &mut Ctx) -> CheckResult {
    let a = match c.handshake("handshake")? {
        Handshake::Paired(a) => a,
        Handshake::NoRdma(a) => {
            return Err(Failure::new(
                "handshake",
                "status 200, x-amz-rdma-reply \"200:<server token>\"",
                Observed::of(&a),
            ))
        }
    };
    let data = pattern(1, 4096);
    c.put_http("handshake", &data)?;
    let reg = c.buffer(data.len())?;
    let path = c.path("handshake");
    let g = c.rdma_get(&path, &reg, 0, data.len(), &[])?;
    expect("GET on the new pair", &g, Expect::ok(200))?;
    expect_bytes("GET on the new pair", &c.contents(&reg)?, &data)?;
    Ok(Outcome::Pass(format!(
        "200, reply {}; a GET on the pair moved 4096 bytes",
        short(&a.reply().unwrap_or_default())
    )))
}

fn short(reply: &str) -> String {
    match reply.split_once(':') {
        Some((s, t)) => format!("{s}:<{} hex>", t.len()),
        None => reply.to_string(),
    }
}

/// The client library's whole flow (handshake from its pool, reconnect on
/// 421): PUT then GET by RDMA only, byte-exact against plain HTTP.
fn rc_library(c: &mut Ctx) -> CheckResult {
    let n = (1 << 20) + 17;
    let data = pattern(2, n);
    let reg = c.buffer(n)?;
    c.fill(&reg, 0, &data)?;
    let key = c.key("rc-library");
    let put = c
        .block(c.s3.put_object(&c.bucket, &key, &reg, 0, n))
        .map_err(|e| Failure::error("PUT through the client library, RDMA required", e))?;
    let back = c.get_http("rc-library", Selection::Whole)?;
    expect_bytes(
        "the object over plain HTTP after the RDMA PUT",
        &back,
        &data,
    )?;
    let reg2 = c.buffer(n)?;
    let got = c
        .block(c.s3.get_object(&c.bucket, &key, &reg2, 0, None))
        .map_err(|e| Failure::error("GET through the client library, RDMA required", e))?;
    if got.bytes != n as u64 {
        return Err(Failure::new(
            "GET through the client library",
            format!("{n} bytes"),
            Observed::bytes(format!("{} bytes", got.bytes)),
        ));
    }
    expect_bytes("the buffer after the RDMA GET", &c.contents(&reg2)?, &data)?;
    Ok(Outcome::Pass(format!(
        "PUT ({}) and GET ({}) of {n} bytes by RDMA, byte-exact",
        put.path, got.path
    )))
}

/// Which DC token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    HipobjDc,
    Descriptor,
}

/// The client's DC side: a target and a buffer.
struct DcSide {
    // Drop order: the buffer and the target before the CQ.
    buf: RegisteredBuffer,
    dct: DcTarget,
    _cq: CompletionQueue,
    gid: Gid,
}

impl DcSide {
    /// A DC target with `key` and a buffer of `len` bytes of [`GUARD`];
    /// `Err(skip)` when the provider has no DC targets.
    fn new(c: &Ctx, len: usize, key: u64) -> Result<DcSide, Outcome> {
        let dev = &c.lib.instance().device;
        let skip = |e: hipobj_fabric::FabricError| {
            Outcome::Skip(format!("the client's RDMA provider has no DC target: {e}"))
        };
        let cq = dev.device.create_cq(16).map_err(skip)?;
        let dct = dev
            .pd
            .create_dct(
                &cq,
                AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
                key,
            )
            .map_err(skip)?;
        let mut buf = dev
            .pd
            .alloc_buffer(
                len,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
            )
            .map_err(skip)?;
        buf.buf_mut().fill(GUARD);
        Ok(DcSide {
            buf,
            dct,
            _cq: cq,
            gid: dev.gid,
        })
    }

    fn addr(&self) -> u64 {
        self.buf.mr().addr()
    }

    /// The token of `kind` for `len` bytes at `off`.
    fn token(&self, kind: Kind, off: u64, len: u64) -> Result<String, Failure> {
        match kind {
            Kind::HipobjDc => Ok(Token {
                transport: Transport::Dc,
                qp_num: self.dct.dct_num(),
                gid: self.gid,
                rkey: self.buf.mr().rkey(),
                addr: self.addr() + off,
                len,
                port: 1,
                lid: 0,
            }
            .encode()),
            Kind::Descriptor => DcDescriptor {
                addr: self.addr() + off,
                size: u32::try_from(len)
                    .map_err(|_| Failure::error("a descriptor", "size over 4 GiB"))?,
                rkey: self.buf.mr().rkey(),
                lid: 0,
                dct_num: self.dct.dct_num(),
                gid: Some(self.gid),
            }
            .format()
            .map_err(|e| Failure::error("formatting the descriptor", e)),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        self.buf.buf().to_vec()
    }
}

/// SKIP when the server declined the dialect (501), naming its answer.
fn declined(a: &RawAnswer) -> Option<Outcome> {
    (a.status == 501).then(|| {
        Outcome::Skip(format!(
            "the server declines this dialect: {}",
            Observed::of(a)
        ))
    })
}

/// GET by a DC token: 200, reply 200, the bytes-transferred header, the
/// bytes of the object at an unaligned offset and nothing around them.
fn dc_get(c: &mut Ctx, kind: Kind) -> CheckResult {
    let n = 300_001;
    let off = 4093usize;
    let name = format!("dc-get-{kind:?}");
    let data = pattern(3, n);
    c.put_http(&name, &data)?;
    let side = match DcSide::new(c, off + n + 64, c.dc_key) {
        Ok(s) => s,
        Err(skip) => return Ok(skip),
    };
    let token = side.token(kind, off as u64, n as u64)?;
    let mut req = RawRequest::new(Method::GET, c.path(&name)).with_token(token);
    req.moves = n as u64;
    let a = c.raw("DC GET", req)?;
    if let Some(skip) = declined(&a) {
        return Ok(skip);
    }
    expect("DC GET", &a, Expect::ok(200))?;
    expect_transferred("DC GET", &a, n as u64)?;
    let reference = c.get_http(&name, Selection::Whole)?;
    let mut want = vec![GUARD; off + n + 64];
    want[off..off + n].copy_from_slice(&reference);
    expect_bytes(
        "the DC buffer (guard bytes around the object)",
        &side.bytes(),
        &want,
    )?;
    Ok(Outcome::Pass(format!(
        "{n} bytes at offset {off}, byte-exact against plain HTTP"
    )))
}

/// PUT by a DC token: 200, reply 200, the object equal over plain HTTP.
fn dc_put(c: &mut Ctx, kind: Kind) -> CheckResult {
    let n = 200_003;
    let off = 7usize;
    let name = format!("dc-put-{kind:?}");
    let data = pattern(4, n);
    let mut side = match DcSide::new(c, off + n, c.dc_key) {
        Ok(s) => s,
        Err(skip) => return Ok(skip),
    };
    side.buf
        .buf_mut()
        .write_at(off, &data)
        .map_err(|e| Failure::error("writing the DC buffer", e))?;
    let token = side.token(kind, off as u64, n as u64)?;
    let mut req = RawRequest::new(Method::PUT, c.path(&name))
        .with_token(token)
        .with_header(
            hipobj_wire::headers::CHECKSUM_CRC64NVME,
            &super::ctx::crc(&data),
        )
        .map_err(|e| Failure::error("building the request", e))?;
    req.moves = n as u64;
    let a = c.raw("DC PUT", req)?;
    if let Some(skip) = declined(&a) {
        return Ok(skip);
    }
    expect("DC PUT", &a, Expect::ok(200))?;
    let back = c.get_http(&name, Selection::Whole)?;
    expect_bytes("the object over plain HTTP after the DC PUT", &back, &data)?;
    Ok(Outcome::Pass(format!(
        "{n} bytes from offset {off}, byte-exact"
    )))
}

/// A descriptor naming 16 bytes at the buffer's start, followed by a suffix
/// naming the real range: the server uses the suffix's.
fn suffix_get(c: &mut Ctx) -> CheckResult {
    let n = 100_000usize;
    let off = 4096usize;
    let data = pattern(5, n);
    c.put_http("suffix-get", &data)?;
    let side = match DcSide::new(c, off + n + 4096, c.dc_key) {
        Ok(s) => s,
        Err(skip) => return Ok(skip),
    };
    let suffix = LegacySuffix {
        addr: side.addr() + off as u64,
        len: n as u64,
    }
    .format();
    let token = format!("{}{suffix}", side.token(Kind::Descriptor, 0, 16)?);
    let mut req = RawRequest::new(Method::GET, c.path("suffix-get")).with_token(token);
    req.moves = n as u64;
    let a = c.raw("GET with a suffix", req)?;
    if let Some(skip) = declined(&a) {
        return Ok(skip);
    }
    expect("GET with a suffix", &a, Expect::ok(200))?;
    expect_transferred("GET with a suffix", &a, n as u64)?;
    let mut want = vec![GUARD; off + n + 4096];
    want[off..off + n].copy_from_slice(&data);
    expect_bytes(
        "the buffer: the suffix's range, nothing else",
        &side.bytes(),
        &want,
    )?;
    Ok(Outcome::Pass(format!(
        "the suffix's {n} bytes at offset {off} were written, nothing else"
    )))
}
