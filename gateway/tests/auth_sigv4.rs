//! SigV4 verification and signing: the AWS documentation examples, sign then
//! verify round trips, every tamper, presigned URLs, and a property test
//! that no Authorization header makes `verify` panic.

#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hipobj_gateway::auth::{self, AuthError, AuthSettings, BodyMode, Credentials, Verified};
use hipobj_gateway::body::Body;
use hipobj_gateway::config::KeyPair;
use hipobj_gateway::upstream;
use http::request::Parts;
use http::{HeaderValue, Method, Request};
use proptest::prelude::*;

const AK: &str = "AKIAIOSFODNN7EXAMPLE";
const SK: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// 20130524T000000Z
const EXAMPLE_TIME: u64 = 1_369_353_600;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn example_now() -> SystemTime {
    at(EXAMPLE_TIME)
}

fn creds() -> Credentials {
    Credentials::new(&[
        KeyPair {
            access_key: AK.into(),
            secret_key: SK.into(),
        },
        KeyPair {
            access_key: "OTHERKEY".into(),
            secret_key: "other-secret".into(),
        },
    ])
}

fn settings() -> AuthSettings {
    AuthSettings {
        region: "us-east-1".into(),
        max_skew: Duration::from_secs(15 * 60),
        ..AuthSettings::default()
    }
}

fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn check(p: &Parts, now: SystemTime) -> Result<Verified, AuthError> {
    auth::verify(p, &creds(), &settings(), now)
}

fn code(r: Result<Verified, AuthError>) -> &'static str {
    match r {
        Ok(v) => panic!("verified unexpectedly: {v:?}"),
        Err(e) => e.code(),
    }
}

fn auth_header(signed: &str, sig: &str) -> String {
    format!("AWS4-HMAC-SHA256 Credential={AK}/20130524/us-east-1/s3/aws4_request,SignedHeaders={signed},Signature={sig}")
}

// --- The AWS documentation examples -------------------------------------

fn aws_get_object() -> Parts {
    let a = auth_header(
        "host;range;x-amz-content-sha256;x-amz-date",
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    );
    parts(
        "GET",
        "/test.txt",
        &[
            ("host", "examplebucket.s3.amazonaws.com"),
            ("range", "bytes=0-9"),
            ("x-amz-content-sha256", EMPTY),
            ("x-amz-date", "20130524T000000Z"),
            ("authorization", &a),
        ],
    )
}

#[test]
fn aws_example_get_object() {
    let v = check(&aws_get_object(), example_now()).unwrap();
    assert_eq!(v.access_key, AK);
    assert_eq!(v.body, BodyMode::Sha256(EMPTY.into()));
    assert_eq!(v.decoded_length, None);
    // Debug shows no key material.
    let dbg = format!("{v:?}");
    assert!(!dbg.contains("f0e8bdb8") && !dbg.contains(SK), "{dbg}");
}

#[test]
fn aws_example_get_object_values_are_canonicalized() {
    // Spaces around a value are trimmed; the header name's case does not matter.
    let mut p = aws_get_object();
    p.headers
        .insert("Range", HeaderValue::from_static("  bytes=0-9  "));
    check(&p, example_now()).unwrap();
    let mut p = aws_get_object();
    p.headers
        .insert("range", HeaderValue::from_static("bytes=0-10"));
    assert_eq!(code(check(&p, example_now())), "SignatureDoesNotMatch");
}

#[test]
fn aws_example_get_object_http2_authority() {
    // An HTTP/2 request carries host as :authority, i.e. in the URI.
    let mut p = aws_get_object();
    p.headers.remove("host");
    p.uri = "https://examplebucket.s3.amazonaws.com/test.txt"
        .parse()
        .unwrap();
    check(&p, example_now()).unwrap();
}

#[test]
fn aws_example_put_object_single_chunk() {
    let a = auth_header(
        "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
    );
    let p = parts(
        "PUT",
        "/test%24file.text",
        &[
            ("date", "Fri, 24 May 2013 00:00:00 GMT"),
            ("host", "examplebucket.s3.amazonaws.com"),
            (
                "x-amz-content-sha256",
                "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
            ),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("authorization", &a),
        ],
    );
    let v = check(&p, example_now()).unwrap();
    assert_eq!(
        v.body,
        BodyMode::Sha256("44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072".into())
    );
    // The path is signed raw: its decoded form is another path.
    let mut q = p.clone();
    q.uri = "/test$file.text".parse().unwrap();
    assert_eq!(code(check(&q, example_now())), "SignatureDoesNotMatch");
}

