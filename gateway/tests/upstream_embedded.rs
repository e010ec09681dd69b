//! The S3 flow through the embedded store (hipobj-store).

#![forbid(unsafe_code)]

use crate::upstream_common;

use bytes::Bytes;
use http::{Method, StatusCode};

use hipobj_gateway::config::UpstreamConfig;
use hipobj_gateway::upstream::{self, EmbeddedUpstream, Payload};

#[tokio::test]
async fn s3_flow() {
    let dir = tempfile::tempdir().unwrap();
    let up = EmbeddedUpstream::new(dir.path(), "us-east-1").unwrap();
    upstream_common::s3_flow(&up).await;
    // The objects are files under the bucket's directory, named by their
    // key's hash, never by the key.
    let objects = dir.path().join("buckets/bucket/objects");
    assert!(objects.is_dir());
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"big.bin"));
    let record = objects
        .join(&hash[0..2])
        .join(&hash[2..4])
        .join(format!("{hash}.json"));
    assert!(record.is_file(), "{}", record.display());
    assert!(!dir.path().join("bucket/big.bin").exists());
}

#[tokio::test]
async fn built_from_config_creates_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a/b");
    let up = upstream::build(
        &UpstreamConfig::Embedded {
            root: root.clone(),
            fsync: true,
        },
        "eu-west-1",
    )
    .unwrap();
    assert!(root.is_dir());
    assert!(up.ready().await);
    assert!(up.describe().contains("embedded"));
}

#[tokio::test]
async fn wrong_payload_hash_is_refused_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let up = EmbeddedUpstream::new(dir.path(), "us-east-1").unwrap();
    let a = upstream_common::call(&up, Method::PUT, "/bkt", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK);
    let wrong = upstream_common::sha256_hex(b"something else");
    let a = upstream_common::call_with(
        &up,
        Method::PUT,
        "/bkt/k",
        &[],
        Bytes::from_static(b"data"),
        Payload::Sha256(wrong),
    )
    .await;
    // s3s's payload-hash check fails the body; nothing is stored.
    assert!(!a.status.is_success(), "{} {}", a.status, a.text());
    let a = upstream_common::call(&up, Method::GET, "/bkt/k", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn plus_and_unicode_keys_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let up = EmbeddedUpstream::new(dir.path(), "us-east-1").unwrap();
    upstream_common::call(&up, Method::PUT, "/bkt", Bytes::new()).await;
    // `%7E` is `~`, which the canonical form leaves unescaped.
    for (put, get) in [
        ("/bkt/a+b%7Ec", "/bkt/a%2Bb~c"),
        ("/bkt/%C3%A9t%C3%A9", "/bkt/\u{e9}t\u{e9}"),
    ] {
        let a = upstream_common::call(&up, Method::PUT, put, &b"x"[..]).await;
        assert_eq!(a.status, StatusCode::OK, "{put}: {}", a.text());
        let get = get.replace('\u{e9}', "%C3%A9");
        let a = upstream_common::call(&up, Method::GET, &get, Bytes::new()).await;
        assert_eq!(a.status, StatusCode::OK, "{get}: {}", a.text());
    }
    let a = upstream_common::call(&up, Method::GET, "/bkt?list-type=2", Bytes::new()).await;
    let xml = a.text();
    assert!(xml.contains("<Key>a+b~c</Key>"), "{xml}");
    assert!(xml.contains("<Key>\u{e9}t\u{e9}</Key>"), "{xml}");
}
