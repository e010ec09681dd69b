//! hipobj-rc-v2 from the S3 client against the test server as a process:
//! `auto` speaks v2 to a server that does, falls back to the handshake
//! flow for one that does not; `v2` falls back to plain HTTP instead;
//! `handshake` never tries v2; a PUT over the server's v2 cap becomes a
//! multipart upload whose parts go by v2; `auto` sends small transfers by
//! the handshake flow where a v2 answer said the server serves it.

mod common;

use common::{auto_config as rdma_config, client, lib, pattern, Proc};
use hipobj_s3::{Path, RdmaProtocol, Selection, PROTOCOL_HANDSHAKE, PROTOCOL_V2};

fn server(extra: &[&str]) -> Proc {
    let mut args = vec!["0", "--rdma-device", "soft0", "--staging-buffers", "8"];
    args.extend_from_slice(extra);
    hipobj_testkit::test_server(&hipobj_testkit::workspace_bin("hipobj-test-server"), &args)
}

fn contents(reg: &hipobj::Registered<'_, '_>, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    reg.read(off, &mut v).unwrap();
    v
}

#[tokio::test]
async fn auto_moves_objects_by_v2() {
    let srv = server(&[]);
    let lib = lib();
    // Small ranges by v2 too (see the next test for what auto does with
    // them by default).
    let mut cfg = rdma_config(&srv.url, &lib);
    cfg.auto_handshake_max = 0;
    let s3 = client(cfg);
    s3.create_bucket("v2auto").await.unwrap();
    let len = (1 << 20) + 3;
    let data = pattern(7, len);
    let src = lib.register_owned(data.clone()).unwrap();

    let put = s3.put_object("v2auto", "obj", &src, 0, len).await.unwrap();
    assert_eq!(
        (put.path, put.rdma_protocol),
        (Path::Rdma, Some(PROTOCOL_V2)),
        "{put:?}"
    );
    assert!(put.etag.is_some(), "{put:?}");

    let dst = lib.register_owned(vec![0u8; len + 100]).unwrap();
    let got = s3
        .get_object("v2auto", "obj", &dst, 100, None)
        .await
        .unwrap();
    assert_eq!(
        (got.path, got.rdma_protocol),
        (Path::Rdma, Some(PROTOCOL_V2)),
        "{got:?}"
    );
    assert_eq!((got.bytes, got.object_size), (len as u64, Some(len as u64)));
    assert!(got.checksum_verified, "{got:?}");
    assert!(contents(&dst, 100, len) == data);

    // A range, and one that runs past the end (S3 clamps it).
    let r = s3
        .get_object("v2auto", "obj", &dst, 0, Some((1000, 1999)))
        .await
        .unwrap();
    assert_eq!(
        (r.rdma_protocol, r.bytes, r.status),
        (Some(PROTOCOL_V2), 1000, 206),
        "{r:?}"
    );
    assert_eq!(r.object_size, Some(len as u64));
    assert!(contents(&dst, 0, 1000) == data[1000..2000]);
    let tail = s3
        .get_object(
            "v2auto",
            "obj",
            &dst,
            0,
            Some((len as u64 - 10, len as u64 + 50)),
        )
        .await
        .unwrap();
    assert_eq!(
        (tail.rdma_protocol, tail.bytes),
        (Some(PROTOCOL_V2), 10),
        "{tail:?}"
    );
    assert!(contents(&dst, 0, 10) == data[len - 10..]);

    // A missing key is the S3 error it always was.
    let e = s3
        .get_object("v2auto", "missing", &dst, 0, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("NoSuchKey"), "{e:?}");
}

