//! RDMA GETs from the embedded store read the object's file straight into
//! staging buffers (the store's answer carries its open file and range, and
//! the body is never read): the bytes are exact for a whole object, a range
//! and a part, `hipobj_rdma_store_direct_bytes_total` counts exactly the
//! bytes moved, and everything the store decides still holds (a failed
//! condition is its 412, and nothing is read or written). In front of a
//! remote store the counter stays 0 (`external_upstream.rs` moves the
//! bytes from the body).

use std::path::Path;

use hipobj_testkit::process::{gateway_with, ServerProc};
use hipobj_testkit::rdma::{client, pattern, RdmaOps};
use hipobj_testkit::s3::{xml_field, S3};
use http::Method;

const MIB: usize = 1 << 20;

/// A gateway in front of its embedded store in a directory of its own
/// (returned: the tests reach into it), with `extra` arguments.
fn gateway_on_a_store(extra: &[&str]) -> (tempfile::TempDir, ServerProc) {
    let store = tempfile::tempdir().unwrap();
    let mut args = vec!["--data-dir", store.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    let gw = gateway_with(Path::new(env!("CARGO_BIN_EXE_hipobj-gateway")), &args, &[]);
    (store, gw)
}
const DIRECT: &str = "hipobj_rdma_store_direct_bytes_total";
const MAPPED: &str = "hipobj_rdma_store_mapped_bytes_total";

#[test]
fn rdma_gets_read_the_store_file_straight_into_staging() {
    let (_store, gw) = gateway_on_a_store(&["--chunk-mib", "1", "--staging-buffers", "4"]);
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
    // 1 MiB and more: WRITEs straight from the mapped file.
    assert_eq!(s3.metric(MAPPED, &[]), len as f64);

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
    assert_eq!(s3.metric(MAPPED, &[]), (len + n) as f64);

    // Under 1 MiB: read into staging, not mapped.
    let (first, last) = (4097usize, 4097 + 1000);
    let mut ops = RdmaOps::new(&s3, Method::GET, "/direct/obj")
        .with_header("range", &format!("bytes={first}-{last}"));
    reg.get(0, 1001, &mut ops).unwrap();
    assert_eq!(ops.last().status, 206, "{}", ops.last().text());
    assert!(reg.to_vec().unwrap()[..1001] == data[first..=last]);
    assert_eq!(s3.metric(DIRECT, &[]), (len + n + 1001) as f64);
    assert_eq!(s3.metric(MAPPED, &[]), (len + n) as f64);
    let n = n + 1001;

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
    let (_store, gw) = gateway_on_a_store(&[]);
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
    assert_eq!(s3.metric(MAPPED, &[]), p2.len() as f64);
}

/// The object's file in the store's directory: the one file of `len`
/// bytes under `buckets/`.
fn object_file(store: &Path, len: u64) -> std::path::PathBuf {
    fn walk(dir: &Path, len: u64, found: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, len, found);
            } else if e.metadata().unwrap().len() == len {
                found.push(p);
            }
        }
    }
    let mut found = Vec::new();
    walk(&store.join("buckets"), len, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// A hipobj-rc-v2 GET of a whole object is sent from the mapped file and
/// names the object's stored CRC-64/NVME, never one of the bytes the
/// gateway would have read: a file damaged on disk since the PUT is sent
/// as it is, and the CRC FINAL names is the PUT's, which the client's
/// check of the bytes it received catches. A range (no stored CRC of its
/// own) is read into staging and its CRC computed.
#[test]
fn a_v2_get_from_the_mapped_file_names_the_stored_crc() {
    use hipobj_testkit::rc_v2::{self as v2, target};
    use hipobj_testkit::rdma::crc64nvme as crc;
    use hipobj_wire::rc_v2::Span;
    let (store, gw) = gateway_on_a_store(&[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("mapped");
    let len = 3 * MIB + 5;
    let data = pattern(77, len);
    let t = target("mapped", "obj");
    let f = v2::put(&s3, &t, &data).unwrap_or_else(|a| panic!("{} {}", a.status, a.text()));
    assert_eq!(f.checksum, Some(crc(&data)));

    let (back, g) = v2::get(&s3, &t, Span::new(0, len as u64).unwrap()).unwrap();
    assert!(back == data, "byte-exact");
    assert_eq!(g.checksum, Some(crc(&data)));
    assert_eq!(s3.metric(MAPPED, &[]), len as f64);

    // A range: staging, its own CRC.
    let span = Span::new(MIB as u64 + 3, 2 * MIB as u64).unwrap();
    let (back, g) = v2::get(&s3, &t, span).unwrap();
    let want = &data[MIB + 3..3 * MIB + 3];
    assert!(back[..] == want[..]);
    assert_eq!(g.checksum, Some(crc(want)));
    assert_eq!(s3.metric(MAPPED, &[]), len as f64, "a range is not mapped");

    // The file damaged on disk, its length kept.
    let path = object_file(store.path(), len as u64);
    let mut damaged = std::fs::read(&path).unwrap();
    damaged[2 * MIB] ^= 0xFF;
    std::fs::write(&path, &damaged).unwrap();
    let (back, g) = v2::get(&s3, &t, Span::new(0, len as u64).unwrap()).unwrap();
    assert!(back == damaged, "the file's bytes, as they are");
    assert_eq!(g.checksum, Some(crc(&data)), "the PUT's CRC");
    assert_ne!(
        g.checksum,
        Some(crc(&back)),
        "which the received bytes fail"
    );
}

/// An object file cut short under the store (its record says more) is
/// never mapped past its end: the GET fails as it did from staging (the
/// store's 502), the gateway lives on and serves the next GET.
#[test]
fn a_file_cut_short_fails_the_get_and_nothing_else() {
    let (store, gw) = gateway_on_a_store(&[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("short");
    let len = 2 * MIB + 1;
    let (a, b) = (pattern(5, len), pattern(6, len + 1));
    assert!(s3.put_plain("/short/a", a).status.is_success());
    assert!(s3.put_plain("/short/b", b.clone()).status.is_success());
    let path = object_file(store.path(), len as u64);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(MIB as u64)
        .unwrap();
    let lib = client();
    let mut buf = vec![0u8; len + 1];
    let reg = lib.register_host(&mut buf).unwrap();
    let mut ops = RdmaOps::new(&s3, Method::GET, "/short/a");
    assert!(reg.get(0, len, &mut ops).is_err());
    assert_eq!(ops.last().status, 502, "{}", ops.last().text());
    assert_eq!(s3.metric(MAPPED, &[]), 0.0);
    // The gateway is alive and the other object is whole.
    let mut ops = RdmaOps::new(&s3, Method::GET, "/short/b");
    reg.get(0, len + 1, &mut ops).unwrap();
    assert!(reg.to_vec().unwrap() == b);
    assert_eq!(s3.metric(MAPPED, &[]), (len + 1) as f64);
}
