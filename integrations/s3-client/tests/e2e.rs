//! The S3 client end to end: against the test server and the gateway (by
//! RDMA), a server without RDMA (s3s-fs), and a proxy that declines RDMA.

#![forbid(unsafe_code)]

mod common;

use common::*;
use hipobj::Registered;
use hipobj_s3::{Error, ListOptions, Path, Selection};

fn contents(reg: &Registered<'_, 'static>, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    reg.read(off, &mut v).unwrap();
    v
}

#[track_caller]
fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i}");
    }
}

#[tokio::test]
async fn every_operation_is_byte_exact_over_rdma() {
    let server = test_server();
    let lib = lib();
    let mut cfg = rdma_config(&server.url, &lib);
    cfg.require_rdma = true;
    let s3 = client(cfg);
    let b = bucket("every-operation");
    s3.create_bucket(&b).await.unwrap();

    let len = (3 << 20) + 17;
    let data = pattern(1, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "obj", &src, 0, len).await.unwrap();
    assert_eq!(put.path, Path::Rdma);
    assert_eq!(put.bytes, len as u64);
    assert!(put.etag.is_some(), "{put:?}");
    assert_eq!(
        put.checksum_crc64nvme.as_deref(),
        Some(hipobj_s3::crc64nvme(&data).as_str())
    );

    // Whole object, at an offset into the buffer.
    let dst = lib.register_owned(vec![0u8; len + 4096]).unwrap();
    let got = s3.get_object(&b, "obj", &dst, 4096, None).await.unwrap();
    assert_eq!(got.path, Path::Rdma, "{got:?}");
    assert_eq!(got.bytes, len as u64);
    assert_eq!(got.object_size, Some(len as u64));
    assert!(got.checksum_verified, "{got:?}");
    assert_same("GET", &contents(&dst, 4096, len), &data);
    assert_eq!(
        contents(&dst, 0, 4096),
        vec![0u8; 4096],
        "bytes before the offset"
    );

    // A range.
    let r = s3
        .get_object(&b, "obj", &dst, 0, Some((1000, 1999)))
        .await
        .unwrap();
    assert_eq!(
        (r.path, r.bytes, r.status),
        (Path::Rdma, 1000, 206),
        "{r:?}"
    );
    assert_eq!(r.object_size, Some(len as u64));
    assert!(!r.checksum_verified);
    assert_same("range", &contents(&dst, 0, 1000), &data[1000..2000]);

    // HEAD.
    let info = s3.head_object(&b, "obj").await.unwrap();
    assert_eq!(info.size, len as u64);
    assert_eq!(info.etag, put.etag);

    // Listing: prefix, delimiter, continuation.
    for k in ["dir/a", "dir/b", "dir/sub/c", "other"] {
        let o = s3
            .put_object_http(&b, k, bytes::Bytes::from(k.as_bytes().to_vec()))
            .await
            .unwrap();
        assert_eq!(o.path, Path::Http);
    }
    let page = s3
        .list_objects_v2(
            &b,
            &ListOptions {
                prefix: Some("dir/".into()),
                delimiter: Some("/".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let keys: Vec<_> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["dir/a", "dir/b"]);
    assert_eq!(page.common_prefixes, ["dir/sub/"]);
    let mut opts = ListOptions {
        max_keys: Some(2),
        ..Default::default()
    };
    let mut all = Vec::new();
    loop {
        let p = s3.list_objects_v2(&b, &opts).await.unwrap();
        all.extend(p.objects.iter().map(|o| (o.key.clone(), o.size)));
        if !p.is_truncated {
            break;
        }
        assert!(p.objects.len() <= 2);
        opts.continuation_token = p.next_continuation_token;
        assert!(opts.continuation_token.is_some());
    }
    let names: Vec<_> = all.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["dir/a", "dir/b", "dir/sub/c", "obj", "other"]);
    assert_eq!(all[3].1, len as u64);
    assert!(s3.list_buckets().await.unwrap().iter().any(|x| x.name == b));

    // Delete.
    s3.delete_object(&b, "obj").await.unwrap();
    let e = s3.head_object(&b, "obj").await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = s3.get_object(&b, "obj", &dst, 0, None).await.unwrap_err();
    assert_eq!(e.code(), Some("NoSuchKey"), "{e:?}");
    assert!(s3.no_rdma_remembered().is_none());
}

#[tokio::test]
async fn multipart_parts_go_in_parallel_by_rdma() {
    let server = test_server();
    let lib = lib();
    let mut cfg = rdma_config(&server.url, &lib);
    cfg.require_rdma = true;
    cfg.part_size = 5 << 20;
    cfg.concurrency = 4;
    let s3 = client(cfg);
    let b = bucket("multipart");
    s3.create_bucket(&b).await.unwrap();

    let len = 3 * (5 << 20) + 12345;
    let data = pattern(2, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "big", &src, 0, len).await.unwrap();
    assert_eq!(
        (put.path, put.parts, put.bytes),
        (Path::Rdma, 4, len as u64),
        "{put:?}"
    );
    assert!(put.etag.is_some());

    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "big", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, len as u64));
    assert_same("multipart GET", &contents(&dst, 0, len), &data);

    // The last part's range, by RDMA.
    let first = (3 * (5 << 20)) as u64;
    let r = s3
        .get_object(&b, "big", &dst, 0, Some((first, len as u64 - 1)))
        .await
        .unwrap();
    assert_eq!(r.bytes, 12345);
    assert_same("tail", &contents(&dst, 0, 12345), &data[first as usize..]);

    // The low-level calls: parts from two places of the buffer.
    let id = s3.create_multipart_upload(&b, "manual").await.unwrap();
    let p1 = s3
        .upload_part(&b, "manual", &id, 1, &src, 0, 5 << 20)
        .await
        .unwrap();
    let p2 = s3
        .upload_part(&b, "manual", &id, 2, &src, 7, 100)
        .await
        .unwrap();
    assert_eq!((p1.path, p2.path), (Path::Rdma, Path::Rdma));
    s3.complete_multipart_upload(
        &b,
        "manual",
        &id,
        &[
            hipobj_s3::CompletedPart {
                part_number: 1,
                etag: p1.etag.unwrap(),
            },
            hipobj_s3::CompletedPart {
                part_number: 2,
                etag: p2.etag.unwrap(),
            },
        ],
    )
    .await
    .unwrap();
    let mut want = data[..5 << 20].to_vec();
    want.extend_from_slice(&data[7..107]);
    let got = s3.get_object(&b, "manual", &dst, 0, None).await.unwrap();
    assert_eq!(got.bytes, want.len() as u64);
    assert_same("manual multipart", &contents(&dst, 0, want.len()), &want);

    // An aborted upload leaves nothing.
    let id = s3.create_multipart_upload(&b, "aborted").await.unwrap();
    s3.upload_part(&b, "aborted", &id, 1, &src, 0, 1 << 20)
        .await
        .unwrap();
    s3.abort_multipart_upload(&b, "aborted", &id).await.unwrap();
    assert!(s3
        .head_object(&b, "aborted")
        .await
        .unwrap_err()
        .is_not_found());
}

