//! The test server and the client library in separate processes over the
//! software RDMA provider: GET, PUT and UploadPart by RDMA, byte-exact,
//! through real SigV4-signed S3 requests.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj::OpError;
use http::Method;

#[test]
fn get_and_put_byte_exact_at_several_sizes() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let lib = client();
    for (i, len) in [1usize, 4096, (8 << 20) + 1].into_iter().enumerate() {
        // PUT by RDMA, read back over plain HTTP.
        let data = pattern(i as u64, len);
        let mut mem = data.clone();
        {
            let buf = lib.register_host(&mut mem).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::PUT, &format!("/bkt/obj{i}"));
            buf.put(0, len, &mut ops).unwrap();
            let last = ops.last.as_ref().unwrap();
            assert_eq!(last.header("x-amz-rdma-reply").as_deref(), Some("200"));
            assert!(last.header("etag").is_some());
        }
        let plain = s3.get_plain(&format!("/bkt/obj{i}"));
        assert_eq!(plain.status, 200);
        assert!(plain.body[..] == data[..], "PUT of {len} bytes");

        // GET by RDMA into a fresh buffer.
        let mut back = vec![0u8; len];
        {
            let buf = lib.register_host(&mut back).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::GET, &format!("/bkt/obj{i}"));
            buf.get(0, len, &mut ops).unwrap();
            let last = ops.last.as_ref().unwrap();
            assert_eq!(last.status, 200);
            assert_eq!(
                last.header("x-amz-rdma-bytes-transferred"),
                Some(len.to_string())
            );
            assert_eq!(last.header("content-length").as_deref(), Some("0"));
            assert!(last.body.is_empty());
        }
        assert!(back == data, "GET of {len} bytes");
    }
}

#[test]
fn get_of_an_empty_object() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    assert!(s3.put_plain("/bkt/empty", Vec::new()).status.is_success());
    let lib = client();
    let mut mem = vec![7u8; 16];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/empty");
        buf.get(0, 16, &mut ops).unwrap();
        assert_eq!(
            ops.last
                .as_ref()
                .unwrap()
                .header("x-amz-rdma-bytes-transferred")
                .as_deref(),
            Some("0")
        );
    }
    assert_eq!(mem, vec![7u8; 16]);
}

#[test]
fn range_get_answers_206_with_the_selected_bytes() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let data = pattern(9, 10_000);
    s3.put_plain("/bkt/r", data.clone());
    let lib = client();
    let mut mem = vec![0u8; 100];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops =
            RdmaOps::new(&s3, Method::GET, "/bkt/r").with_header("range", "bytes=1000-1099");
        buf.get(0, 100, &mut ops).unwrap();
        let last = ops.last.as_ref().unwrap();
        assert_eq!(last.status, 206);
        assert_eq!(last.header("x-amz-rdma-reply").as_deref(), Some("206"));
        assert_eq!(
            last.header("x-amz-rdma-bytes-transferred").as_deref(),
            Some("100")
        );
    }
    assert_eq!(&mem[..], &data[1000..1100]);
}

#[test]
fn a_buffer_smaller_than_the_object_is_refused_and_nothing_is_written() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    s3.put_plain("/bkt/big", pattern(1, 5000));
    let lib = client();
    let mut mem = vec![0xaau8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/big");
        let e = buf.get(0, 4096, &mut ops).unwrap_err();
        assert_eq!(e.op, OpError::S3Error);
        let last = ops.last.as_ref().unwrap();
        assert_eq!(last.status, 400);
        assert!(String::from_utf8_lossy(&last.body).contains("InvalidRDMABufferSize"));
    }
    assert_eq!(mem, vec![0xaau8; 4096]);
}

/// CreateMultipartUpload, parts by RDMA from one buffer, Complete; returns
/// the assembled object read back over plain HTTP.
fn multipart(s3: &S3, lib: &hipobj::Hipobj, key: &str, data: &[u8], part: usize) -> Vec<u8> {
    let created = s3.send(
        Method::POST,
        &format!("/bkt/{key}?uploads"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(created.status, 200);
    let xml = String::from_utf8_lossy(&created.body).to_string();
    let upload_id = xml
        .split("<UploadId>")
        .nth(1)
        .unwrap()
        .split("</UploadId>")
        .next()
        .unwrap()
        .to_string();
    let mut mem = data.to_vec();
    let mut etags = Vec::new();
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut off = 0;
        while off < data.len() {
            let len = part.min(data.len() - off);
            let n = etags.len() + 1;
            let mut ops = RdmaOps::new(
                s3,
                Method::PUT,
                &format!("/bkt/{key}?partNumber={n}&uploadId={upload_id}"),
            );
            buf.put(off as u64, len, &mut ops).unwrap();
            etags.push(ops.last.as_ref().unwrap().header("etag").unwrap());
            off += len;
        }
    }
    let parts: String = etags
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{e}</ETag></Part>",
                i + 1
            )
        })
        .collect();
    let body = format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>").into_bytes();
    let done = s3.send(
        Method::POST,
        &format!("/bkt/{key}?uploadId={upload_id}"),
        &[],
        body,
        false,
    );
    assert_eq!(done.status, 200, "{}", String::from_utf8_lossy(&done.body));
    s3.get_plain(&format!("/bkt/{key}")).body.to_vec()
}

