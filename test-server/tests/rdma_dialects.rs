//! The DC dialects against the test server: NVIDIA cuObject's descriptor,
//! the same with the legacy `:addr:size` suffix, and hipObject's token with
//! transport DC. The client library only does RC, so the client side here
//! is the fabric crate: a soft device, a DC target and a registered buffer.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{AccessFlags, CompletionQueue, DcTarget, Device, Gid, RegisteredBuffer};
use hipobj_gateway::rdma::DEFAULT_DC_KEY;
use hipobj_wire::{headers, DcDescriptor, LegacySuffix, Token, Transport};
use http::Method;
use std::net::Ipv4Addr;
use std::time::Instant;

const TOKEN: &str = headers::RDMA_TOKEN;

/// A client's DC side: a DC target with `key` and one registered buffer.
struct DcClient {
    // Fields drop in order: the buffer and target before the device.
    buf: RegisteredBuffer,
    dct: DcTarget,
    _cq: CompletionQueue,
    gid: Gid,
    _dev: Device,
}

impl DcClient {
    fn new(len: usize, key: u64) -> DcClient {
        let dev = SoftProvider::from_env()
            .unwrap()
            .open_ip(Ipv4Addr::LOCALHOST);
        let gid = dev.gid_table(1).unwrap()[0].gid;
        assert_eq!(gid, Gid::from_ipv4(Ipv4Addr::LOCALHOST));
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(16).unwrap();
        let dct = pd
            .create_dct(
                &cq,
                AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
                key,
            )
            .unwrap();
        let buf = pd
            .alloc_buffer(
                len,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        DcClient {
            buf,
            dct,
            _cq: cq,
            gid,
            _dev: dev,
        }
    }

    fn addr(&self) -> u64 {
        self.buf.mr().addr()
    }

    /// The cuObject descriptor for `size` bytes at `offset`.
    fn descriptor(&self, offset: u64, size: u32, gid: Option<Gid>) -> String {
        DcDescriptor {
            addr: self.addr() + offset,
            size,
            rkey: self.buf.mr().rkey(),
            lid: 0,
            dct_num: self.dct.dct_num(),
            gid,
        }
        .format()
        .unwrap()
    }

    /// The hipObject token with transport DC for `len` bytes at `offset`.
    fn dc_token(&self, offset: u64, len: u64) -> String {
        Token {
            transport: Transport::Dc,
            qp_num: self.dct.dct_num(),
            gid: self.gid,
            rkey: self.buf.mr().rkey(),
            addr: self.addr() + offset,
            len,
            port: 1,
            lid: 0,
        }
        .encode()
    }

    fn set(&mut self, data: &[u8]) {
        self.buf.buf_mut().write_at(0, data).unwrap();
    }

    fn bytes(&self) -> Vec<u8> {
        self.buf.buf().to_vec()
    }
}

fn rdma_get(s3: &S3, path: &str, token: &str) -> Answer {
    s3.send(Method::GET, path, &[(TOKEN, token)], Vec::new(), true)
}

fn rdma_put(s3: &S3, path: &str, token: &str) -> Answer {
    s3.send(Method::PUT, path, &[(TOKEN, token)], Vec::new(), true)
}

#[track_caller]
fn assert_get_ok(a: &Answer, len: usize, what: &str) {
    assert_eq!(a.status, 200, "{what}: {}", a.text());
    assert_eq!(a.reply().as_deref(), Some("200"), "{what}");
    assert_eq!(
        a.header(headers::RDMA_BYTES_TRANSFERRED),
        Some(len.to_string()),
        "{what}"
    );
    assert!(a.body.is_empty(), "{what}");
}

#[track_caller]
fn assert_put_ok(a: &Answer, what: &str) {
    assert_eq!(a.status, 200, "{what}: {}", a.text());
    assert_eq!(a.reply().as_deref(), Some("200"), "{what}");
    assert!(a.header("etag").is_some(), "{what}");
}

#[test]
fn cuobject_descriptor_get_and_put_byte_exact() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = (9 << 20) + 3; // two staging chunks
    let data = pattern(30, len);
    s3.put_plain("/bkt/o", data.clone());
    let mut c = DcClient::new(len, DEFAULT_DC_KEY);
    let token = c.descriptor(0, len as u32, Some(c.gid));
    assert_eq!(token.len(), 81);

    let a = rdma_get(&s3, "/bkt/o", &token);
    assert_get_ok(&a, len, "cuObject GET");
    assert!(c.bytes() == data, "cuObject GET bytes");

    let other = pattern(31, len);
    c.set(&other);
    let a = rdma_put(&s3, "/bkt/p", &token);
    assert_put_ok(&a, "cuObject PUT");
    assert_object(&s3, "/bkt/p", &other);
    assert_eq!(c.dct.key_violations(), 0);
}