#[test]
fn aws_example_list_objects() {
    let a = auth_header(
        "host;x-amz-content-sha256;x-amz-date",
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
    );
    let headers = [
        ("host", "examplebucket.s3.amazonaws.com"),
        ("x-amz-content-sha256", EMPTY),
        ("x-amz-date", "20130524T000000Z"),
        ("authorization", a.as_str()),
    ];
    // The query is sorted, so its order on the wire does not matter.
    check(
        &parts("GET", "/?max-keys=2&prefix=J", &headers),
        example_now(),
    )
    .unwrap();
    check(
        &parts("GET", "/?prefix=J&max-keys=2", &headers),
        example_now(),
    )
    .unwrap();
    check(
        &parts("GET", "/?prefix=%4A&max-keys=2", &headers),
        example_now(),
    )
    .unwrap();
    assert_eq!(
        code(check(
            &parts("GET", "/?max-keys=3&prefix=J", &headers),
            example_now()
        )),
        "SignatureDoesNotMatch"
    );
    assert_eq!(
        code(check(
            &parts("GET", "/?max-keys=2&prefix=J&x", &headers),
            example_now()
        )),
        "SignatureDoesNotMatch"
    );
}

const PRESIGNED: &str = concat!(
    "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256",
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request",
    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host",
    "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
);

fn presigned(uri: &str) -> Parts {
    parts("GET", uri, &[("host", "examplebucket.s3.amazonaws.com")])
}

#[test]
fn aws_example_presigned_url() {
    let v = check(&presigned(PRESIGNED), example_now()).unwrap();
    assert_eq!(v.access_key, AK);
    assert_eq!(v.body, BodyMode::Unsigned);
    // Valid until the end of X-Amz-Expires, and a little before its date.
    check(&presigned(PRESIGNED), at(EXAMPLE_TIME + 86400)).unwrap();
    check(&presigned(PRESIGNED), at(EXAMPLE_TIME - 60)).unwrap();
    // Expired: AccessDenied "Request has expired".
    let e = check(&presigned(PRESIGNED), at(EXAMPLE_TIME + 86401)).unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), ("AccessDenied", 403));
    assert_eq!(e.to_string(), "Request has expired");
    // Signed too far in the future: AccessDenied "Request is not valid yet"
    // (S3's and MinIO's answer for a presigned URL).
    let e = check(&presigned(PRESIGNED), at(EXAMPLE_TIME - 3600)).unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), ("AccessDenied", 403));
    assert_eq!(e.to_string(), "Request is not valid yet");
}