#[tokio::test]
async fn empty_objects_and_buffers_too_small() {
    let server = test_server();
    let lib = lib();
    let mut cfg = rdma_config(&server.url, &lib);
    cfg.require_rdma = true;
    let s3 = client(cfg);
    let b = bucket("edges");
    s3.create_bucket(&b).await.unwrap();
    let reg = lib.register_owned(pattern(3, 1 << 20)).unwrap();

    // An empty object goes over HTTP (RDMA cannot move zero bytes).
    let put = s3.put_object(&b, "empty", &reg, 0, 0).await.unwrap();
    assert_eq!((put.path, put.bytes), (Path::Http, 0));
    let got = s3.get_object(&b, "empty", &reg, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, 0));

    // An object larger than the room left in the buffer.
    s3.put_object(&b, "mib", &reg, 0, 1 << 20).await.unwrap();
    let e = s3.get_object(&b, "mib", &reg, 1, None).await.unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { .. }), "{e:?}");
    let e = s3
        .get_object(&b, "mib", &reg, 1, Some((0, 1 << 20)))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::BufferTooSmall { needed: Some(n), .. } if n == (1 << 20) + 1),
        "{e:?}"
    );
    // Arguments outside the buffer.
    let e = s3.put_object(&b, "x", &reg, 1, 1 << 20).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = s3
        .get_object(&b, "mib", &reg, 1 << 20, None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

/// `501` followed by anything is a decline, as hipObject's library reads
/// it: the client falls back to plain HTTP rather than failing.
#[tokio::test]
async fn a_501_with_more_after_it_is_a_decline() {
    let server = test_server();
    let proxy = Proxy::start(
        &server.url,
        Behavior {
            decline: true,
            decline_reply: Some("501:RDMA is not served for this bucket".into()),
            ..Default::default()
        },
    );
    let lib = lib();
    let s3 = client(rdma_config(&proxy.url, &lib));
    let b = bucket("declined-loosely");
    s3.create_bucket(&b).await.unwrap();
    let data = pattern(9, 70_000);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "k", &src, 0, data.len()).await.unwrap();
    assert_eq!(put.path, Path::Http, "{put:?}");
    assert!(
        put.fallback_reason.as_deref().unwrap().contains("declined"),
        "{put:?}"
    );
    let dst = lib.register_owned(vec![0u8; data.len()]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).await.unwrap();
    assert_eq!(got.path, Path::Http, "{got:?}");
    assert_same("fallback GET", &contents(&dst, 0, data.len()), &data);
}

