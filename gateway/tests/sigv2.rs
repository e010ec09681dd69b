//! Signature Version 2 through the real gateway process, in front of its
//! embedded store and of s3s-fs: requests signed here by hand (HMAC-SHA1
//! of S3's string to sign), in the `Authorization: AWS` header and in the
//! query (`AWSAccessKeyId`, `Signature`, `Expires`), for PUT, GET, HEAD,
//! DELETE and a listing; a wrong signature, an unknown key, an expired URL
//! and a stale date are refused with S3's status and code.

#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hipobj_gateway::body::Body;
use hipobj_testkit::{gateway_with, Answer, PlainS3, ServerProc, AK, S3, SK};
use hmac::Mac as _;
use http::{Method, Request};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

fn hmac_sha1_b64(secret: &str, data: &str) -> String {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(data.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// S3's SigV2 string to sign, written out for the requests of this test:
/// `headers` lowercase, `resource` the path and its sub-resources.
fn string_to_sign(method: &str, headers: &[(&str, &str)], date: &str, resource: &str) -> String {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| *k == n)
            .map_or("", |(_, v)| *v)
    };
    let mut amz: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(k, _)| k.starts_with("x-amz-"))
        .copied()
        .collect();
    amz.sort();
    let mut s = format!(
        "{method}\n{}\n{}\n{date}\n",
        get("content-md5"),
        get("content-type")
    );
    for (k, v) in amz {
        s.push_str(&format!("{k}:{}\n", v.trim()));
    }
    s.push_str(resource);
    s
}