#[test]
fn the_legacy_suffix_overrides_the_descriptor_address_and_size() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 1 << 20;
    let (off, n) = (4096u64, 100_000usize);
    let data = pattern(32, n);
    s3.put_plain("/bkt/o", data.clone());
    let mut c = DcClient::new(len, DEFAULT_DC_KEY);
    c.buf.buf_mut().fill(0xee);
    // The descriptor alone names 16 bytes at the start: too small for the
    // object. The suffix names the range the server must use.
    let suffix = LegacySuffix {
        addr: c.addr() + off,
        len: n as u64,
    }
    .format();
    let token = format!("{}{suffix}", c.descriptor(0, 16, Some(c.gid)));
    assert_eq!(token.len(), 81 + 34);

    let a = rdma_get(&s3, "/bkt/o", &token);
    assert_get_ok(&a, n, "GET with a suffix");
    let mem = c.bytes();
    assert!(
        mem[..off as usize].iter().all(|b| *b == 0xee),
        "before the range"
    );
    assert!(mem[off as usize..off as usize + n] == data[..], "the range");
    assert!(
        mem[off as usize + n..].iter().all(|b| *b == 0xee),
        "after the range"
    );

    // PUT reads exactly the suffix's range.
    let other = pattern(33, len);
    c.set(&other);
    let a = rdma_put(&s3, "/bkt/p", &token);
    assert_put_ok(&a, "PUT with a suffix");
    assert_object(&s3, "/bkt/p", &other[off as usize..off as usize + n]);

    // The hipObject DC token takes the suffix the same way.
    c.buf.buf_mut().fill(0xee);
    let token = format!("{}{suffix}", c.dc_token(0, 16));
    let a = rdma_get(&s3, "/bkt/o", &token);
    assert_get_ok(&a, n, "hipObject DC token with a suffix");
    let mem = c.bytes();
    assert!(mem[off as usize..off as usize + n] == data[..]);
    assert!(mem[..off as usize].iter().all(|b| *b == 0xee));
}

#[test]
fn hipobject_token_with_transport_dc_get_and_put_byte_exact() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = (8 << 20) + 4097;
    let data = pattern(34, len);
    s3.put_plain("/bkt/o", data.clone());
    let mut c = DcClient::new(len, DEFAULT_DC_KEY);
    let token = c.dc_token(0, len as u64);
    assert_eq!(token.len(), 88);
    assert_eq!(&token[..2], "00", "transport byte DC");

    let a = rdma_get(&s3, "/bkt/o", &token);
    assert_get_ok(&a, len, "hipObject DC GET");
    assert!(c.bytes() == data, "hipObject DC GET bytes");

    let other = pattern(35, len);
    c.set(&other);
    let a = rdma_put(&s3, "/bkt/p", &token);
    assert_put_ok(&a, "hipObject DC PUT");
    assert_object(&s3, "/bkt/p", &other);
}

#[test]
fn a_descriptor_without_a_gid_is_declined_with_501() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 4096;
    let data = pattern(36, len);
    s3.put_plain("/bkt/o", data.clone());
    let mut c = DcClient::new(len, DEFAULT_DC_KEY);
    c.buf.buf_mut().fill(0x11);
    let token = c.descriptor(0, len as u32, None);
    assert_eq!(&token[47..49], "0:", "GID-present flag 0");

    let a = rdma_get(&s3, "/bkt/o", &token);
    assert_error(&a, 501, "NotImplemented", Some("501"), "GET without a GID");
    assert_eq!(c.bytes(), vec![0x11; len]);
    let a = rdma_put(&s3, "/bkt/p", &token);
    assert_error(&a, 501, "NotImplemented", Some("501"), "PUT without a GID");
    assert_absent(&s3, "/bkt/p");
    let a = rdma_put(&s3, "/bkt/o", &token);
    assert_error(&a, 501, "NotImplemented", Some("501"), "PUT over an object");
    assert_object(&s3, "/bkt/o", &data);
}

#[test]
fn a_dc_target_with_another_key_fails_the_transfer_with_500() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 64 << 10;
    let data = pattern(37, len);
    s3.put_plain("/bkt/o", data.clone());
    let mut c = DcClient::new(len, 0x1234_5678);
    c.buf.buf_mut().fill(0x22);
    for (what, token) in [
        ("cuObject", c.descriptor(0, len as u32, Some(c.gid))),
        ("hipObject DC", c.dc_token(0, len as u64)),
    ] {
        let t = Instant::now();
        let a = rdma_get(&s3, "/bkt/o", &token);
        assert_error(&a, 500, "RDMATransferFailed", Some("500"), what);
        // The transport's retry timer ends it (no timed assertion: the
        // request would hang past the test client's deadline otherwise).
        eprintln!("{what} GET failed after {:?}", t.elapsed());
        assert_eq!(c.bytes(), vec![0x22; len], "{what}: memory unchanged");

        let a = rdma_put(&s3, "/bkt/p", &token);
        assert_error(&a, 500, "RDMATransferFailed", Some("500"), what);
        assert_absent(&s3, "/bkt/p");
        let a = rdma_put(&s3, "/bkt/o", &token);
        assert_error(&a, 500, "RDMATransferFailed", Some("500"), what);
        assert_object(&s3, "/bkt/o", &data);
    }
    assert!(c.dct.key_violations() > 0);

    // A target with the right key on the same server works right after.
    let good = DcClient::new(len, DEFAULT_DC_KEY);
    let a = rdma_get(
        &s3,
        "/bkt/o",
        &good.descriptor(0, len as u32, Some(good.gid)),
    );
    assert_get_ok(&a, len, "after the failures");
    assert!(good.bytes() == data);
}