#[tokio::test]
async fn declined_transfers_fall_back_to_http() {
    let server = test_server();
    let proxy = Proxy::start(
        &server.url,
        Behavior {
            decline: true,
            ..Default::default()
        },
    );
    let lib = lib();
    let mut cfg = rdma_config(&proxy.url, &lib);
    cfg.part_size = 5 << 20;
    let s3 = client(cfg.clone());
    let b = bucket("declined");
    s3.create_bucket(&b).await.unwrap();

    let len = (2 << 20) + 5;
    let data = pattern(4, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "k", &src, 0, len).await.unwrap();
    assert_eq!(put.path, Path::Http, "{put:?}");
    assert!(
        put.fallback_reason.as_deref().unwrap().contains("declined"),
        "{put:?}"
    );
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Http, len as u64), "{got:?}");
    assert!(got.checksum_verified, "{got:?}");
    assert_same("fallback GET", &contents(&dst, 0, len), &data);
    let r = s3
        .get_object(&b, "k", &dst, 0, Some((10, 19)))
        .await
        .unwrap();
    assert_eq!((r.path, r.bytes), (Path::Http, 10));
    assert_same("fallback range", &contents(&dst, 0, 10), &data[10..20]);
    let seen = proxy.seen();
    assert!(
        seen.iter().filter(|t| !t.handshake).count() >= 3,
        "{seen:?}"
    );
    // The handshakes went as HEADs, and were answered: the pair connected.
    assert!(seen.iter().any(|t| t.handshake));
    assert!(seen
        .iter()
        .filter(|t| t.handshake)
        .all(|t| t.method == "HEAD"));
    // A decline is about one request: the endpoint is not marked.
    assert!(s3.no_rdma_remembered().is_none());

    // Multipart whose parts are declined: every part over HTTP.
    let big = 11 << 20;
    let bigdata = pattern(5, big);
    let bigreg = lib.register_owned(bigdata.clone()).unwrap();
    let put = s3.put_object(&b, "big", &bigreg, 0, big).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Http, 3), "{put:?}");
    let back = lib.register_owned(vec![0u8; big]).unwrap();
    let got = s3.get_object(&b, "big", &back, 0, None).await.unwrap();
    assert_same("fallback multipart", &contents(&back, 0, big), &bigdata);

    // require_rdma: an error, and the object is left as it was.
    cfg.require_rdma = true;
    let strict = client(cfg);
    let e = strict.get_object(&b, "k", &dst, 0, None).await.unwrap_err();
    assert!(matches!(e, Error::RdmaRequired { .. }), "{e:?}");
    let other = pattern(6, len);
    let other_reg = lib.register_owned(other.clone()).unwrap();
    let e = strict
        .put_object(&b, "k", &other_reg, 0, len)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::RdmaRequired { .. }), "{e:?}");
    let e = strict
        .put_object(&b, "big", &bigreg, 0, big)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::RdmaRequired { .. }), "{e:?}");
    let mut out = Vec::new();
    s3.get_object_http(&b, "k", Selection::Whole, &mut out)
        .await
        .unwrap();
    assert_same("unchanged after a refused PUT", &out, &data);
    drop(got);
}