#[test]
fn multipart_upload_by_rdma() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let lib = client();
    // One part of each size (a last part may be of any size) ...
    for (i, len) in [1usize, 4096, (8 << 20) + 1].into_iter().enumerate() {
        let data = pattern(20 + i as u64, len);
        assert!(
            multipart(&s3, &lib, &format!("one{i}"), &data, len) == data,
            "one part of {len} bytes"
        );
    }
    // ... and several parts.
    let data = pattern(3, (5 << 20) * 2 + 123);
    assert!(multipart(&s3, &lib, "mp", &data, 5 << 20) == data);
}

/// 1 GiB by RDMA both ways, and as one part of a multipart upload.
#[test]
fn one_gib_put_get_and_part() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let lib = client();
    let len = 1usize << 30;
    let mut mem = vec![0u8; len];
    hipobj_fabric::pattern::fill(77, 0, &mut mem);
    {
        let buf = lib.register_host(&mut mem).unwrap();
        buf.put(0, len, &mut RdmaOps::new(&s3, Method::PUT, "/bkt/gib"))
            .unwrap();
    }
    let mut back = vec![0u8; len];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/gib");
        buf.get(0, len, &mut ops).unwrap();
        assert_eq!(
            ops.last
                .as_ref()
                .unwrap()
                .header("x-amz-rdma-bytes-transferred"),
            Some(len.to_string())
        );
    }
    assert!(back == mem, "1 GiB GET after PUT");
    drop(back);
    let assembled = multipart(&s3, &lib, "gib-part", &mem, len);
    assert!(assembled == mem, "1 GiB as one part");
}

#[test]
fn handshake_reuse_and_reconnect_after_a_server_restart() {
    let port = free_port();
    let mut server = Server::start(port);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    s3.put_plain("/bkt/o", pattern(5, 4096));
    let lib = hipobj::Hipobj::with_platform(
        hipobj::platform::Platform {
            hip: std::sync::Arc::new(hipobj::platform::gpu::NoHip),
            rdma: std::sync::Arc::new(hipobj_fabric::soft::SoftProvider::from_env().unwrap()),
            topology: std::sync::Arc::new(hipobj::platform::topology::NoTopology),
        },
        hipobj::Options {
            max_transfers: 1,
            ..hipobj::Options::default()
        },
        &hipobj::Config::with_nic("soft0"),
    )
    .unwrap();
    let mut mem = vec![0u8; 4096];
    let buf = lib.register_host(&mut mem).unwrap();
    let mut first = RdmaOps::new(&s3, Method::GET, "/bkt/o");
    buf.get(0, 4096, &mut first).unwrap();
    assert_eq!(first.requests, 2, "handshake, then the transfer");
    let mut again = RdmaOps::new(&s3, Method::GET, "/bkt/o");
    buf.get(0, 4096, &mut again).unwrap();
    assert_eq!(again.requests, 1, "the connected pair is reused");

    server.stop();
    let server = Server::start(port);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    s3.put_plain("/bkt/o", pattern(6, 4096));
    let mut after = RdmaOps::new(&s3, Method::GET, "/bkt/o");
    buf.get(0, 4096, &mut after).unwrap();
    assert_eq!(after.requests, 3, "421, handshake, transfer");
    let mut check = vec![0u8; 4096];
    buf.read(0, &mut check).unwrap();
    assert_eq!(check, pattern(6, 4096));
}

/// hipobj-rc-v2 against the test server (its own store): PUT by the
/// client's WRITE_WITH_IMM, GET by the server's WRITEs, bytes equal, over
/// a staging buffer's edge.
#[test]
fn rc_v2_put_and_get_byte_exact() {
    use hipobj_testkit::rc_v2 as v2;
    use hipobj_wire::rc_v2::Span;
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    for (i, len) in [1usize, (8 << 20) + 1].into_iter().enumerate() {
        let data = pattern(900 + i as u64, len);
        let t = v2::target("bkt", &format!("v2-{i}"));
        let f = v2::put(&s3, &t, &data)
            .unwrap_or_else(|a| panic!("v2 PUT {len}: {} {}", a.status, a.text()));
        assert_eq!(f.bytes, len as u64);
        let plain = s3.get_plain(&format!("/bkt/v2-{i}"));
        assert!(plain.body[..] == data[..], "v2 PUT of {len} bytes");
        let (back, g) = v2::get(&s3, &t, Span::new(0, len as u64).unwrap())
            .unwrap_or_else(|a| panic!("v2 GET {len}: {} {}", a.status, a.text()));
        assert!(back == data, "v2 GET of {len} bytes");
        assert_eq!(g.etag, plain.header("etag"));
    }
}
