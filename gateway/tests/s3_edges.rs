//! S3 edge cases through the real `hipobj-gateway` process, where the
//! gateway must answer as S3 (or as the store behind it) does:
//!
//! - presigned URLs with every kind of `X-Amz-Expires` and `X-Amz-Date`
//!   (S3's codes and messages);
//! - `x-amz-meta-*` with raw UTF-8 bytes, stored and read back as the
//!   store answers them (RFC 2047-encoded, as S3 does), the same through
//!   the gateway as straight from the store (embedded store; `s3s-fs` when
//!   one is there, as `external_upstream.rs` finds it);
//! - aws-chunked bodies with a trailing checksum (every algorithm): the
//!   checksum reaches the store, which echoes and records it; a wrong one
//!   is 400 `BadDigest` and nothing is stored;
//! - virtual-hosted-style requests with `--domain`: RDMA PUT and GET with
//!   the client library, plain GET and listing, and the metrics counting
//!   the operations as path-style ones are counted.

#![forbid(unsafe_code)]

use crate::external_common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use external_common::{own_s3s_fs, unique};
use hipobj_testkit::{
    assert_object, client, gateway_with, pattern, xml_field, Answer, RdmaOps, AK, REGION, S3, SK,
};
use http::{Method, StatusCode};

fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

/// `uri` (`http://host:port/path`) presigned for GET at `at`, valid
/// `expires`, as an SDK presigns it (aws-sigv4, S3's settings).
fn presign(uri: &str, at: SystemTime, expires: Duration) -> String {
    presign_as(uri, at, expires, AK, SK)
}