#[test]
fn presigned_tampers() {
    let now = example_now();
    let t = |from: &str, to: &str| code(check(&presigned(&PRESIGNED.replace(from, to)), now));
    assert_eq!(
        t("X-Amz-Expires=86400", "X-Amz-Expires=86401"),
        "SignatureDoesNotMatch"
    );
    assert_eq!(t("/test.txt", "/test2.txt"), "SignatureDoesNotMatch");
    assert_eq!(t("aeeed9bb", "aeeed9bc"), "SignatureDoesNotMatch");
    assert_eq!(
        t(
            "&X-Amz-SignedHeaders=host",
            "&X-Amz-SignedHeaders=host&extra=1"
        ),
        "SignatureDoesNotMatch"
    );
    assert_eq!(
        t("X-Amz-Expires=86400", "X-Amz-Expires=604801"),
        "AuthorizationQueryParametersError"
    );
    // 0 parses, then has expired (the signature is checked after).
    let e = check(
        &presigned(&PRESIGNED.replace("X-Amz-Expires=86400", "X-Amz-Expires=0")),
        now,
    )
    .unwrap_err();
    assert_eq!(
        (e.code(), e.to_string().as_str()),
        ("AccessDenied", "Request has expired")
    );
    assert_eq!(
        t("X-Amz-Expires=86400", "X-Amz-Expires=abc"),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("X-Amz-Expires=86400", "X-Amz-Expires=-1"),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("&X-Amz-Expires=86400", ""),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t(
            "&X-Amz-Date=20130524T000000Z",
            "&X-Amz-Date=20130524T000000Z&X-Amz-Date=20130524T000000Z"
        ),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("X-Amz-Date=20130524T000000Z", "X-Amz-Date=20130525T000000Z"),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("X-Amz-Date=20130524T000000Z", "X-Amz-Date=2013-05-24"),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("us-east-1", "eu-west-1"),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLF"),
        "InvalidAccessKeyId"
    );
    assert_eq!(
        t("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=range"),
        "AccessDenied"
    );
    assert_eq!(
        t(
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Algorithm=AWS4-HMAC-SHA1"
        ),
        "AuthorizationQueryParametersError"
    );
    assert_eq!(
        t(
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256"
        ),
        "NotImplemented"
    );
    // An unsigned x-amz-* header, and an unsigned token.
    let mut p = presigned(PRESIGNED);
    p.headers
        .insert("x-amz-meta-a", HeaderValue::from_static("b"));
    assert_eq!(code(check(&p, now)), "AccessDenied");
    let mut p = presigned(PRESIGNED);
    p.headers
        .insert("x-amz-rdma-token", HeaderValue::from_static("tok"));
    let e = check(&p, now).unwrap_err();
    assert_eq!(e.code(), "AccessDenied");
    assert!(
        e.to_string().contains("x-amz-rdma-token must be signed"),
        "{e}"
    );
    // Both an Authorization header and query authentication.
    let mut p = presigned(PRESIGNED);
    p.headers.insert(
        "authorization",
        HeaderValue::from_static("AWS4-HMAC-SHA256 Credential=x"),
    );
    assert_eq!(code(check(&p, now)), "InvalidArgument");
}

const CHUNK_SEED: &str = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

