//! The real `hipobj-gateway` binary in front of a separately started S3
//! store (`s3s-fs` 0.14.1 as its own process: the one `.ci/run` starts and
//! names in `HIPOBJ_TEST_S3_ENDPOINT`, `HIPOBJ_TEST_S3_ACCESS_KEY` and
//! `HIPOBJ_TEST_S3_SECRET_KEY`, else one started here from
//! `target/tools/bin` or `PATH`). Objects move by RDMA through the gateway
//! with the client library on the software provider: GET, PUT, multipart
//! with UploadPart by RDMA, ranged GET; every byte is checked through the
//! gateway over plain HTTP and straight from the store.
//!
//! Without a store to use the test says it was skipped and passes, unless
//! `REQUIRE_S3S_FS=1`.

#![forbid(unsafe_code)]

use crate::external_common;

use std::path::Path;

use external_common::{external_store, unique};
use hipobj_testkit::{
    assert_object, client, gateway_with, pattern, try_gateway_with, xml_field, NotStarted, RdmaOps,
    S3,
};
use http::{Method, StatusCode};

/// This package's gateway binary.
fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

/// CreateMultipartUpload through the gateway, parts of `part` bytes by RDMA
/// from one registered buffer, CompleteMultipartUpload.
fn multipart_by_rdma(gw: &S3, lib: &hipobj::Hipobj, path: &str, data: &[u8], part: usize) {
    let created = gw.send(
        Method::POST,
        &format!("{path}?uploads"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    let upload_id = xml_field(&created.body, "UploadId").expect("an UploadId");
    let mut mem = data.to_vec();
    let mut parts = String::new();
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let (mut off, mut n) = (0usize, 1);
        while off < data.len() {
            let len = part.min(data.len() - off);
            let mut ops = RdmaOps::new(
                gw,
                Method::PUT,
                &format!("{path}?partNumber={n}&uploadId={upload_id}"),
            );
            buf.put(off as u64, len, &mut ops)
                .unwrap_or_else(|e| panic!("UploadPart {n} by RDMA: {e:?} {:?}", ops.last));
            let a = ops.last();
            assert_eq!(a.header("x-amz-rdma-reply").as_deref(), Some("200"));
            let etag = a.header("etag").expect("an ETag");
            parts.push_str(&format!(
                "<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
            ));
            off += len;
            n += 1;
        }
    }
    let done = gw.send(
        Method::POST,
        &format!("{path}?uploadId={upload_id}"),
        &[],
        format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>").into_bytes(),
        false,
    );
    assert_eq!(done.status, StatusCode::OK, "{}", done.text());
    assert!(
        done.text().contains("<CompleteMultipartUploadResult"),
        "{}",
        done.text()
    );
}

#[test]
fn rdma_through_the_gateway_to_an_external_store() {
    let Some((store, _fs)) = external_store("rdma_through_the_gateway_to_an_external_store") else {
        return;
    };
    let direct = store.s3();
    let answer = direct.get_plain("/");
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "the store at {} does not answer a signed ListBuckets: {}",
        store.endpoint,
        answer.text()
    );

    // The gateway in front of it, with settings of this change given as
    // flags and as environment variables.
    let mut args: Vec<String> = store.gateway_args();
    args.extend(
        [
            "--chunk-mib",
            "1",
            "--staging-buffers",
            "8",
            "--transfer-depth",
            "2",
            "--upstream-connect-timeout",
            "3s",
            "--upstream-backoff",
            "20ms,100ms",
            // s3s-fs echoes encoding-type=url without encoding keys.
            "--upstream-drop-encoding-type",
        ]
        .map(String::from),
    );
    let mut env = store.gateway_env();
    env.push(("HIPOBJ_UPSTREAM_RESPONSE_TIMEOUT", "60s".into()));
    env.push(("HIPOBJ_UPSTREAM_RETRIES", "1".into()));
    env.push(("HIPOBJ_STAGING_TIMEOUT", "1m".into()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw = S3::new(&gateway.url);
    let ready = gw.get_unsigned("/health/ready");
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text());

    let bucket = unique("ext");
    gw.create_bucket(&bucket);
    let lib = client();

    // PUT by RDMA, then GET by RDMA, at sizes around the 1 MiB chunk.
    for (i, len) in [1usize, 4096, (3 << 20) + 17].into_iter().enumerate() {
        let path = format!("/{bucket}/obj{i}");
        let data = pattern(100 + i as u64, len);
        let mut mem = data.clone();
        {
            let buf = lib.register_host(&mut mem).unwrap();
            let mut ops = RdmaOps::new(&gw, Method::PUT, &path);
            buf.put(0, len, &mut ops)
                .unwrap_or_else(|e| panic!("PUT {path} by RDMA: {e:?} {:?}", ops.last));
            let a = ops.last();
            assert_eq!(a.status, StatusCode::OK, "{}", a.text());
            assert_eq!(a.header("x-amz-rdma-reply").as_deref(), Some("200"));
            assert!(a.header("etag").is_some());
        }
        assert_object(&gw, &path, &data);
        assert_object(&direct, &path, &data);

        let mut back = vec![0u8; len];
        {
            let buf = lib.register_host(&mut back).unwrap();
            let mut ops = RdmaOps::new(&gw, Method::GET, &path);
            buf.get(0, len, &mut ops)
                .unwrap_or_else(|e| panic!("GET {path} by RDMA: {e:?} {:?}", ops.last));
            let a = ops.last();
            assert_eq!(a.status, StatusCode::OK, "{}", a.text());
            assert_eq!(
                a.header("x-amz-rdma-bytes-transferred"),
                Some(len.to_string())
            );
            assert!(a.body.is_empty());
        }
        assert!(back == data, "GET of {len} bytes by RDMA");
    }

    // An object written straight to the store, read by RDMA through the
    // gateway: whole, then a range across a chunk boundary.
    let path = format!("/{bucket}/direct.bin");
    let data = pattern(7, (2 << 20) + 999);
    assert_eq!(direct.put_plain(&path, data.clone()).status, StatusCode::OK);
    let mut whole = vec![0u8; data.len()];
    {
        let buf = lib.register_host(&mut whole).unwrap();
        let mut ops = RdmaOps::new(&gw, Method::GET, &path);
        buf.get(0, data.len(), &mut ops).unwrap();
        assert_eq!(ops.last().status, StatusCode::OK);
    }
    assert!(whole == data, "GET by RDMA of an object the store holds");
    let (first, last) = ((1 << 20) - 100, (1 << 20) + 4999);
    let mut part = vec![0u8; last - first + 1];
    {
        let buf = lib.register_host(&mut part).unwrap();
        let mut ops = RdmaOps::new(&gw, Method::GET, &path)
            .with_header("range", &format!("bytes={first}-{last}"));
        buf.get(0, last - first + 1, &mut ops).unwrap();
        let a = ops.last();
        assert_eq!(a.status, StatusCode::PARTIAL_CONTENT, "{}", a.text());
        assert_eq!(a.header("x-amz-rdma-reply").as_deref(), Some("206"));
        assert_eq!(
            a.header("x-amz-rdma-bytes-transferred"),
            Some((last - first + 1).to_string())
        );
    }
    assert!(part[..] == data[first..=last], "ranged GET by RDMA");

    // Multipart: two 5 MiB parts and a short last one, by RDMA.
    let path = format!("/{bucket}/multi.bin");
    let data = pattern(11, (5 << 20) * 2 + 123);
    multipart_by_rdma(&gw, &lib, &path, &data, 5 << 20);
    assert_object(&gw, &path, &data);
    assert_object(&direct, &path, &data);

    // A listing through the gateway with an empty delimiter (as minio-py
    // sends it) lists every key of the store.
    let a = gw.get_plain(&format!("/{bucket}?list-type=2&delimiter=&prefix="));
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    for key in ["obj0", "obj1", "obj2", "direct.bin", "multi.bin"] {
        assert!(
            a.text().contains(&format!("<Key>{key}</Key>")),
            "{key}: {}",
            a.text()
        );
    }

    // A key that URL-decoding would change, listed as boto3 asks
    // (encoding-type=url): the raw key, not marked as encoded.
    let odd = "a+b%41";
    let a = gw.put_plain(&format!("/{bucket}/a%2Bb%2541"), b"odd".to_vec());
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    let a = gw.get_plain(&format!("/{bucket}?list-type=2&encoding-type=url&prefix=a"));
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert!(
        a.text().contains(&format!("<Key>{odd}</Key>")),
        "{}",
        a.text()
    );
    assert!(!a.text().contains("<EncodingType>"), "{}", a.text());
    assert_object(&direct, &format!("/{bucket}/a%2Bb%2541"), b"odd");

    // Clean up what a lasting store would keep.
    for key in [
        "obj0",
        "obj1",
        "obj2",
        "direct.bin",
        "multi.bin",
        "a%2Bb%2541",
    ] {
        let a = gw.send(
            Method::DELETE,
            &format!("/{bucket}/{key}"),
            &[],
            Vec::new(),
            false,
        );
        assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text());
    }
    let a = gw.send(
        Method::DELETE,
        &format!("/{bucket}"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text());
    assert_eq!(
        direct.get_plain(&format!("/{bucket}/obj0")).status,
        StatusCode::NOT_FOUND
    );
    drop(gateway);
}

/// hipobj-rc-v2 through the gateway to the external store: PUT by the
/// client's WRITE_WITH_IMM (the store gets the region as a PUT), GET and a
/// ranged GET by the gateway's WRITEs; bytes checked straight from the
/// store, FINAL's ETag the store's.
#[test]
fn rc_v2_through_the_gateway_to_an_external_store() {
    use hipobj_testkit::rc_v2 as v2;
    use hipobj_wire::rc_v2::Span;
    let Some((store, _fs)) = external_store("rc_v2_through_the_gateway_to_an_external_store")
    else {
        return;
    };
    let direct = store.s3();
    let mut args: Vec<String> = store.gateway_args();
    args.extend(["--chunk-mib", "1", "--staging-buffers", "8"].map(String::from));
    let env = store.gateway_env();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw = S3::new(&gateway.url);
    let bucket = unique("extv2");
    gw.create_bucket(&bucket);
    for (i, len) in [1usize, (2 << 20) + 3].into_iter().enumerate() {
        let data = pattern(300 + i as u64, len);
        let t = v2::target(&bucket, &format!("v2/obj{i}"));
        let f = v2::put(&gw, &t, &data)
            .unwrap_or_else(|a| panic!("v2 PUT {len}: {} {}", a.status, a.text()));
        assert_eq!(f.bytes, len as u64);
        let stored = direct.get_plain(&format!("/{bucket}/v2/obj{i}"));
        assert_eq!(stored.status, StatusCode::OK);
        assert!(
            stored.body[..] == data[..],
            "the store holds what was written ({len})"
        );
        assert_eq!(f.etag, stored.header("etag"), "FINAL's ETag is the store's");
        let (back, g) = v2::get(&gw, &t, Span::new(0, len as u64).unwrap())
            .unwrap_or_else(|a| panic!("v2 GET {len}: {} {}", a.status, a.text()));
        assert!(back == data, "v2 GET is byte-exact ({len})");
        assert_eq!(g.bytes, len as u64);
    }
    let data = pattern(301, (2 << 20) + 3);
    let span = Span::new((1 << 20) - 1, 1 << 20).unwrap();
    let (back, _) = v2::get(&gw, &v2::target(&bucket, "v2/obj1"), span).unwrap();
    assert!(back[..] == data[span.offset as usize..(span.offset + span.size) as usize]);
    drop(gateway);
}

/// Anonymous requests go to the store unsigned, where its ACLs decide: a
/// private object is refused by the store (had the gateway signed the
/// request with its key, the store would serve it), a public-read one
/// (where the store has ACLs: RGW; s3s-fs has none) is served; an
/// anonymous RDMA request is refused by the gateway; `--refuse-anonymous`
/// refuses them all itself.
#[test]
fn anonymous_requests_reach_the_store_unsigned() {
    let Some((store, _fs)) = external_store("anonymous_requests_reach_the_store_unsigned") else {
        return;
    };
    let direct = store.s3();
    let args: Vec<String> = store.gateway_args();
    let env = store.gateway_env();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw = S3::new(&gateway.url);
    let bucket = unique("anon");
    gw.create_bucket(&bucket);
    let data = pattern(400, 1000);
    assert_eq!(
        gw.put_plain(&format!("/{bucket}/private"), data.clone())
            .status,
        StatusCode::OK
    );

    // Private: the store's refusal, as it would answer the client itself.
    let straight = direct.get_unsigned(&format!("/{bucket}/private"));
    let through = gw.get_unsigned(&format!("/{bucket}/private"));
    assert_eq!(through.status, straight.status, "{}", through.text());
    assert!(
        through.status == StatusCode::FORBIDDEN,
        "{}",
        through.text()
    );
    assert_eq!(through.code(), straight.code());
    assert!(gw.metric("hipobj_anonymous_requests_total", &[]) >= 1.0);

    // Public-read, where the store keeps ACLs.
    let acl = gw.send(
        Method::PUT,
        &format!("/{bucket}/public?acl"),
        &[("x-amz-acl", "public-read")],
        Vec::new(),
        false,
    );
    assert_eq!(
        gw.put_plain(&format!("/{bucket}/public"), data.clone())
            .status,
        StatusCode::OK
    );
    let acl = if acl.status == StatusCode::NOT_FOUND {
        // The object did not exist yet: set the ACL now.
        gw.send(
            Method::PUT,
            &format!("/{bucket}/public?acl"),
            &[("x-amz-acl", "public-read")],
            Vec::new(),
            false,
        )
    } else {
        acl
    };
    if acl.status == StatusCode::OK {
        let a = gw.get_unsigned(&format!("/{bucket}/public"));
        assert_eq!(
            a.status,
            StatusCode::OK,
            "a public-read object, anonymously: {}",
            a.text()
        );
        assert!(a.body[..] == data[..]);
    } else {
        eprintln!(
            "anonymous_requests_reach_the_store_unsigned: the store keeps no object ACLs ({}): public-read not checked",
            acl.status
        );
    }
    // An anonymous RDMA request: refused by the gateway.
    let a = gw.get_unsigned_with(
        &format!("/{bucket}/private"),
        &[("x-amz-rdma-token", &"0".repeat(88))],
    );
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(a.reply().as_deref(), Some("403"));
    drop(gateway);

    // Refused by the gateway itself when told so.
    let mut args: Vec<String> = store.gateway_args();
    args.push("--refuse-anonymous".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw2 = S3::new(&gateway.url);
    let a = gw2.get_unsigned(&format!("/{bucket}/public"));
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(a.code().as_deref(), Some("AccessDenied"));
    assert_eq!(gw2.metric("hipobj_anonymous_requests_total", &[]), 0.0);
}

/// A setting out of range stops the gateway before it serves, with the
/// flag named; a variable counts as its flag.
#[test]
fn settings_out_of_range_are_refused_at_start() {
    for (args, env, flag, why) in [
        (
            vec!["--transfer-depth", "0"],
            vec![],
            "--transfer-depth",
            "must be at least 1",
        ),
        (
            vec![],
            vec![("HIPOBJ_STAGING_TIMEOUT", "0s")],
            "--staging-timeout",
            "must be greater than zero",
        ),
        (
            vec![],
            vec![("HIPOBJ_MAX_CLOCK_SKEW", "soon")],
            "--max-clock-skew",
            "write it like 30s",
        ),
        (
            vec![
                "--upstream",
                "http://127.0.0.1:9",
                "--upstream-access-key",
                "a",
                "--upstream-secret-key",
                "b",
            ],
            vec![("HIPOBJ_UPSTREAM_HEALTH_INTERVAL", "0ms")],
            "--upstream-health-interval",
            "must be greater than zero",
        ),
        (
            vec!["--upstream-retries", "1"],
            vec![],
            "--upstream",
            "required",
        ),
    ] {
        match try_gateway_with(gateway_bin(), &args, &env) {
            Ok(g) => panic!("{args:?} {env:?}: started at {}", g.url),
            Err(NotStarted { status, log, .. }) => {
                assert_eq!(
                    status.and_then(|s| s.code()),
                    Some(2),
                    "{args:?} {env:?}: {log}"
                );
                assert!(log.contains(flag), "{args:?} {env:?}: {log}");
                assert!(log.contains(why), "{args:?} {env:?}: {log}");
            }
        }
    }
}
