//! RDMA GETs from the embedded store read the object's file straight into
//! staging buffers (the store's answer carries its open file and range, and
//! the body is never read): the bytes are exact for a whole object, a range
//! and a part, `hipobj_rdma_store_direct_bytes_total` counts exactly the
//! bytes moved, and everything the store decides still holds (a failed
//! condition is its 412, and nothing is read or written). In front of a
//! remote store the counter stays 0 (`external_upstream.rs` moves the
//! bytes from the body).

use std::path::Path;

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::{client, pattern, RdmaOps};
use hipobj_testkit::s3::{xml_field, S3};
use http::Method;

const MIB: usize = 1 << 20;
const DIRECT: &str = "hipobj_rdma_store_direct_bytes_total";

#[test]
fn rdma_gets_read_the_store_file_straight_into_staging() {
    let store = tempfile::tempdir().unwrap();
    let gw = gateway_with(
        Path::new(env!("CARGO_BIN_EXE_hipobj-gateway")),
        &[
            "--data-dir",
            store.path().to_str().unwrap(),
            "--chunk-mib",
            "1",
            "--staging-buffers",
            "4",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("direct");
    let len = 5 * MIB + 3;
    let data = pattern(21, len);
    assert!(s3
        .put_plain("/direct/obj", data.clone())
        .status
        .is_success());
    let lib = client();
    let mut buf = vec![0u8; len];
    let reg = lib.register_host(&mut buf).unwrap();

    // The whole object, through 6 chunks of the 4-buffer pool.
    let mut ops = RdmaOps::new(&s3, Method::GET, "/direct/obj");
    reg.get(0, len, &mut ops).unwrap();
    assert_eq!(ops.last().status, 200, "{}", ops.last().text());
    assert!(reg.to_vec().unwrap() == data, "the whole object is exact");
    assert_eq!(s3.metric(DIRECT, &[]), len as f64);

    // A range not aligned to anything.
    let (first, last) = (1_000_001usize, 3 * MIB + 12_345);
    let n = last - first + 1;
    let mut ops = RdmaOps::new(&s3, Method::GET, "/direct/obj")
        .with_header("range", &format!("bytes={first}-{last}"));
    reg.get(0, n, &mut ops).unwrap();
    assert_eq!(ops.last().status, 206, "{}", ops.last().text());
    let got = reg.to_vec().unwrap();
    assert!(got[..n] == data[first..=last], "the range is exact");
    assert_eq!(s3.metric(DIRECT, &[]), (len + n) as f64);

    // A condition the store refuses: its 412, nothing read or written.
    reg.write(0, &vec![0xAB; len]).unwrap();
    let mut ops = RdmaOps::new(&s3, Method::GET, "/direct/obj")
        .with_header("if-match", "\"0123456789abcdef0123456789abcdef\"");
    let r = reg.get(0, len, &mut ops);
    assert_eq!(ops.last().status, 412, "{r:?} {}", ops.last().text());
    assert!(r.is_err());
    assert!(reg.to_vec().unwrap().iter().all(|b| *b == 0xAB));
    assert_eq!(s3.metric(DIRECT, &[]), (len + n) as f64);
}

/// A part of a multipart object (`partNumber=2`), from the part's place in
/// the object's file.
#[test]
fn a_part_is_read_from_its_place_in_the_file() {
    let store = tempfile::tempdir().unwrap();
    let gw = gateway_with(
        Path::new(env!("CARGO_BIN_EXE_hipobj-gateway")),
        &["--data-dir", store.path().to_str().unwrap()],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("parts");
    let (p1, p2) = (pattern(1, 5 * MIB), pattern(2, MIB + 7));
    let created = s3.send(Method::POST, "/parts/mp?uploads", &[], Vec::new(), false);
    assert_eq!(created.status, 200, "{}", created.text());
    let upload = xml_field(&created.body, "UploadId").unwrap();
    let mut done = String::from("<CompleteMultipartUpload>");
    for (i, part) in [(1, p1), (2, p2.clone())] {
        let path = format!("/parts/mp?partNumber={i}&uploadId={upload}");
        let a = s3.send(Method::PUT, &path, &[], part, false);
        assert_eq!(a.status, 200, "{}", a.text());
        let etag = a.header("etag").unwrap();
        done.push_str(&format!(
            "<Part><PartNumber>{i}</PartNumber><ETag>{etag}</ETag></Part>"
        ));
    }
    done.push_str("</CompleteMultipartUpload>");
    let path = format!("/parts/mp?uploadId={upload}");
    let a = s3.send(Method::POST, &path, &[], done.into_bytes(), false);
    assert_eq!(a.status, 200, "{}", a.text());
    let lib = client();
    let mut buf = vec![0u8; p2.len()];
    let reg = lib.register_host(&mut buf).unwrap();
    let mut ops = RdmaOps::new(&s3, Method::GET, "/parts/mp?partNumber=2");
    reg.get(0, p2.len(), &mut ops).unwrap();
    assert_eq!(ops.last().status, 206, "{}", ops.last().text());
    assert!(reg.to_vec().unwrap() == p2, "part 2 is exact");
    assert_eq!(s3.metric(DIRECT, &[]), p2.len() as f64);
}