#[tokio::test]
async fn a_server_without_rdma_is_served_over_http() {
    let plain = PlainS3::start();
    let lib = lib();
    let mut cfg = rdma_config(&plain.url, &lib);
    cfg.part_size = 5 << 20;
    let s3 = client(cfg.clone());
    let b = bucket("no-rdma");
    s3.create_bucket(&b).await.unwrap();

    let len = (1 << 20) + 3;
    let data = pattern(7, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "k", &src, 0, len).await.unwrap();
    assert_eq!(put.path, Path::Http, "{put:?}");
    assert!(
        put.fallback_reason
            .as_deref()
            .unwrap()
            .contains("x-amz-rdma-reply"),
        "{put:?}"
    );
    // Learnt from the handshake, remembered for the endpoint.
    assert!(s3.no_rdma_remembered().is_some());
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Http, len as u64), "{got:?}");
    assert!(got.checksum_verified, "{got:?}");
    assert!(got
        .fallback_reason
        .as_deref()
        .unwrap()
        .contains("remembered"));
    assert_same("GET", &contents(&dst, 0, len), &data);
    let r = s3
        .get_object(&b, "k", &dst, 0, Some((5, 1004)))
        .await
        .unwrap();
    assert_eq!((r.path, r.bytes), (Path::Http, 1000));
    assert_same("range", &contents(&dst, 0, 1000), &data[5..1005]);

    let big = (10 << 20) + 1;
    let bigdata = pattern(8, big);
    let bigreg = lib.register_owned(bigdata.clone()).unwrap();
    let put = s3.put_object(&b, "big", &bigreg, 0, big).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Http, 3));
    let mut back = Vec::new();
    let got = s3
        .get_object_http(&b, "big", Selection::Whole, &mut back)
        .await
        .unwrap();
    assert_eq!(got.bytes, big as u64);
    assert_same("multipart over HTTP", &back, &bigdata);

    // require_rdma: refused, whether remembered or learnt again.
    cfg.require_rdma = true;
    let strict = client(cfg);
    let e = strict.get_object(&b, "k", &dst, 0, None).await.unwrap_err();
    assert!(matches!(e, Error::RdmaRequired { .. }), "{e:?}");
    strict.forget_no_rdma();
    let other = pattern(9, len);
    let other_reg = lib.register_owned(other.clone()).unwrap();
    let e = strict
        .put_object(&b, "k", &other_reg, 0, len)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::RdmaRequired { reason } if reason.contains("x-amz-rdma-reply")),
        "{e:?}"
    );
    assert!(strict.no_rdma_remembered().is_some());
    // Nothing was overwritten with nothing.
    let mut out = Vec::new();
    s3.get_object_http(&b, "k", Selection::Whole, &mut out)
        .await
        .unwrap();
    assert_same("unchanged", &out, &data);
}

#[tokio::test]
async fn the_gateway_in_front_of_s3s_fs_moves_by_rdma_and_corruption_is_caught() {
    let plain = PlainS3::start();
    let gw = gateway(&plain.url);
    let lib = lib();
    let mut cfg = rdma_config(&gw.url, &lib);
    cfg.require_rdma = true;
    cfg.part_size = 5 << 20;
    let s3 = client(cfg);
    let b = bucket("gateway");
    s3.create_bucket(&b).await.unwrap();

    let len = (2 << 20) + 77;
    let data = pattern(10, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "k", &src, 0, len).await.unwrap();
    assert_eq!(put.path, Path::Rdma);
    let dst = lib.register_owned(vec![0u8; 12 << 20]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, len as u64));
    assert!(got.checksum_verified, "{got:?}");
    assert_same("GET through the gateway", &contents(&dst, 0, len), &data);
    let r = s3
        .get_object(&b, "k", &dst, 0, Some((100, 199)))
        .await
        .unwrap();
    assert_eq!((r.path, r.bytes), (Path::Rdma, 100));
    assert_same("range", &contents(&dst, 0, 100), &data[100..200]);
    let big = (10 << 20) + 9;
    let bigdata = pattern(11, big);
    let bigreg = lib.register_owned(bigdata.clone()).unwrap();
    let put = s3.put_object(&b, "big", &bigreg, 0, big).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Rdma, 3));
    let got = s3.get_object(&b, "big", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, big as u64));
    assert_same(
        "multipart via the gateway",
        &contents(&dst, 0, big),
        &bigdata,
    );

    // Corrupt the stored bytes (same length); the store still declares the
    // checksum of the bytes that were PUT.
    let file = plain.object_file(&b, "k");
    let mut bytes = std::fs::read(&file).unwrap();
    assert_same("stored", &bytes, &data);
    bytes[len / 2] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let e = s3.get_object(&b, "k", &dst, 0, None).await.unwrap_err();
    assert!(
        matches!(&e, Error::ChecksumMismatch { path: Path::Rdma, expected, .. } if *expected == hipobj_s3::crc64nvme(&data)),
        "{e:?}"
    );

    // The same over plain HTTP, straight from the store.
    let http_only = client(hipobj_s3::ClientConfig::new(&plain.url, AK, SK));
    let e = http_only
        .get_object(&b, "k", &dst, 0, None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ChecksumMismatch {
                path: Path::Http,
                ..
            }
        ),
        "{e:?}"
    );
    let mut out = Vec::new();
    let e = http_only
        .get_object_http(&b, "k", Selection::Whole, &mut out)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e:?}");
    // A range carries no checksum to compare with.
    let r = http_only
        .get_object(&b, "k", &dst, 0, Some((0, 9)))
        .await
        .unwrap();
    assert_eq!(r.bytes, 10);
}