#[test]
fn aws_example_chunked_upload_seed() {
    let a = format!(
        "AWS4-HMAC-SHA256 Credential={AK}/20130524/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class, Signature={CHUNK_SEED}"
    );
    let p = parts(
        "PUT",
        "/examplebucket/chunkObject.txt",
        &[
            ("host", "s3.amazonaws.com"),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("authorization", &a),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("content-encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("content-length", "66824"),
        ],
    );
    let v = check(&p, example_now()).unwrap();
    assert_eq!(v.body, BodyMode::ChunkedSigned { trailer: false });
    assert_eq!(v.decoded_length, Some(66560));
}

// --- Header auth errors ---------------------------------------------------

#[test]
fn header_auth_malformations() {
    let now = example_now();
    let with_auth = |a: &str| {
        let mut p = aws_get_object();
        p.headers
            .insert("authorization", HeaderValue::from_str(a).unwrap());
        code(check(&p, now))
    };
    let good = aws_get_object().headers["authorization"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        with_auth(&good.replace("us-east-1", "eu-west-1")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace("/s3/", "/s4/")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace("aws4_request", "aws4_reques")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace("/20130524/", "/20130525/")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace("/20130524/", "/2013052/")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace(",Signature=f0", ",Signature=f")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace(",Signature=f0", ",Signature=g0")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace(",Signature=", ",Bogus=1,Signature=")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace("SignedHeaders=", "SignedHeaders=range;")),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth(&good.replace(",SignedHeaders=host;", ",SignedHeaders=")),
        "AccessDenied"
    );
    assert_eq!(
        with_auth(&format!("{good},Signature={}", "0".repeat(64))),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth("AWS4-HMAC-SHA256"),
        "AuthorizationHeaderMalformed"
    );
    assert_eq!(
        with_auth("AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg="),
        "SignatureDoesNotMatch"
    );
    assert_eq!(
        with_auth("AWS4-ECDSA-P256-SHA256 Credential=x"),
        "NotImplemented"
    );
    assert_eq!(with_auth("Bearer abc"), "InvalidArgument");
    assert_eq!(with_auth(""), "InvalidArgument");
    // Two Authorization headers.
    let mut p = aws_get_object();
    p.headers
        .append("authorization", HeaderValue::from_str(&good).unwrap());
    assert_eq!(code(check(&p, now)), "AuthorizationHeaderMalformed");
    // Non-ASCII.
    let mut p = aws_get_object();
    p.headers.insert(
        "authorization",
        HeaderValue::from_bytes(b"AWS4-HMAC-SHA256 \xff").unwrap(),
    );
    assert_eq!(code(check(&p, now)), "AuthorizationHeaderMalformed");
}

#[test]
fn header_auth_missing_pieces() {
    let now = example_now();
    let mut p = aws_get_object();
    p.headers.remove("x-amz-content-sha256");
    let e = check(&p, now).unwrap_err();
    assert_eq!(
        (e.code(), e.status().as_u16()),
        ("MissingSecurityHeader", 400)
    );
    let mut p = aws_get_object();
    p.headers
        .insert("x-amz-content-sha256", HeaderValue::from_static("nope"));
    assert_eq!(code(check(&p, now)), "InvalidArgument");
    let mut p = aws_get_object();
    p.headers.remove("x-amz-date");
    assert_eq!(code(check(&p, now)), "AccessDenied");
    let mut p = aws_get_object();
    p.headers
        .insert("x-amz-date", HeaderValue::from_static("20130524T000000"));
    assert_eq!(code(check(&p, now)), "AccessDenied");
    // Anonymous.
    let p = parts(
        "GET",
        "/test.txt",
        &[("host", "examplebucket.s3.amazonaws.com")],
    );
    assert_eq!(code(check(&p, now)), "AccessDenied");
    // SigV2 query authentication, expired (see sigv2.rs for the rest).
    let p = parts(
        "GET",
        "/test.txt?AWSAccessKeyId=AK&Expires=1&Signature=abc",
        &[("host", "h")],
    );
    assert_eq!(code(check(&p, now)), "AccessDenied");
}

#[test]
fn header_auth_skew() {
    let p = aws_get_object();
    check(&p, at(EXAMPLE_TIME + 15 * 60)).unwrap();
    check(&p, at(EXAMPLE_TIME - 15 * 60)).unwrap();
    let e = check(&p, at(EXAMPLE_TIME + 15 * 60 + 1)).unwrap_err();
    assert_eq!(
        (e.code(), e.status().as_u16()),
        ("RequestTimeTooSkewed", 403)
    );
    assert_eq!(
        code(check(&p, at(EXAMPLE_TIME - 15 * 60 - 1))),
        "RequestTimeTooSkewed"
    );
    assert_eq!(code(check(&p, UNIX_EPOCH)), "RequestTimeTooSkewed");
}

// --- sign_request then verify -------------------------------------------

const NOW: u64 = 1_700_000_000;

fn signed(method: Method, uri: &str, extra: &[(&str, &str)], payload: &str) -> Parts {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    let mut req = b.body(Body::empty()).unwrap();
    upstream::sign_request(&mut req, AK, SK, "us-east-1", payload, at(NOW)).unwrap();
    req.into_parts().0
}

fn round_trip() -> Parts {
    signed(
        Method::PUT,
        "http://127.0.0.1:9000/bucket/dir/key%20with%20space%2Bplus?partNumber=1&uploadId=a%2Fb%3D&empty",
        &[("content-type", "text/plain"), ("x-amz-meta-colour", "  deep   blue "), ("content-length", "11")],
        "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
    )
}

#[test]
fn round_trip_verifies() {
    let p = round_trip();
    assert_eq!(p.headers["host"], "127.0.0.1:9000");
    assert!(p.headers["authorization"].is_sensitive());
    assert_eq!(p.headers["x-amz-date"], "20231114T221320Z");
    assert_eq!(
        p.headers["x-amz-content-sha256"],
        "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
    );
    let v = check(&p, at(NOW)).unwrap();
    assert_eq!(v.access_key, AK);
    assert_eq!(
        v.body,
        BodyMode::Sha256("b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9".into())
    );

    // Origin-form request with a Host header, the default port, UNSIGNED-PAYLOAD.
    let p = signed(
        Method::GET,
        "/b/k?list-type=2&prefix=a+b",
        &[("host", "store.example")],
        "UNSIGNED-PAYLOAD",
    );
    assert_eq!(check(&p, at(NOW)).unwrap().body, BodyMode::Unsigned);
    let p = signed(Method::GET, "https://store.example:443/b/k", &[], EMPTY);
    assert_eq!(p.headers["host"], "store.example");
    check(&p, at(NOW)).unwrap();
    // Headers aws-sigv4 would not sign, and hop-by-hop ones, may change.
    let mut p = signed(
        Method::GET,
        "http://h/b/k",
        &[("user-agent", "a"), ("connection", "close")],
        EMPTY,
    );
    p.headers
        .insert("user-agent", HeaderValue::from_static("b"));
    p.headers.remove("connection");
    check(&p, at(NOW)).unwrap();
}

/// A change made to a signed request.
type Tamper = dyn Fn(&mut Parts);

#[test]
fn round_trip_tampers() {
    let now = at(NOW);
    let tamper = |f: &dyn Fn(&mut Parts)| {
        let mut p = round_trip();
        f(&mut p);
        check(&p, now)
    };
    let sig_mismatch: &[(&str, &Tamper)] = &[
        ("method", &|p| p.method = Method::POST),
        ("path", &|p| {
            p.uri = "http://127.0.0.1:9000/bucket/dir/key%20with%20space%2Bplus2?partNumber=1&uploadId=a%2Fb%3D&empty".parse().unwrap()
        }),
        ("path encoding", &|p| {
            p.uri = "http://127.0.0.1:9000/bucket/dir/key%20with%20space+plus?partNumber=1&uploadId=a%2Fb%3D&empty".parse().unwrap()
        }),
        ("query", &|p| {
            p.uri = "http://127.0.0.1:9000/bucket/dir/key%20with%20space%2Bplus?partNumber=2&uploadId=a%2Fb%3D&empty".parse().unwrap()
        }),
        ("query added", &|p| {
            p.uri = "http://127.0.0.1:9000/bucket/dir/key%20with%20space%2Bplus?partNumber=1&uploadId=a%2Fb%3D&empty&x=1".parse().unwrap()
        }),
        ("signed header", &|p| {
            p.headers
                .insert("x-amz-meta-colour", HeaderValue::from_static("red"));
        }),
        ("content-type", &|p| {
            p.headers
                .insert("content-type", HeaderValue::from_static("text/html"));
        }),
        ("host", &|p| {
            p.headers
                .insert("host", HeaderValue::from_static("127.0.0.1:9001"));
        }),
        ("payload hash", &|p| {
            p.headers
                .insert("x-amz-content-sha256", HeaderValue::from_static(EMPTY));
        }),
        ("date", &|p| {
            p.headers
                .insert("x-amz-date", HeaderValue::from_static("20231114T221321Z"));
        }),
        ("signature hex", &|p| {
            let a = p.headers["authorization"].to_str().unwrap().to_string();
            let i = a.len() - 1;
            let last = if a.ends_with('0') { "1" } else { "0" };
            p.headers.insert(
                "authorization",
                HeaderValue::from_str(&format!("{}{last}", &a[..i])).unwrap(),
            );
        }),
        ("other access key", &|p| {
            let a = p.headers["authorization"]
                .to_str()
                .unwrap()
                .replace(AK, "OTHERKEY");
            p.headers
                .insert("authorization", HeaderValue::from_str(&a).unwrap());
        }),
    ];
    for (what, f) in sig_mismatch {
        let e = tamper(f)
            .err()
            .unwrap_or_else(|| panic!("{what}: verified"));
        assert_eq!(
            (e.code(), e.status().as_u16()),
            ("SignatureDoesNotMatch", 403),
            "{what}"
        );
    }
    let e = tamper(&|p| {
        let a = p.headers["authorization"]
            .to_str()
            .unwrap()
            .replace(AK, "NOSUCHKEY");
        p.headers
            .insert("authorization", HeaderValue::from_str(&a).unwrap());
    })
    .unwrap_err();
    assert_eq!(e.code(), "InvalidAccessKeyId");
    let e = tamper(&|p| {
        let a = p.headers["authorization"]
            .to_str()
            .unwrap()
            .replace("us-east-1", "eu-west-1");
        p.headers
            .insert("authorization", HeaderValue::from_str(&a).unwrap());
    })
    .unwrap_err();
    assert_eq!(
        (e.code(), e.status().as_u16()),
        ("AuthorizationHeaderMalformed", 400)
    );
    // The date moved to another day: the scope no longer matches.
    let e = tamper(&|p| {
        p.headers
            .insert("x-amz-date", HeaderValue::from_static("20231115T000000Z"));
    })
    .unwrap_err();
    assert_eq!(e.code(), "AuthorizationHeaderMalformed");
    // Verified against another region.
    let other = AuthSettings {
        region: "eu-west-1".into(),
        ..settings()
    };
    assert_eq!(
        auth::verify(&round_trip(), &creds(), &other, now)
            .unwrap_err()
            .code(),
        "AuthorizationHeaderMalformed"
    );
    // Skew either way.
    assert_eq!(
        code(check(&round_trip(), at(NOW + 901))),
        "RequestTimeTooSkewed"
    );
    assert_eq!(
        code(check(&round_trip(), at(NOW - 901))),
        "RequestTimeTooSkewed"
    );
    check(&round_trip(), at(NOW + 899)).unwrap();
}

#[test]
fn rdma_token_must_be_signed() {
    // Signed with the token: fine.
    let p = signed(
        Method::GET,
        "http://h/b/k",
        &[("x-amz-rdma-token", "abc.def")],
        EMPTY,
    );
    assert!(p.headers["authorization"]
        .to_str()
        .unwrap()
        .contains("x-amz-rdma-token"));
    check(&p, at(NOW)).unwrap();
    // Added after signing: refused with its own message.
    let mut p = signed(Method::GET, "http://h/b/k", &[], EMPTY);
    p.headers
        .insert("x-amz-rdma-token", HeaderValue::from_static("abc.def"));
    let e = check(&p, at(NOW)).unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), ("AccessDenied", 403));
    assert!(
        e.to_string().contains("x-amz-rdma-token must be signed"),
        "{e}"
    );
    assert!(!e.to_string().contains("abc.def"));
    // Any other unsigned x-amz-* header too (Garage's rule).
    let mut p = signed(Method::GET, "http://h/b/k", &[], EMPTY);
    p.headers
        .insert("x-amz-acl", HeaderValue::from_static("public-read"));
    let e = check(&p, at(NOW)).unwrap_err();
    assert_eq!(e.code(), "AccessDenied");
    assert!(e.to_string().contains("x-amz-acl"), "{e}");
    // A signed token whose value changed.
    let mut p = signed(
        Method::GET,
        "http://h/b/k",
        &[("x-amz-rdma-token", "abc.def")],
        EMPTY,
    );
    p.headers
        .insert("x-amz-rdma-token", HeaderValue::from_static("abc.deg"));
    assert_eq!(code(check(&p, at(NOW))), "SignatureDoesNotMatch");
}