/// As `presign`, signed with another key pair (a tenant's).
pub(crate) fn presign_as(
    uri: &str,
    at: SystemTime,
    expires: Duration,
    access_key: &str,
    secret_key: &str,
) -> String {
    use aws_sigv4::http_request::{
        sign, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation,
        SigningSettings, UriPathNormalizationMode,
    };
    let identity =
        aws_credential_types::Credentials::new(access_key, secret_key, None, None, "test").into();
    let mut s = SigningSettings::default();
    s.signature_location = SignatureLocation::QueryParams;
    s.expires_in = Some(expires);
    s.percent_encoding_mode = PercentEncodingMode::Single;
    s.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(REGION)
        .name("s3")
        .time(at)
        .settings(s)
        .build()
        .unwrap()
        .into();
    let signable = SignableRequest::new(
        "GET",
        uri.to_string(),
        std::iter::empty(),
        SignableBody::UnsignedPayload,
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let mut req = http::Request::builder().uri(uri).body(()).unwrap();
    instructions.apply_to_request_http1x(&mut req);
    req.uri().to_string()
}

/// The path and query of a full URL.
pub(crate) fn path_and_query(url: &str) -> String {
    let uri: http::Uri = url.parse().unwrap();
    uri.path_and_query().unwrap().as_str().to_string()
}

fn message(a: &Answer) -> String {
    xml_field(&a.body, "Message").unwrap_or_default()
}

#[track_caller]
fn assert_s3_error(a: &Answer, status: u16, code: &str, msg: &str, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: {}", a.text());
    assert_eq!(a.code().as_deref(), Some(code), "{what}: {}", a.text());
    assert!(message(a).contains(msg), "{what}: {}", a.text());
}

#[test]
fn presigned_expires_and_dates_get_s3s_answers() {
    let gw = gateway_with(gateway_bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("presig");
    let data = pattern(7, 5000);
    assert_eq!(s3.put_plain("/presig/obj", data.clone()).status, 200);
    let url = format!("{}/presig/obj", gw.url);
    let now = SystemTime::now();

    // Valid: 60 s, and the longest S3 allows (a week).
    for expires in [60, 604_800] {
        let a = s3.get_unsigned(&path_and_query(&presign(
            &url,
            now,
            Duration::from_secs(expires),
        )));
        assert_eq!(
            a.status,
            StatusCode::OK,
            "X-Amz-Expires={expires}: {}",
            a.text()
        );
        assert!(a.body == data, "X-Amz-Expires={expires}");
    }

    // X-Amz-Expires as S3 checks it.
    let valid = path_and_query(&presign(&url, now, Duration::from_secs(60)));
    for (value, status, code, msg) in [
        ("0", 403, "AccessDenied", "Request has expired"),
        ("-1", 400, "AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative"),
        ("abc", 400, "AuthorizationQueryParametersError", "X-Amz-Expires should be a number"),
        ("", 400, "AuthorizationQueryParametersError", "X-Amz-Expires should be a number"),
        (
            "604801",
            400,
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds",
        ),
        (
            "99999999999999999999999",
            400,
            "AuthorizationQueryParametersError",
            "less than a week",
        ),
    ] {
        let pq = valid.replace("X-Amz-Expires=60", &format!("X-Amz-Expires={value}"));
        assert_ne!(pq, valid);
        let a = s3.get_unsigned(&pq);
        assert_s3_error(&a, status, code, msg, &format!("X-Amz-Expires={value}"));
    }

    // Signed 2 minutes ago for 60 s: expired.
    let old = presign(
        &url,
        now - Duration::from_secs(120),
        Duration::from_secs(60),
    );
    let a = s3.get_unsigned(&path_and_query(&old));
    assert_s3_error(&a, 403, "AccessDenied", "Request has expired", "expired");
    // Signed for an hour from now (beyond the 15 min skew): not valid yet.
    let future = presign(
        &url,
        now + Duration::from_secs(3600),
        Duration::from_secs(60),
    );
    let a = s3.get_unsigned(&path_and_query(&future));
    assert_s3_error(
        &a,
        403,
        "AccessDenied",
        "Request is not valid yet",
        "future",
    );
    // A minute ahead is within the skew: served.
    let soon = presign(
        &url,
        now + Duration::from_secs(60),
        Duration::from_secs(600),
    );
    let a = s3.get_unsigned(&path_and_query(&soon));
    assert_eq!(a.status, StatusCode::OK, "a minute ahead: {}", a.text());
    // A malformed date.
    let pq = valid.replace("X-Amz-Date=", "X-Amz-Date=2024-");
    let a = s3.get_unsigned(&pq);
    assert_s3_error(
        &a,
        400,
        "AuthorizationQueryParametersError",
        "X-Amz-Date must be in the ISO8601 Long Format",
        "malformed date",
    );
}

/// `café ☕ Grüße` and a 4-byte character, as raw UTF-8.
const UTF8_VALUE: &str = "caf\u{e9} \u{2615} Gr\u{fc}\u{df}e \u{1f600}";

/// The metadata value as S3 documents returning non-ASCII metadata: an
/// RFC 2047 encoded word (`=?UTF-8?B?<base64>?=`).
fn rfc2047(v: &str) -> String {
    use base64::Engine as _;
    format!(
        "=?UTF-8?B?{}?=",
        base64::engine::general_purpose::STANDARD.encode(v)
    )
}

/// PUT with UTF-8 metadata through `gw`, then the metadata read back by
/// HEAD through `gw` and through `direct` (if any): the same bytes, the
/// ones sent or their RFC 2047 form (what s3s-fs and the embedded store
/// answer, as S3 documents it does).
fn utf8_metadata_round_trip(gw: &S3, direct: Option<&S3>, bucket: &str) -> Vec<u8> {
    let path = format!("/{bucket}/utf8");
    let a = gw.send(
        Method::PUT,
        &path,
        &[
            ("x-amz-meta-name", UTF8_VALUE),
            ("x-amz-meta-plain", "ascii"),
        ],
        b"body".to_vec(),
        false,
    );
    assert_eq!(
        a.status,
        StatusCode::OK,
        "PUT with UTF-8 metadata: {}",
        a.text()
    );
    let mut heads = vec![(
        "gateway",
        gw.send(Method::HEAD, &path, &[], Vec::new(), false),
    )];
    if let Some(d) = direct {
        heads.push(("store", d.send(Method::HEAD, &path, &[], Vec::new(), false)));
    }
    let got = |h: &Answer| {
        h.headers
            .get("x-amz-meta-name")
            .map(|v| v.as_bytes().to_vec())
    };
    let first = got(&heads[0].1).expect("x-amz-meta-name");
    assert!(
        first == UTF8_VALUE.as_bytes() || first == rfc2047(UTF8_VALUE).as_bytes(),
        "{:?}",
        String::from_utf8_lossy(&first)
    );
    for (via, h) in &heads {
        assert_eq!(h.status, StatusCode::OK, "HEAD via {via}");
        assert_eq!(got(h).as_ref(), Some(&first), "HEAD via {via}");
        assert_eq!(h.header("x-amz-meta-plain").as_deref(), Some("ascii"));
    }
    assert_object(gw, &path, b"body");
    first
}

#[test]
fn utf8_metadata_through_the_embedded_store() {
    let gw = gateway_with(gateway_bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("meta");
    let value = utf8_metadata_round_trip(&s3, None, "meta");
    assert_eq!(value, rfc2047(UTF8_VALUE).as_bytes());
}

#[test]
fn utf8_metadata_through_s3s_fs() {
    let Some((store, _fs)) = own_s3s_fs("utf8_metadata_through_s3s_fs") else {
        return;
    };
    let mut args = store.gateway_args();
    args.push("--upstream-drop-encoding-type".into());
    let env = store.gateway_env();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw = S3::new(&gateway.url);
    let direct = store.s3();
    let bucket = unique("utf8");
    gw.create_bucket(&bucket);
    let value = utf8_metadata_round_trip(&gw, Some(&direct), &bucket);
    assert_eq!(value, rfc2047(UTF8_VALUE).as_bytes());
}

/// The value of the `hipobj_requests_total` series with `op` and `path`.
fn requests_counted(s3: &S3, op: &str, path: &str) -> u64 {
    let m = s3.get_unsigned("/metrics").text();
    let series = format!("hipobj_requests_total{{op=\"{op}\",path=\"{path}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn virtual_hosted_requests_with_domain_use_rdma() {
    let gw = gateway_with(
        gateway_bin(),
        &["--domain", "s3.example.test,localhost", "--chunk-mib", "1"],
        &[],
    );
    let s3 = S3::new(&gw.url);
    let port = gw.url.rsplit(':').next().unwrap().to_string();
    let bucket = "vhost-bkt";
    let host = format!("{bucket}.localhost:{port}");
    // CreateBucket virtual-hosted: PUT / on the bucket's host.
    let a = s3.send(Method::PUT, "/", &[("host", &host)], Vec::new(), false);
    assert_eq!(a.status, StatusCode::OK, "CreateBucket: {}", a.text());

    let lib = client();
    let len = (2 << 20) + 123;
    let data = pattern(42, len);
    let before = (
        requests_counted(&s3, "PutObject", "rdma"),
        requests_counted(&s3, "GetObject", "rdma"),
    );
    {
        let mut mem = data.clone();
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::PUT, "/dir/obj").with_header("host", &host);
        buf.put(0, len, &mut ops)
            .unwrap_or_else(|e| panic!("virtual-hosted PUT by RDMA: {e:?} {:?}", ops.last));
        let a = ops.last();
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
        assert_eq!(a.header("x-amz-rdma-reply").as_deref(), Some("200"));
    }
    // Stored under the bucket of the host: path-style reads it back.
    assert_object(&s3, &format!("/{bucket}/dir/obj"), &data);
    let mut back = vec![0u8; len];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/dir/obj").with_header("host", &host);
        buf.get(0, len, &mut ops)
            .unwrap_or_else(|e| panic!("virtual-hosted GET by RDMA: {e:?} {:?}", ops.last));
        let a = ops.last();
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
        assert_eq!(
            a.header("x-amz-rdma-bytes-transferred"),
            Some(len.to_string())
        );
    }
    assert!(back == data, "virtual-hosted GET by RDMA");
    let after = (
        requests_counted(&s3, "PutObject", "rdma"),
        requests_counted(&s3, "GetObject", "rdma"),
    );
    assert!(
        after.0 > before.0,
        "PutObject by RDMA counted: {before:?} {after:?}"
    );
    assert!(
        after.1 > before.1,
        "GetObject by RDMA counted: {before:?} {after:?}"
    );

    // Plain GET, HEAD and a listing virtual-hosted, counted as such.
    let listed = requests_counted(&s3, "ListObjectsV2", "http");
    let a = s3.send(
        Method::GET,
        "/dir/obj",
        &[("host", &host)],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert!(a.body == data);
    let a = s3.send(
        Method::GET,
        "/?list-type=2&prefix=dir%2F",
        &[("host", &host)],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(xml_field(&a.body, "Key").as_deref(), Some("dir/obj"));
    assert_eq!(requests_counted(&s3, "ListObjectsV2", "http"), listed + 1);
    // The domain under another case, and the other domain.
    let a = s3.send(
        Method::HEAD,
        "/dir/obj",
        &[("host", &format!("{bucket}.S3.Example.Test"))],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header("content-length"), Some(len.to_string()));
    // A host under no domain is path-style: `/dir/obj` is bucket `dir`.
    let a = s3.send(
        Method::GET,
        "/dir/obj",
        &[("host", &format!("{bucket}.elsewhere.test"))],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text());
    assert_eq!(a.code().as_deref(), Some("NoSuchBucket"));
    // A presigned virtual-hosted URL.
    let url = format!("http://{host}/dir/obj");
    let pq = path_and_query(&presign(&url, SystemTime::now(), Duration::from_secs(60)));
    let a = s3.get_unsigned_with(&pq, &[("host", &host)]);
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert!(a.body == data);
}

/// A PUT of `data` as aws-chunked without chunk signatures, its checksum
/// (`algorithm`, value `value`) in the trailer, signed with `keys`.
fn put_with_trailer(
    s3: &S3,
    keys: (&str, &str),
    path: &str,
    data: &[u8],
    algorithm: hipobj_gateway::checksum::Algorithm,
    value: &str,
) -> Answer {
    let name = algorithm.header();
    let mut body = Vec::new();
    for piece in data.chunks(10_000) {
        body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        body.extend_from_slice(piece);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("0\r\n{name}:{value}\r\n\r\n").as_bytes());
    let mut req = http::Request::builder()
        .method(Method::PUT)
        .uri(format!("{}{path}", s3.url))
        .header("content-encoding", "aws-chunked")
        .header("x-amz-decoded-content-length", data.len())
        .header("x-amz-trailer", name)
        .header("content-length", body.len())
        .body(hipobj_gateway::body::Body::from(body))
        .unwrap();
    hipobj_gateway::upstream::sign_request(
        &mut req,
        keys.0,
        keys.1,
        REGION,
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        SystemTime::now(),
    )
    .unwrap();
    s3.request(req).unwrap()
}

fn checksum_of(a: hipobj_gateway::checksum::Algorithm, data: &[u8]) -> String {
    let mut h = hipobj_gateway::checksum::Hasher::new(a);
    h.update(data);
    h.finish()
}

/// A trailing checksum through `gw` (and straight to `direct`): echoed by
/// the PUT, recorded for HEAD with checksum mode, a wrong one refused.
fn trailing_checksums_reach_the_store(gw: &S3, direct: Option<(&S3, (&str, &str))>, bucket: &str) {
    use hipobj_gateway::checksum::Algorithm;
    let data = pattern(11, 200_000);
    for a in [
        Algorithm::Crc32,
        Algorithm::Crc32c,
        Algorithm::Sha1,
        Algorithm::Sha256,
        Algorithm::Crc64Nvme,
    ] {
        let value = checksum_of(a, &data);
        let path = format!("/{bucket}/trailer-{}", a.name());
        let mut answers = vec![(
            "gateway",
            put_with_trailer(gw, (AK, SK), &path, &data, a, &value),
        )];
        if let Some((d, keys)) = direct {
            let p = format!("{path}-direct");
            answers.push(("store", put_with_trailer(d, keys, &p, &data, a, &value)));
        }
        for (via, put) in &answers {
            assert_eq!(
                put.status,
                StatusCode::OK,
                "{a:?} via {via}: {}",
                put.text()
            );
            assert_eq!(
                put.header(a.header()).as_deref(),
                Some(value.as_str()),
                "{a:?} via {via}"
            );
        }
        let head = gw.send(
            Method::HEAD,
            &path,
            &[("x-amz-checksum-mode", "ENABLED")],
            Vec::new(),
            false,
        );
        assert_eq!(
            head.header(a.header()).as_deref(),
            Some(value.as_str()),
            "{a:?} HEAD"
        );
        assert_object(gw, &path, &data);
        // A wrong checksum: the gateway's 400 BadDigest, nothing stored.
        let wrong = checksum_of(a, b"another body");
        let bad = format!("/{bucket}/bad-{}", a.name());
        let put = put_with_trailer(gw, (AK, SK), &bad, &data, a, &wrong);
        assert_eq!(put.status, StatusCode::BAD_REQUEST, "{}", put.text());
        assert_eq!(put.code().as_deref(), Some("BadDigest"));
        hipobj_testkit::assert_absent(gw, &bad);
    }
}

#[test]
fn trailing_checksums_reach_the_embedded_store() {
    let gw = gateway_with(gateway_bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("trailers");
    trailing_checksums_reach_the_store(&s3, None, "trailers");
}

#[test]
fn trailing_checksums_reach_s3s_fs() {
    let Some((store, _fs)) = own_s3s_fs("trailing_checksums_reach_s3s_fs") else {
        return;
    };
    let mut args = store.gateway_args();
    args.push("--upstream-drop-encoding-type".into());
    let env = store.gateway_env();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gateway = gateway_with(gateway_bin(), &args, &env);
    let gw = S3::new(&gateway.url);
    let direct = store.s3();
    let bucket = unique("trailer");
    gw.create_bucket(&bucket);
    trailing_checksums_reach_the_store(
        &gw,
        Some((&direct, (&store.access_key, &store.secret_key))),
        &bucket,
    );
}