#[test]
fn the_blocking_client() {
    let server = test_server();
    let lib = lib();
    let mut cfg = rdma_config(&server.url, &lib);
    cfg.require_rdma = true;
    cfg.part_size = 5 << 20;
    let s3 = hipobj_s3::blocking::S3Client::new(cfg).unwrap();
    let b = bucket("blocking");
    s3.create_bucket(&b).unwrap();
    let len = (6 << 20) + 1;
    let data = pattern(12, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "k", &src, 0, len).unwrap();
    assert_eq!((put.path, put.parts), (Path::Rdma, 2));
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, len as u64));
    assert_same("blocking GET", &contents(&dst, 0, len), &data);
    let mut out = Vec::new();
    let h = s3
        .get_object_http(&b, "k", Selection::Range { first: 0, last: 99 }, &mut out)
        .unwrap();
    assert_eq!((h.path, h.bytes), (Path::Http, 100));
    assert_same("blocking HTTP range", &out, &data[..100]);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &data[..12345]).unwrap();
    let p = s3.put_object_http_file(&b, "f", file.path()).unwrap();
    assert_eq!(p.bytes, 12345);
    assert_eq!(s3.head_object(&b, "f").unwrap().size, 12345);
    let page = s3.list_objects_v2(&b, &ListOptions::default()).unwrap();
    assert_eq!(page.objects.len(), 2);
    s3.delete_object(&b, "f").unwrap();
    assert!(s3.head_object(&b, "f").unwrap_err().is_not_found());
}

#[tokio::test]
async fn parts_move_in_parallel_and_attempts_are_bounded() {
    let server = test_server();
    let lib = lib();
    let b = bucket("parallel");

    // Each transfer is held 300 ms by the proxy: parts in parallel overlap.
    let slow = Proxy::start(
        &server.url,
        Behavior {
            delay: std::time::Duration::from_millis(300),
            ..Default::default()
        },
    );
    let mut cfg = rdma_config(&slow.url, &lib);
    cfg.require_rdma = true;
    cfg.part_size = 5 << 20;
    cfg.concurrency = 4;
    let s3 = client(cfg);
    s3.create_bucket(&b).await.unwrap();
    let len = 4 * (5 << 20);
    let data = pattern(13, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object(&b, "big", &src, 0, len).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Rdma, 4));
    let max = slow
        .state
        .max_in_flight
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(max >= 2, "parts did not overlap (at most {max} at once)");
    // The RDMA requests' connections are bound to the token's NIC address.
    let seen = slow.seen();
    assert!(seen.iter().all(|t| t.peer.to_string() == "127.0.0.1"));
    let gids: std::collections::HashSet<_> = seen
        .iter()
        .map(|t| hipobj_wire::Token::decode(&t.token).unwrap().client_ip())
        .collect();
    assert_eq!(gids.len(), 1, "{gids:?}");

    // The first transfer answered 503: a second attempt with a new token.
    let flaky = Proxy::start(
        &server.url,
        Behavior {
            fail_first: 1,
            ..Default::default()
        },
    );
    let mut cfg = rdma_config(&flaky.url, &lib);
    cfg.require_rdma = true;
    let s3 = client(cfg.clone());
    let put = s3.put_object(&b, "k", &src, 0, 1 << 20).await.unwrap();
    assert_eq!((put.path, put.attempts), (Path::Rdma, 2), "{put:?}");
    let transfers: Vec<_> = flaky
        .seen()
        .into_iter()
        .filter(|t| !t.handshake)
        .map(|t| t.token)
        .collect();
    // Each attempt is a transfer of its own through the library, which
    // mints its token (the same value when it leases the same connected QP
    // for the same bytes).
    assert_eq!(transfers.len(), 2);
    let dst = lib.register_owned(vec![0u8; 1 << 20]).unwrap();
    let got = s3.get_object(&b, "k", &dst, 0, None).await.unwrap();
    assert_same(
        "after a retry",
        &contents(&dst, 0, 1 << 20),
        &data[..1 << 20],
    );
    assert_eq!(got.path, Path::Rdma);

    // Attempts are bounded: a transfer refused for capacity (no staging
    // buffer) every time is retried, then the request falls back to HTTP,
    // its reason naming the refusal.
    let down = Proxy::start(
        &server.url,
        Behavior {
            fail_first: usize::MAX,
            ..Default::default()
        },
    );
    let mut cfg = rdma_config(&down.url, &lib);
    cfg.attempts = 3;
    let s3 = client(cfg.clone());
    let put = s3.put_object(&b, "fell-back", &src, 0, 4096).await.unwrap();
    assert_eq!(put.path, Path::Http, "{put:?}");
    let reason = put.fallback_reason.unwrap_or_default();
    assert!(
        reason.contains("no RDMA staging buffer free") && reason.contains("3 attempts"),
        "{reason}"
    );
    assert_eq!(
        down.state
            .transfers
            .load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    let dst = lib.register_owned(vec![0u8; 4096]).unwrap();
    let got = s3.get_object(&b, "fell-back", &dst, 0, None).await.unwrap();
    assert_eq!(got.path, Path::Http, "{got:?}");
    assert_same("fell back", &contents(&dst, 0, 4096), &data[..4096]);
    // With require_rdma it is the error, and no object is left.
    cfg.require_rdma = true;
    let s3 = client(cfg);
    match s3.put_object(&b, "never", &src, 0, 4096).await {
        Err(Error::RdmaRequired { reason }) => {
            assert!(reason.contains("503 SlowDown"), "{reason}")
        }
        other => panic!("expected RdmaRequired, got {other:?}"),
    }
    assert!(s3
        .head_object(&b, "never")
        .await
        .unwrap_err()
        .is_not_found());
}