#[test]
fn sign_request_refuses_bad_input() {
    let mut req = Request::builder()
        .uri("/no/host")
        .body(Body::empty())
        .unwrap();
    let e = upstream::sign_request(&mut req, AK, SK, "us-east-1", EMPTY, at(NOW)).unwrap_err();
    assert_eq!(e.code(), "InternalError");
    let mut req = Request::builder()
        .uri("http://h/")
        .body(Body::empty())
        .unwrap();
    assert!(upstream::sign_request(&mut req, AK, SK, "us-east-1", "not-a-hash", at(NOW)).is_err());
    assert!(upstream::sign_request(
        &mut req,
        AK,
        SK,
        "us-east-1",
        EMPTY,
        UNIX_EPOCH - Duration::from_secs(1)
    )
    .is_err());
    assert!(upstream::sign_request(
        &mut req,
        AK,
        SK,
        "us-east-1",
        EMPTY,
        at(u64::from(u32::MAX) * 100)
    )
    .is_err());
    assert!(upstream::sign_request(&mut req, AK, SK, "bad\nregion", EMPTY, at(NOW)).is_err());
    let mut req = Request::builder()
        .uri("http://h/")
        .header("x-amz-meta-x", &b"\xff"[..])
        .body(Body::empty())
        .unwrap();
    // Bytes that are not visible ASCII are signed as they are (what the
    // store makes of them is its answer), and verify.
    upstream::sign_request(&mut req, AK, SK, "us-east-1", EMPTY, at(NOW)).unwrap();
    assert_eq!(req.headers()["x-amz-meta-x"].as_bytes(), b"\xff");
    let (p, _) = req.into_parts();
    check(&p, at(NOW)).unwrap();
    let mut req = Request::builder()
        .uri("http://h/")
        .header("x-amz-meta-x", &b"\xff"[..])
        .body(Body::empty())
        .unwrap();
    assert!(upstream::sign_request(&mut req, AK, SK, "bad\nregion", EMPTY, at(NOW)).is_err());
}