/// Under `auto`, once a v2 answer said the server serves the handshake
/// flow too, transfers of at most `auto_handshake_max` bytes go by it (one
/// exchange on a kept connection); larger ones, and every one of a client
/// whose limit is 0, still go by v2.
#[tokio::test]
async fn auto_sends_small_transfers_by_the_handshake_flow_where_it_is_served() {
    let srv = server(&[]);
    let lib = lib();
    let s3 = client(rdma_config(&srv.url, &lib));
    assert_eq!(s3.config().auto_handshake_max, 1 << 20);
    s3.create_bucket("v2small").await.unwrap();
    let small = pattern(11, 4096);
    let src = lib.register_owned(small.clone()).unwrap();

    // The first goes by v2: nothing is known of the server yet. Its FINAL
    // says the server serves the handshake flow.
    let first = s3.put_object("v2small", "a", &src, 0, 4096).await.unwrap();
    assert_eq!(
        (first.path, first.rdma_protocol),
        (Path::Rdma, Some(PROTOCOL_V2)),
        "{first:?}"
    );
    // Then small PUTs and GETs go by the handshake flow, byte for byte.
    let put = s3.put_object("v2small", "b", &src, 0, 4096).await.unwrap();
    assert_eq!(
        (put.path, put.rdma_protocol),
        (Path::Rdma, Some(PROTOCOL_HANDSHAKE)),
        "{put:?}"
    );
    let dst = lib.register_owned(vec![0u8; 4096]).unwrap();
    for key in ["a", "b"] {
        let got = s3.get_object("v2small", key, &dst, 0, None).await.unwrap();
        assert_eq!(
            (got.path, got.rdma_protocol, got.bytes),
            (Path::Rdma, Some(PROTOCOL_HANDSHAKE), 4096),
            "{got:?}"
        );
        assert!(contents(&dst, 0, 4096) == small, "{key}");
    }
    // A range of a small object, too.
    let r = s3
        .get_object("v2small", "b", &dst, 0, Some((100, 199)))
        .await
        .unwrap();
    assert_eq!(
        (r.rdma_protocol, r.bytes, r.status),
        (Some(PROTOCOL_HANDSHAKE), 100, 206),
        "{r:?}"
    );
    assert!(contents(&dst, 0, 100) == small[100..200]);

    // Over the limit: v2, both ways.
    let len = (1 << 20) + 1;
    let big = pattern(12, len);
    let bsrc = lib.register_owned(big.clone()).unwrap();
    let put = s3
        .put_object("v2small", "big", &bsrc, 0, len)
        .await
        .unwrap();
    assert_eq!(put.rdma_protocol, Some(PROTOCOL_V2), "{put:?}");
    let bdst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3
        .get_object("v2small", "big", &bdst, 0, None)
        .await
        .unwrap();
    assert_eq!(got.rdma_protocol, Some(PROTOCOL_V2), "{got:?}");
    assert!(contents(&bdst, 0, len) == big);

    // A client whose limit is 0 keeps v2 first for small ones.
    let mut cfg = rdma_config(&srv.url, &lib);
    cfg.auto_handshake_max = 0;
    let v2_only = client(cfg);
    let got = v2_only
        .get_object("v2small", "a", &dst, 0, None)
        .await
        .unwrap();
    assert_eq!(got.rdma_protocol, Some(PROTOCOL_V2), "{got:?}");
    assert!(contents(&dst, 0, 4096) == small);
}

#[tokio::test]
async fn a_put_over_the_v2_cap_becomes_parts_by_v2() {
    let srv = server(&["--rc-v2-put-mib-per-key", "5"]);
    let lib = lib();
    // One part at a time: the key's 5 MiB of staging holds one part (parts
    // in parallel are refused 503 beyond it and may go by the handshake
    // flow instead).
    let mut cfg = rdma_config(&srv.url, &lib);
    cfg.concurrency = 1;
    let s3 = client(cfg);
    s3.create_bucket("v2cap").await.unwrap();
    let len = (12 << 20) + 5;
    let data = pattern(9, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let put = s3.put_object("v2cap", "big", &src, 0, len).await.unwrap();
    assert_eq!((put.path, put.parts), (Path::Rdma, 3), "{put:?}");
    assert_eq!(put.rdma_protocol, Some(PROTOCOL_V2), "{put:?}");

    let dst = lib.register_owned(vec![0u8; len]).unwrap();
    let got = s3.get_object("v2cap", "big", &dst, 0, None).await.unwrap();
    assert_eq!(got.rdma_protocol, Some(PROTOCOL_V2), "{got:?}");
    assert!(contents(&dst, 0, len) == data);
    // A part of it, by its number.
    let part = s3
        .get_object_selection("v2cap", "big", &dst, 0, Selection::Part(2))
        .await
        .unwrap();
    assert_eq!(
        (part.rdma_protocol, part.bytes),
        (Some(PROTOCOL_V2), 5 << 20),
        "{part:?}"
    );
    assert!(contents(&dst, 0, 5 << 20) == data[5 << 20..10 << 20]);
}

#[tokio::test]
async fn without_v2_auto_takes_the_handshake_flow_and_v2_takes_http() {
    let srv = server(&["--no-rc-v2"]);
    let lib = lib();
    let len = 70_000;
    let data = pattern(3, len);
    let src = lib.register_owned(data.clone()).unwrap();
    let dst = lib.register_owned(vec![0u8; len]).unwrap();

    let mut cfg = rdma_config(&srv.url, &lib);
    cfg.rdma_protocol = RdmaProtocol::V2;
    let v2 = client(cfg);
    v2.create_bucket("nov2").await.unwrap();
    let put = v2.put_object("nov2", "obj", &src, 0, len).await.unwrap();
    assert_eq!((put.path, put.rdma_protocol), (Path::Http, None), "{put:?}");
    assert!(
        put.fallback_reason
            .as_deref()
            .is_some_and(|r| r.contains("v2")),
        "{put:?}"
    );

    let auto = client(rdma_config(&srv.url, &lib));
    let got = auto.get_object("nov2", "obj", &dst, 0, None).await.unwrap();
    assert_eq!(
        (got.path, got.rdma_protocol),
        (Path::Rdma, Some(PROTOCOL_HANDSHAKE)),
        "{got:?}"
    );
    assert!(contents(&dst, 0, len) == data);

    // Handshake only, against a server that speaks v2: no v2.
    let srv2 = server(&[]);
    let mut cfg = rdma_config(&srv2.url, &lib);
    cfg.rdma_protocol = RdmaProtocol::Handshake;
    let hs = client(cfg);
    hs.create_bucket("hsonly").await.unwrap();
    let put = hs.put_object("hsonly", "obj", &src, 0, len).await.unwrap();
    assert_eq!(put.rdma_protocol, Some(PROTOCOL_HANDSHAKE), "{put:?}");
}