/// A server at its pair limit (`--max-pairs-per-key 1`, the one pair held
/// by another client's connection) refuses the handshake with 503: each
/// request of the refused client falls back to HTTP, byte exact, and
/// nothing is remembered; with `require_rdma` the error names the refusal.
#[tokio::test]
async fn a_handshake_refused_for_capacity_falls_back_per_request() {
    let server = hipobj_testkit::test_server(
        &hipobj_testkit::workspace_bin("hipobj-test-server"),
        &[
            "0",
            "--rdma-device",
            "soft0",
            "--staging-buffers",
            "8",
            "--max-pairs-per-key",
            "1",
        ],
    );
    let b = bucket("capacity");
    // Client A takes the key's one pair, and keeps it (its library's
    // connection stays connected).
    let lib_a = lib();
    let mut cfg_a = rdma_config(&server.url, &lib_a);
    cfg_a.require_rdma = true;
    let a = client(cfg_a);
    a.create_bucket(&b).await.unwrap();
    let big = (3 << 20) + 5;
    let data = pattern(41, big);
    let src_a = lib_a.register_owned(data.clone()).unwrap();
    let put = a.put_object(&b, "by-a", &src_a, 0, big).await.unwrap();
    assert_eq!(put.path, Path::Rdma, "{put:?}");

    // Client B: a library of its own, so a QP of its own, and no pair left.
    let lib_b = lib();
    let s3 = client(rdma_config(&server.url, &lib_b));
    // A large PUT (blocking thread) and a small one (stepwise).
    let data_b = pattern(42, big);
    let src_b = lib_b.register_owned(data_b.clone()).unwrap();
    let put = s3.put_object(&b, "by-b", &src_b, 0, big).await.unwrap();
    assert_eq!(put.path, Path::Http, "{put:?}");
    let reason = put.fallback_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("refused the RDMA handshake for capacity") && reason.contains("503"),
        "{reason}"
    );
    let small = s3.put_object(&b, "small", &src_b, 0, 4096).await.unwrap();
    assert_eq!(small.path, Path::Http, "{small:?}");
    // Nothing is remembered: capacity frees up.
    assert_eq!(s3.no_rdma_remembered(), None);

    // GETs of both objects, large and small, over HTTP, byte exact.
    let dst_b = lib_b.register_owned(vec![0u8; big]).unwrap();
    let got = s3.get_object(&b, "by-a", &dst_b, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Http, big as u64), "{got:?}");
    assert_same("GET over HTTP", &contents(&dst_b, 0, big), &data);
    let got = s3.get_object(&b, "small", &dst_b, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Http, 4096), "{got:?}");
    assert_same("small GET", &contents(&dst_b, 0, 4096), &data_b[..4096]);

    // Client A still moves by RDMA through its pair, and sees B's bytes.
    let dst_a = lib_a.register_owned(vec![0u8; big]).unwrap();
    let got = a.get_object(&b, "by-b", &dst_a, 0, None).await.unwrap();
    assert_eq!(got.path, Path::Rdma, "{got:?}");
    assert_same("B's PUT", &contents(&dst_a, 0, big), &data_b);

    // With require_rdma, B's refusal is the error, naming the cause, for
    // both paths of the client.
    let mut cfg = rdma_config(&server.url, &lib_b);
    cfg.require_rdma = true;
    let strict = client(cfg);
    for len in [big, 4096] {
        match strict
            .get_object(&b, "by-a", &dst_b, 0, Some((0, len as u64 - 1)))
            .await
        {
            Err(Error::RdmaRequired { reason }) => assert!(
                reason.contains("refused the RDMA handshake for capacity")
                    && reason.contains("SlowDown"),
                "{reason}"
            ),
            other => panic!("expected RdmaRequired, got {other:?}"),
        }
        match strict.put_object(&b, "strict", &src_b, 0, len).await {
            Err(Error::RdmaRequired { reason }) => {
                assert!(reason.contains("capacity"), "{reason}")
            }
            other => panic!("expected RdmaRequired, got {other:?}"),
        }
    }
    assert!(strict
        .head_object(&b, "strict")
        .await
        .unwrap_err()
        .is_not_found());
}