fn send(
    url: &str,
    method: Method,
    pq: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Answer {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build_http();
    let mut b = Request::builder()
        .method(method)
        .uri(format!("{url}{pq}"))
        .header("content-length", body.len());
    for (k, v) in headers {
        b = b.header(k.as_str(), v.as_str());
    }
    let req = b.body(Body::from(body)).unwrap();
    rt.block_on(async {
        let resp = client.request(req).await.expect("request");
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    })
}

/// A header-signed request: `Date` now (or `date`), `headers` signed.
#[allow(clippy::too_many_arguments)]
fn header_signed(
    url: &str,
    method: Method,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    secret: &str,
    access_key: &str,
    date: Option<SystemTime>,
) -> Answer {
    let date = httpdate::fmt_http_date(date.unwrap_or_else(SystemTime::now));
    // The queries of this test name no sub-resource: the resource is the path.
    let sts = string_to_sign(method.as_str(), headers, &date, path);
    let sig = hmac_sha1_b64(secret, &sts);
    let mut all: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    all.push(("date".into(), date));
    all.push(("authorization".into(), format!("AWS {access_key}:{sig}")));
    let pq = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    send(url, method, &pq, &all, body)
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A query-signed (presigned) URL of `path`, valid until `expires`.
fn presigned(method: &Method, path: &str, expires: u64, secret: &str) -> String {
    let sts = string_to_sign(method.as_str(), &[], &expires.to_string(), path);
    let sig = hmac_sha1_b64(secret, &sts);
    format!(
        "{path}?AWSAccessKeyId={}&Expires={expires}&Signature={}",
        enc(AK),
        enc(&sig)
    )
}

#[track_caller]
fn refused(a: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: {}", a.text());
    assert_eq!(a.code().as_deref(), Some(code), "{what}: {}", a.text());
}

fn cases(gw: &ServerProc) {
    let url = &gw.url;
    let v4 = S3::new(url);
    let hs = |method: Method, path: &str, query: &str, headers: &[(&str, &str)], body: &[u8]| {
        header_signed(
            url,
            method,
            path,
            query,
            headers,
            body.to_vec(),
            SK,
            AK,
            None,
        )
    };

    // Create a bucket, PUT with Content-Type, Content-MD5 and metadata.
    let a = hs(Method::PUT, "/v2bkt", "", &[], b"");
    assert_eq!(a.status.as_u16(), 200, "create bucket: {}", a.text());
    let body = b"signed with version 2";
    let md5 = {
        use s3s::crypto::Checksum as _;
        base64::engine::general_purpose::STANDARD.encode(s3s::crypto::Md5::checksum(body))
    };
    let a = hs(
        Method::PUT,
        "/v2bkt/dir/obj.txt",
        "",
        &[
            ("content-type", "text/plain"),
            ("content-md5", &md5),
            ("x-amz-meta-tool", "backup"),
        ],
        body,
    );
    assert_eq!(a.status.as_u16(), 200, "PUT: {}", a.text());

    // GET, HEAD, a listing (its query is no sub-resource).
    let a = hs(Method::GET, "/v2bkt/dir/obj.txt", "", &[], b"");
    assert_eq!(a.status.as_u16(), 200, "GET: {}", a.text());
    assert_eq!(&a.body[..], body);
    let a = hs(Method::HEAD, "/v2bkt/dir/obj.txt", "", &[], b"");
    assert_eq!(a.status.as_u16(), 200);
    assert_eq!(a.header("content-type").as_deref(), Some("text/plain"));
    assert_eq!(a.header("x-amz-meta-tool").as_deref(), Some("backup"));
    let a = hs(Method::GET, "/v2bkt", "prefix=dir%2F", &[], b"");
    assert_eq!(a.status.as_u16(), 200, "list: {}", a.text());
    assert!(a.text().contains("<Key>dir/obj.txt</Key>"), "{}", a.text());

    // A wrong Content-MD5 is the store's to refuse.
    let a = hs(
        Method::PUT,
        "/v2bkt/badmd5",
        "",
        &[("content-md5", "AAAAAAAAAAAAAAAAAAAAAA==")],
        b"x",
    );
    refused(&a, 400, "BadDigest", "wrong Content-MD5");

    // Query authentication: good, expired, wrong signature.
    let expires = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    let pq = presigned(&Method::GET, "/v2bkt/dir/obj.txt", expires, SK);
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    assert_eq!(a.status.as_u16(), 200, "presigned GET: {}", a.text());
    assert_eq!(&a.body[..], body);
    let pq = presigned(&Method::GET, "/v2bkt/dir/obj.txt", expires - 600, SK);
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    refused(&a, 403, "AccessDenied", "expired URL");
    assert!(a.text().contains("Request has expired"), "{}", a.text());
    let pq = presigned(&Method::GET, "/v2bkt/dir/obj.txt", expires, "wrong");
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    refused(&a, 403, "SignatureDoesNotMatch", "presigned, wrong secret");
    // A presigned PUT.
    let pq = presigned(&Method::PUT, "/v2bkt/presigned-put", expires, SK);
    let a = send(url, Method::PUT, &pq, &[], b"put by url".to_vec());
    assert_eq!(a.status.as_u16(), 200, "presigned PUT: {}", a.text());
    let a = v4.get_plain("/v2bkt/presigned-put");
    assert_eq!(&a.body[..], b"put by url");

    // Header auth refusals.
    let a = header_signed(
        url,
        Method::GET,
        "/v2bkt/dir/obj.txt",
        "",
        &[],
        Vec::new(),
        "wrong",
        AK,
        None,
    );
    refused(&a, 403, "SignatureDoesNotMatch", "wrong secret");
    let a = header_signed(
        url,
        Method::GET,
        "/v2bkt/dir/obj.txt",
        "",
        &[],
        Vec::new(),
        SK,
        "NOSUCHKEY",
        None,
    );
    refused(&a, 403, "InvalidAccessKeyId", "unknown key");
    let stale = SystemTime::now() - Duration::from_secs(3600);
    let a = header_signed(
        url,
        Method::GET,
        "/v2bkt/dir/obj.txt",
        "",
        &[],
        Vec::new(),
        SK,
        AK,
        Some(stale),
    );
    refused(&a, 403, "RequestTimeTooSkewed", "stale date");
    // A signed header changed after signing.
    let date = httpdate::fmt_http_date(SystemTime::now());
    let sts = string_to_sign("GET", &[("x-amz-meta-a", "1")], &date, "/v2bkt/dir/obj.txt");
    let sig = hmac_sha1_b64(SK, &sts);
    let a = send(
        url,
        Method::GET,
        "/v2bkt/dir/obj.txt",
        &[
            ("x-amz-meta-a".into(), "2".into()),
            ("date".into(), date),
            ("authorization".into(), format!("AWS {AK}:{sig}")),
        ],
        Vec::new(),
    );
    refused(&a, 403, "SignatureDoesNotMatch", "tampered header");

    // DELETE, then the object is gone.
    let a = hs(Method::DELETE, "/v2bkt/dir/obj.txt", "", &[], b"");
    assert_eq!(a.status.as_u16(), 204, "DELETE: {}", a.text());
    let a = hs(Method::GET, "/v2bkt/dir/obj.txt", "", &[], b"");
    refused(&a, 404, "NoSuchKey", "deleted");
}

#[test]
fn sigv2_through_the_embedded_store() {
    let gw = gateway_with(
        gateway_bin(),
        &["--staging-buffers", "2", "--chunk-mib", "1"],
        &[],
    );
    cases(&gw);
}

#[test]
fn sigv2_through_s3s_fs() {
    let store = PlainS3::start();
    let args = [
        "--upstream",
        store.url.as_str(),
        "--upstream-access-key",
        AK,
        "--upstream-secret-key",
        SK,
        "--staging-buffers",
        "2",
        "--chunk-mib",
        "1",
    ];
    let gw = gateway_with(gateway_bin(), &args, &[]);
    cases(&gw);
}

/// A presigned URL's path and query for `resource` (what is signed),
/// sent as `path` (what is requested), valid until `expires`, with
/// `extra` query parameters appended after signing.
fn presigned_for(method: &Method, resource: &str, path: &str, expires: u64, extra: &str) -> String {
    let sts = string_to_sign(method.as_str(), &[], &expires.to_string(), resource);
    let sig = hmac_sha1_b64(SK, &sts);
    format!(
        "{path}?AWSAccessKeyId={}&Expires={expires}&Signature={}{extra}",
        enc(AK),
        enc(&sig)
    )
}

fn in_seconds(s: u64) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + s
}

/// The safety issue's finding 2, played: with `--domain`, a SigV2
/// signature names its bucket (S3's resource `/bucket/key`), so it cannot
/// be moved to another bucket's host, nor a bucket listing turned into
/// ListBuckets; the standard virtual-hosted form verifies; a presigned URL
/// lives at most 7 days; a parameter outside the signature is refused.
#[test]
fn sigv2_signatures_are_bound_to_their_bucket_and_operation() {
    let gw = gateway_with(gateway_bin(), &["--domain", "s3.example.test"], &[]);
    let url = &gw.url;
    let v4 = S3::new(url);
    v4.create_bucket("alpha");
    v4.create_bucket("beta");
    assert!(v4
        .put_plain("/alpha/k", b"alpha's".to_vec())
        .status
        .is_success());
    assert!(v4
        .put_plain("/beta/k", b"beta's".to_vec())
        .status
        .is_success());
    let host = |b: &str| vec![("host".to_string(), format!("{b}.s3.example.test"))];
    let exp = in_seconds(300);

    // The standard virtual-hosted form: Host alpha.DOMAIN, path /k,
    // resource /alpha/k.
    let pq = presigned_for(&Method::GET, "/alpha/k", "/k", exp, "");
    let a = send(url, Method::GET, &pq, &host("alpha"), Vec::new());
    assert_eq!(a.status, 200, "virtual-hosted presigned GET: {}", a.text());
    assert_eq!(&a.body[..], b"alpha's");
    // Header-signed, virtual-hosted.
    let date = httpdate::fmt_http_date(SystemTime::now());
    let sig = hmac_sha1_b64(SK, &string_to_sign("GET", &[], &date, "/alpha/k"));
    let mut h = host("alpha");
    h.push(("date".into(), date.clone()));
    h.push(("authorization".into(), format!("AWS {AK}:{sig}")));
    let a = send(url, Method::GET, "/k", &h, Vec::new());
    assert_eq!(
        a.status,
        200,
        "virtual-hosted header-signed GET: {}",
        a.text()
    );

    // Alpha's signature, sent to beta's host: refused (it read beta's
    // object before).
    let a = send(url, Method::GET, &pq, &host("beta"), Vec::new());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "alpha's URL at beta's host",
    );
    h[0].1 = "beta.s3.example.test".into();
    let a = send(url, Method::GET, "/k", &h, Vec::new());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "alpha's header at beta's host",
    );
    // The old form (resource /k, which names no bucket) is refused too.
    let pq = presigned_for(&Method::GET, "/k", "/k", exp, "");
    let a = send(url, Method::GET, &pq, &host("beta"), Vec::new());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "a resource without its bucket",
    );
    // A presigned PUT for alpha does not write into beta.
    let pq = presigned_for(&Method::PUT, "/alpha/w", "/w", exp, "");
    let a = send(url, Method::PUT, &pq, &host("beta"), b"planted".to_vec());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "alpha's PUT URL at beta's host",
    );
    let a = v4.get_plain("/beta/w");
    refused(&a, 404, "NoSuchKey", "nothing planted in beta");

    // "List alpha" (resource /alpha/, as botocore signs a bucket) sent
    // path-style as `/` is not ListBuckets.
    let pq = presigned_for(&Method::GET, "/alpha/", "/", exp, "");
    let a = send(url, Method::GET, &pq, &host("alpha"), Vec::new());
    assert_eq!(a.status, 200, "list alpha: {}", a.text());
    assert!(a.text().contains("<Key>k</Key>"), "{}", a.text());
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "list alpha sent as ListBuckets",
    );

    // At most 7 days.
    let pq = presigned_for(
        &Method::GET,
        "/alpha/k",
        "/alpha/k",
        in_seconds(100 * 365 * 86_400),
        "",
    );
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    refused(&a, 403, "AccessDenied", "a presigned URL for 100 years");
    let pq = presigned_for(
        &Method::GET,
        "/alpha/k",
        "/alpha/k",
        in_seconds(6 * 86_400),
        "",
    );
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    assert_eq!(a.status, 200, "6 days: {}", a.text());

    // Parameters outside the signature that change the operation.
    for extra in ["&attributes", "&retention", "&legal-hold", "&encryption"] {
        let pq = presigned_for(&Method::GET, "/alpha/k", "/alpha/k", exp, extra);
        let a = send(url, Method::GET, &pq, &[], Vec::new());
        refused(&a, 403, "AccessDenied", extra);
    }
    // A presigned PUT as botocore makes it: the signed Content-Type also
    // in the query (`content-type=`), the header sent with the request.
    let ct = "application/octet-stream";
    let sts = string_to_sign(
        "PUT",
        &[("content-type", ct)],
        &exp.to_string(),
        "/alpha/by-url",
    );
    let pq = format!(
        "/alpha/by-url?AWSAccessKeyId={}&Signature={}&content-type={}&Expires={exp}",
        enc(AK),
        enc(&hmac_sha1_b64(SK, &sts)),
        enc(ct)
    );
    let ct_header = vec![("content-type".to_string(), ct.to_string())];
    let a = send(url, Method::PUT, &pq, &ct_header, b"by url".to_vec());
    assert_eq!(a.status, 200, "botocore's presigned PUT: {}", a.text());
    // Without the header the signature does not match (the query is not
    // what is signed).
    let a = send(url, Method::PUT, &pq, &[], b"by url".to_vec());
    refused(
        &a,
        403,
        "SignatureDoesNotMatch",
        "the signed Content-Type not sent",
    );
    // A signed sub-resource and listing parameters still work.
    let pq = presigned_for(
        &Method::GET,
        "/alpha",
        "/alpha",
        exp,
        "&prefix=k&max-keys=5",
    );
    let a = send(url, Method::GET, &pq, &[], Vec::new());
    assert_eq!(a.status, 200, "listing parameters: {}", a.text());
}