// --- Presigned round trip with aws-sigv4 ---------------------------------

fn presign(uri: &str, expires: Duration, extra: &[(&str, &str)]) -> Parts {
    use aws_sigv4::http_request::{
        sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    };
    let identity = aws_credential_types::Credentials::new(AK, SK, None, None, "test").into();
    let mut s = SigningSettings::default();
    s.signature_location = SignatureLocation::QueryParams;
    s.expires_in = Some(expires);
    s.percent_encoding_mode = aws_sigv4::http_request::PercentEncodingMode::Single;
    s.uri_path_normalization_mode = aws_sigv4::http_request::UriPathNormalizationMode::Disabled;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(at(NOW))
        .settings(s)
        .build()
        .unwrap()
        .into();
    let mut req = Request::builder().method("GET").uri(uri);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let mut req = req.body(()).unwrap();
    let headers: Vec<(&str, &str)> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
        .collect();
    let signable = SignableRequest::new(
        "GET",
        uri.to_string(),
        headers.into_iter(),
        SignableBody::UnsignedPayload,
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(&mut req);
    req.into_parts().0
}

#[test]
fn presigned_round_trip() {
    let p = presign(
        "http://store.example/b/some%20key?versionId=3",
        Duration::from_secs(300),
        &[],
    );
    assert!(p.uri.query().unwrap().contains("X-Amz-Signature="));
    let v = check(&p, at(NOW + 300)).unwrap();
    assert_eq!(v.body, BodyMode::Unsigned);
    assert_eq!(
        check(&p, at(NOW + 301)).unwrap_err().to_string(),
        "Request has expired"
    );
    // With a signed x-amz-* header.
    let p = presign(
        "http://store.example/b/k",
        Duration::from_secs(60),
        &[("x-amz-rdma-token", "t")],
    );
    check(&p, at(NOW)).unwrap();
    let mut q = p.clone();
    q.headers
        .insert("x-amz-rdma-token", HeaderValue::from_static("u"));
    assert_eq!(code(check(&q, at(NOW))), "SignatureDoesNotMatch");
    let p = presign(
        "http://store.example/b/k",
        Duration::from_secs(604_801),
        &[],
    );
    assert_eq!(
        code(check(&p, at(NOW))),
        "AuthorizationQueryParametersError"
    );
}

// --- No input makes verify panic -----------------------------------------

fn auth_strings() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,200}",
        "AWS4-HMAC-SHA256 [ -~]{0,200}",
        "AWS4-HMAC-SHA256 Credential=[ -~]{0,60}, ?SignedHeaders=[ -~]{0,40}, ?Signature=[ -~]{0,70}",
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/2013052[0-9]/us-east-1/s3/aws4_request,SignedHeaders=(host|range|x-amz-date|;)*,Signature=[0-9a-fA-F]{60,68}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn verify_never_panics_on_authorization(a in auth_strings(), date in "[0-9TZ]{0,17}", sha in "[ -~]{0,70}") {
        let mut p = aws_get_object();
        if let Ok(v) = HeaderValue::from_str(&a) {
            p.headers.insert("authorization", v);
        }
        if let Ok(v) = HeaderValue::from_str(&date) {
            p.headers.insert("x-amz-date", v);
        }
        if let Ok(v) = HeaderValue::from_str(&sha) {
            p.headers.insert("x-amz-content-sha256", v);
        }
        let r = auth::verify(&p, &creds(), &settings(), example_now());
        if let Err(e) = r {
            let _ = (e.code(), e.status(), e.to_string());
        }
    }

    #[test]
    fn verify_never_panics_on_query(q in "[!-~]{0,200}", now in any::<u64>()) {
        let uri = format!("/k?{q}");
        if let Ok(uri) = uri.parse::<http::Uri>() {
            let mut p = presigned(PRESIGNED);
            p.uri = uri;
            let now = UNIX_EPOCH.checked_add(Duration::from_secs(now)).unwrap_or(UNIX_EPOCH);
            let _ = auth::verify(&p, &creds(), &settings(), now);
        }
    }
}