/// The attack of a forgotten transfer: a PUT (and a GET) of more than 1 MiB
/// is polled once, so that its blocking thread starts, then leaked with
/// `mem::forget`, and the caller's handle dropped. The thread owns a handle
/// of its own: the registration, and the memory it owns, live until the
/// thread is done, then the buffer is deregistered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_transfer_keeps_its_buffer_alive() {
    use std::future::Future;
    use std::task::{Context, Poll};

    let server = test_server();
    let lib = lib();
    let s3 = client(rdma_config(&server.url, &lib));
    let b = bucket("forgotten");
    s3.create_bucket(&b).await.unwrap();
    let len = 4 << 20;
    let data = pattern(43, len);
    let plain = lib.register_owned(data.clone()).unwrap();
    s3.put_object(&b, "k", &plain, 0, len).await.unwrap();
    drop(plain);
    assert_eq!(lib.instance().buffers.len(), 0);

    let waker = futures::task::noop_waker();
    // PUT: the first poll starts the checksum pass (and, when that ends at
    // once, the transfer) on a blocking thread. GET: the transfer.
    for get in [false, true] {
        let reg = lib
            .register_owned(if get { vec![0u8; len] } else { data.clone() })
            .unwrap();
        let mut fut: std::pin::Pin<Box<dyn Future<Output = _> + Send + '_>> = if get {
            Box::pin(s3.get_object(&b, "k", &reg, 0, None))
        } else {
            Box::pin(s3.put_object(&b, "k2", &reg, 0, len))
        };
        let first = fut.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(matches!(first, Poll::Pending), "the transfer is under way");
        // The thread (and the future, once in the transfer) holds handles
        // of its own besides the caller's.
        assert!(reg.handles() >= 2, "{} handles", reg.handles());
        std::mem::forget(fut);
        // The caller's handle goes, and the memory with it were the
        // registration not shared: the thread goes on with its own handle
        // (and a leaked future's handle keeps the buffer for good: a leak,
        // never a free under a transfer).
        drop(reg);
    }
    // The client and the server still work, and the buffers the leaked
    // futures hold are still registered, or were deregistered by the last
    // handle when their thread ended: at most the two, besides this one.
    let back = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "k", &back, 0, None).await.unwrap();
    assert_eq!(got.path, Path::Rdma, "{got:?}");
    assert_same(
        "after the forgotten transfers",
        &contents(&back, 0, len),
        &data,
    );
    assert!(lib.instance().buffers.len() <= 3);
}

