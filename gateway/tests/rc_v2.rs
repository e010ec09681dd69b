//! hipobj-rc-v2 against the real gateway binary (embedded store, software
//! RDMA), driven by testkit's raw v2 peer: PUT by the client's
//! WRITE_WITH_IMM into the session's staging region, GET by the gateway's
//! WRITEs ending in a WRITE_WITH_IMM; whole objects, ranges and parts;
//! FINAL's cookie echo, ETag and CRC-64/NVME checked against the bytes and
//! what a plain GET sees.

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rc_v2::{self as v2, target};
use hipobj_testkit::rdma::{crc64nvme as crc, pattern};
use hipobj_testkit::s3::{xml_field, S3};
use hipobj_wire::rc_v2::{Span, Target};
use http::Method;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

#[test]
fn v2_puts_and_gets_objects_and_ranges_byte_exact() {
    // 1 MiB chunks: the larger objects take several WRITEs, the last one
    // WRITE_WITH_IMM.
    let gw = gateway_with(bin(), &["--chunk-mib", "1", "--staging-buffers", "8"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("v2-data");
    for (i, size) in [1usize, 4096, (3 << 20) + 5].into_iter().enumerate() {
        let data = pattern(40 + i as u64, size);
        let t = target("v2-data", &format!("dir/obj {i}"));
        let f = v2::put(&s3, &t, &data)
            .unwrap_or_else(|a| panic!("PUT {size}: {} {}", a.status, a.text()));
        assert_eq!(f.bytes, size as u64);
        assert_eq!(f.checksum, Some(crc(&data)), "FINAL's CRC is the bytes'");
        assert!(f.parts, "FINAL names the mp capability");
        let plain = s3.get_plain(&format!("/v2-data/dir/obj%20{i}"));
        assert_eq!(plain.status, 200);
        assert!(
            plain.body[..] == data[..],
            "PUT stored the bytes written ({size})"
        );
        assert_eq!(f.etag, plain.header("etag"), "FINAL's ETag is the object's");

        let (back, g) = v2::get(&s3, &t, Span::new(0, size as u64).unwrap())
            .unwrap_or_else(|a| panic!("GET {size}: {} {}", a.status, a.text()));
        assert!(back == data, "GET is byte-exact ({size})");
        assert_eq!(g.bytes, size as u64);
        assert_eq!(g.checksum, Some(crc(&data)));
        assert_eq!(g.etag, plain.header("etag"));
    }
    // A range across a chunk edge.
    let data = pattern(42, (3 << 20) + 5);
    let t = target("v2-data", "dir/obj 2");
    let span = Span::new((1 << 20) - 7, (1 << 20) + 100).unwrap();
    let (back, g) = v2::get(&s3, &t, span).unwrap();
    let want = &data[span.offset as usize..(span.offset + span.size) as usize];
    assert!(back[..] == want[..], "a ranged GET is byte-exact");
    assert_eq!(g.checksum, Some(crc(want)));
    // A range past the object's end: the store's 416, with the echo.
    let a = v2::get(&s3, &t, Span::new((3 << 20) + 5, 10).unwrap()).unwrap_err();
    assert_eq!(a.status, 416, "{}", a.text());
    assert_eq!(
        a.header("x-amz-rdma-protocol").as_deref(),
        Some("hipobj-rc-v2")
    );
    // A range that runs past it: refused, not short.
    let a = v2::get(&s3, &t, Span::new(3 << 20, 100).unwrap()).unwrap_err();
    assert_eq!(a.status, 400, "{}", a.text());
    // A missing object: the store's 404.
    let a = v2::get(&s3, &target("v2-data", "absent"), Span::new(0, 1).unwrap()).unwrap_err();
    assert_eq!(a.status, 404);
    assert_eq!(a.code().as_deref(), Some("NoSuchKey"));
    // Every session ended.
    assert_eq!(s3.metric("hipobj_rc_v2_sessions", &[]), 0.0);
    assert_eq!(s3.metric("hipobj_rc_v2_put_staging_bytes", &[]), 0.0);
}

#[test]
fn v2_moves_multipart_parts_both_ways() {
    let gw = gateway_with(bin(), &["--chunk-mib", "1"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("v2-parts");
    let created = s3.send(
        Method::POST,
        "/v2-parts/big?uploads",
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(created.status, 200, "{}", created.text());
    let upload = xml_field(&created.body, "UploadId").unwrap();
    let one = pattern(50, 5 << 20);
    let two = pattern(51, 12_345);
    let mut etags = Vec::new();
    for (n, data) in [(1, &one), (2, &two)] {
        let t = Target {
            query: Some(format!("uploadId={upload}&partNumber={n}")),
            ..target("v2-parts", "big")
        };
        let f = v2::put(&s3, &t, data)
            .unwrap_or_else(|a| panic!("UploadPart {n}: {} {}", a.status, a.text()));
        etags.push(f.etag.expect("an UploadPart's FINAL names the part's ETag"));
    }
    let done = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{}</ETag></Part><Part><PartNumber>2</PartNumber><ETag>{}</ETag></Part></CompleteMultipartUpload>",
        etags[0], etags[1]
    );
    let c = s3.send(
        Method::POST,
        &format!("/v2-parts/big?uploadId={upload}"),
        &[],
        done.into_bytes(),
        false,
    );
    assert_eq!(c.status, 200, "{}", c.text());
    let whole = s3.get_plain("/v2-parts/big");
    assert_eq!(whole.body.len(), one.len() + two.len());
    assert!(whole.body[..one.len()] == one[..] && whole.body[one.len()..] == two[..]);
    // Part 2 by a part GET (offset 0, the part's size).
    let t = Target {
        query: Some("partNumber=2".into()),
        ..target("v2-parts", "big")
    };
    let (back, _) = v2::get(&s3, &t, Span::new(0, two.len() as u64).unwrap()).unwrap();
    assert!(back == two, "a part GET is the part");
    // The wrong size for the part: refused.
    let a = v2::get(&s3, &t, Span::new(0, 10).unwrap()).unwrap_err();
    assert_eq!(a.status, 400, "{}", a.text());
}