#[tokio::test]
async fn virtual_hosted_addressing_moves_by_rdma() {
    // The test server knows its endpoint's host as a domain: `Host:
    // <bucket>.127.0.0.1:<port>` is virtual-hosted there.
    let server = hipobj_testkit::test_server(
        &hipobj_testkit::workspace_bin("hipobj-test-server"),
        &[
            "0",
            "--rdma-device",
            "soft0",
            "--staging-buffers",
            "8",
            "--domain",
            "127.0.0.1",
        ],
    );
    let lib = lib();
    let mut cfg = rdma_config(&server.url, &lib);
    cfg.require_rdma = true;
    cfg.virtual_host = true;
    cfg.part_size = 5 << 20;
    let s3 = client(cfg);
    let path_style = client(rdma_config(&server.url, &lib));
    let b = bucket("virtual-host");
    s3.create_bucket(&b).await.unwrap();

    let len = (5 << 20) + (1 << 20) + 7;
    let data = pattern(9, len);
    let src = lib.register_owned(data.clone()).unwrap();
    // A multipart upload (two parts) and a single PUT, by RDMA.
    let put = s3.put_object(&b, "dir/big", &src, 0, len).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Rdma, 2), "{put:?}");
    let small = s3.put_object(&b, "small", &src, 0, 1000).await.unwrap();
    assert_eq!((small.path, small.parts), (Path::Rdma, 1), "{small:?}");

    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object(&b, "dir/big", &dst, 0, None).await.unwrap();
    assert_eq!((got.path, got.bytes), (Path::Rdma, len as u64), "{got:?}");
    assert_same("virtual-hosted GET", &contents(&dst, 0, len), &data);
    let r = s3
        .get_object(&b, "small", &dst, 0, Some((10, 19)))
        .await
        .unwrap();
    assert_eq!((r.path, r.status, r.bytes), (Path::Rdma, 206, 10));
    assert_same("range", &contents(&dst, 0, 10), &data[10..20]);

    // The same objects, path-style.
    let info = path_style.head_object(&b, "dir/big").await.unwrap();
    assert_eq!((info.size, &info.etag), (len as u64, &put.etag));
    let page = s3
        .list_objects_v2(
            &b,
            &ListOptions {
                prefix: Some("dir/".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let keys: Vec<_> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["dir/big"]);
}

/// A CompleteMultipartUpload whose answer is lost (the server completed the
/// upload) is tried again, finds the upload gone (NoSuchUpload; s3s-fs:
/// AccessDenied), and
/// returns the object's ETag once the object proves to be this upload's
/// (by the parts' multipart ETag, which both servers give, or its size).
#[tokio::test]
async fn a_lost_complete_answer_is_not_a_failure() {
    use std::sync::atomic::Ordering;
    let server = test_server();
    let plain = PlainS3::start();
    let lib = lib();
    let len = (5 << 20) + 777;
    let data = pattern(9, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    for (name, upstream) in [("test-server", &server.url), ("s3s-fs", &plain.url)] {
        let lossy = Behavior {
            lose_first_complete: true,
            ..Behavior::default()
        };
        let direct = client(rdma_config(upstream, &lib));
        let b = bucket(&format!("lost-complete-{name}"));
        direct.create_bucket(&b).await.unwrap();

        // A multipart PUT (the size known).
        let proxy = Proxy::start(upstream, lossy.clone());
        let mut cfg = rdma_config(&proxy.url, &lib);
        cfg.part_size = 5 << 20;
        let s3 = client(cfg);
        let put = s3
            .put_object(&b, "k", &src, 0, len)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(proxy.state.completes.load(Ordering::SeqCst), 2, "{name}");
        assert_eq!((put.parts, put.bytes), (2, len as u64), "{name}");
        let head = direct.head_object(&b, "k").await.unwrap();
        assert_eq!((head.size, &head.etag), (len as u64, &put.etag), "{name}");
        direct.get_object(&b, "k", &dst, 0, None).await.unwrap();
        assert_same(name, &contents(&dst, 0, len), &data);

        // The low-level call, sized and not.
        for sized in [true, false] {
            let proxy = Proxy::start(upstream, lossy.clone());
            let s3 = client(rdma_config(&proxy.url, &lib));
            let key = format!("manual-{sized}");
            let id = s3.create_multipart_upload(&b, &key).await.unwrap();
            let p1 = s3
                .upload_part(&b, &key, &id, 1, &src, 0, 5 << 20)
                .await
                .unwrap();
            let p2 = s3
                .upload_part(&b, &key, &id, 2, &src, 5 << 20, 777)
                .await
                .unwrap();
            let parts = [
                hipobj_s3::CompletedPart {
                    part_number: 1,
                    etag: p1.etag.unwrap(),
                },
                hipobj_s3::CompletedPart {
                    part_number: 2,
                    etag: p2.etag.unwrap(),
                },
            ];
            let size = sized.then_some(len as u64);
            let r = s3
                .complete_multipart_upload_sized(&b, &key, &id, &parts, size)
                .await;
            assert_eq!(proxy.state.completes.load(Ordering::SeqCst), 2, "{name}");
            let etag = r.unwrap();
            let head = direct.head_object(&b, &key).await.unwrap();
            assert_eq!(
                (head.size, &head.etag),
                (len as u64, &etag),
                "{name} {sized}"
            );
        }
    }
}

/// A handshake refused for bad credentials keeps the S3 error code
/// (SignatureDoesNotMatch, InvalidAccessKeyId), though its answer (to a
/// HEAD) has no error document.
#[tokio::test]
async fn a_refused_handshake_keeps_the_s3_error_code() {
    let server = test_server();
    let lib = lib();
    let good = client(rdma_config(&server.url, &lib));
    let b = bucket("handshake-codes");
    good.create_bucket(&b).await.unwrap();
    let buf = lib.register_owned(vec![0u8; 4096]).unwrap();
    good.put_object(&b, "k", &buf, 0, 4096).await.unwrap();
    let cases = [
        (AK, "wrong-secret", "SignatureDoesNotMatch"),
        ("no-such-access-key", SK, "InvalidAccessKeyId"),
    ];
    for (ak, sk, code) in cases {
        let cfg = hipobj_s3::ClientConfig::new(&server.url, ak, sk).with_rdma(lib.clone());
        let s3 = client(cfg);
        for put in [false, true] {
            let e = if put {
                s3.put_object(&b, "k2", &buf, 0, 4096).await.unwrap_err()
            } else {
                s3.get_object(&b, "k", &buf, 0, None).await.unwrap_err()
            };
            match &e {
                Error::S3 {
                    status,
                    code: c,
                    request_id,
                    ..
                } => {
                    assert_eq!((*status, c.as_str()), (403, code), "put {put}: {e}");
                    assert!(request_id.is_some(), "{e}");
                }
                other => panic!("put {put}: {other:?}"),
            }
        }
    }
}
