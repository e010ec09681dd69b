//! Browser-based uploads (POST Object) through the real gateway process,
//! in front of its embedded store and of s3s-fs: SigV4 and SigV2 forms,
//! every answer S3 gives to a good form (204, 200, 201 with its XML, 303
//! redirect), `${filename}`, and every refusal of a bad one (policy
//! expired, a condition failed, an extra field, too large, too small, a
//! wrong signature, an unknown key, no signature) with S3's status and
//! code, nothing stored; a 64 MiB file streams through with the gateway's
//! memory bounded.

#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use hipobj_gateway::body::Body;
use hipobj_testkit::{
    assert_absent, assert_object, gateway_with, xml_field, Answer, PlainS3, ServerProc, AK, S3, SK,
};
use http::{Method, Request};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// `t` as `yyyymmddThhmmssZ` and as ISO 8601 with milliseconds.
fn dates(t: SystemTime) -> (String, String) {
    let dt = time::OffsetDateTime::from(t);
    let amz = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    );
    let iso = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.000Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    );
    (amz, iso)
}

/// A form under construction: its fields in order, then the file.
struct Form {
    fields: Vec<(String, String)>,
}

impl Form {
    /// A SigV4 form for `bucket` signed with `secret` (as `access_key`):
    /// `extra` fields (each also a condition unless named in `unlisted`),
    /// `conditions` added to the policy, which expires at `expires`.
    #[allow(clippy::too_many_arguments)]
    fn v4(
        bucket: &str,
        key: &str,
        extra: &[(&str, &str)],
        unlisted: &[&str],
        conditions: &[serde_json::Value],
        expires: SystemTime,
        access_key: &str,
        secret: &str,
    ) -> Form {
        let now = SystemTime::now();
        let (amz, _) = dates(now);
        let credential = format!("{access_key}/{}/us-east-1/s3/aws4_request", &amz[..8]);
        let mut conds = vec![
            serde_json::json!({ "bucket": bucket }),
            serde_json::json!({ "key": key }),
            serde_json::json!({ "x-amz-algorithm": "AWS4-HMAC-SHA256" }),
            serde_json::json!({ "x-amz-credential": credential }),
            serde_json::json!({ "x-amz-date": amz }),
        ];
        for (k, v) in extra {
            if !unlisted.contains(k) {
                conds.push(serde_json::json!(["eq", format!("${k}"), v]));
            }
        }
        conds.extend(conditions.iter().cloned());
        let policy = serde_json::json!({
            "expiration": dates(expires).1,
            "conditions": conds,
        });
        let policy = b64(policy.to_string().as_bytes());
        let key_time = midnight(now);
        let signing_key =
            aws_sigv4::sign::v4::generate_signing_key(secret, key_time, "us-east-1", "s3");
        let signature =
            aws_sigv4::sign::v4::calculate_signature(signing_key.as_ref(), policy.as_bytes());
        let mut fields: Vec<(String, String)> = vec![("key".into(), key.into())];
        fields.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
        );
        fields.extend([
            ("X-Amz-Algorithm".into(), "AWS4-HMAC-SHA256".into()),
            ("X-Amz-Credential".into(), credential),
            ("X-Amz-Date".into(), amz),
            ("Policy".into(), policy),
            ("X-Amz-Signature".into(), signature),
        ]);
        Form { fields }
    }

    /// A SigV2 form: `AWSAccessKeyId`, `policy`, `signature`.
    fn v2(bucket: &str, key: &str, secret: &str) -> Form {
        let policy = serde_json::json!({
            "expiration": dates(SystemTime::now() + Duration::from_secs(600)).1,
            "conditions": [{ "bucket": bucket }, ["starts-with", "$key", ""]],
        });
        let policy = b64(policy.to_string().as_bytes());
        use hmac::Mac as _;
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(policy.as_bytes());
        let signature = b64(&mac.finalize().into_bytes());
        Form {
            fields: vec![
                ("key".into(), key.into()),
                ("AWSAccessKeyId".into(), AK.into()),
                ("policy".into(), policy),
                ("signature".into(), signature),
            ],
        }
    }

    /// The field `name` set to `value` (replaced where present).
    fn set(mut self, name: &str, value: &str) -> Form {
        match self.fields.iter_mut().find(|(n, _)| n == name) {
            Some(f) => f.1 = value.to_string(),
            None => self.fields.push((name.into(), value.into())),
        }
        self
    }

    /// The multipart body with `file` (named `filename`) last, then
    /// `after` fields (which S3 ignores); and its boundary.
    fn body(&self, filename: &str, file: &[u8], after: &[(&str, &str)]) -> (String, Vec<u8>) {
        let boundary = "----hipobjFormBoundary7MA4YWxkTrZu0gW".to_string();
        let mut out = Vec::with_capacity(file.len() + 4096);
        for (k, v) in &self.fields {
            out.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        out.extend_from_slice(file);
        out.extend_from_slice(b"\r\n");
        for (k, v) in after {
            out.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        (boundary, out)
    }
}

/// Midnight (UTC) of `t`'s day.
fn midnight(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs - secs % 86_400)
}

/// POSTs `body` to `url/bucket`, unsigned but for the form.
fn post(url: &str, bucket: &str, boundary: &str, body: Vec<u8>) -> Answer {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("{url}/{bucket}"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap();
    rt.block_on(async {
        let resp = client.request(req).await.expect("POST");
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    })
}

fn submit(url: &str, bucket: &str, form: &Form, filename: &str, file: &[u8]) -> Answer {
    let (boundary, body) = form.body(filename, file, &[]);
    post(url, bucket, &boundary, body)
}

fn later() -> SystemTime {
    SystemTime::now() + Duration::from_secs(600)
}

fn v4(bucket: &str, key: &str, extra: &[(&str, &str)]) -> Form {
    Form::v4(bucket, key, extra, &[], &[], later(), AK, SK)
}

#[track_caller]
fn refused(a: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: {}", a.text());
    assert_eq!(a.code().as_deref(), Some(code), "{what}: {}", a.text());
}

/// Every case against the gateway at `gw`; `embedded`: its store is the
/// embedded one (s3s-fs creates a missing bucket on a PUT).
fn cases(gw: &ServerProc, embedded: bool) {
    let s3 = S3::new(&gw.url);
    let bucket = "forms";
    s3.create_bucket(bucket);

    // 204 by default, with ETag and Location; the object is the file, its
    // headers from the form.
    let form = v4(
        bucket,
        "a/plain.txt",
        &[
            ("Content-Type", "text/plain"),
            ("x-amz-meta-colour", "blue"),
            ("Cache-Control", "no-cache"),
        ],
    );
    let a = submit(&gw.url, bucket, &form, "local.txt", b"hello form");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    let etag = a.header("etag").expect("ETag");
    assert_eq!(etag, format!("\"{}\"", hex::encode(md5(b"hello form"))));
    let location = a.header("location").expect("Location");
    assert!(location.ends_with("/forms/a/plain.txt"), "{location}");
    assert_object(&s3, "/forms/a/plain.txt", b"hello form");
    let head = s3.send(Method::HEAD, "/forms/a/plain.txt", &[], Vec::new(), false);
    assert_eq!(head.header("content-type").as_deref(), Some("text/plain"));
    assert_eq!(head.header("x-amz-meta-colour").as_deref(), Some("blue"));
    assert_eq!(head.header("cache-control").as_deref(), Some("no-cache"));

    // 200, empty.
    let form = v4(bucket, "b200", &[("success_action_status", "200")]);
    let a = submit(&gw.url, bucket, &form, "f", b"two hundred");
    assert_eq!(a.status.as_u16(), 200, "{}", a.text());
    assert!(a.body.is_empty());
    assert_object(&s3, "/forms/b200", b"two hundred");

    // 201 with the XML PostResponse.
    let form = v4(bucket, "c201", &[("success_action_status", "201")]);
    let a = submit(&gw.url, bucket, &form, "f", b"created");
    assert_eq!(a.status.as_u16(), 201, "{}", a.text());
    assert_eq!(xml_field(&a.body, "Bucket").as_deref(), Some(bucket));
    assert_eq!(xml_field(&a.body, "Key").as_deref(), Some("c201"));
    assert_eq!(
        xml_field(&a.body, "ETag"),
        Some(format!("\"{}\"", hex::encode(md5(b"created"))))
    );
    assert!(xml_field(&a.body, "Location")
        .unwrap()
        .ends_with("/forms/c201"));
    assert_object(&s3, "/forms/c201", b"created");

    // 303 to the redirect, with bucket, key and etag.
    let form = v4(
        bucket,
        "d303",
        &[("success_action_redirect", "http://example.com/done")],
    );
    let a = submit(&gw.url, bucket, &form, "f", b"redirected");
    assert_eq!(a.status.as_u16(), 303, "{}", a.text());
    let etag = hex::encode(md5(b"redirected"));
    assert_eq!(
        a.header("location").as_deref(),
        Some(format!("http://example.com/done?bucket=forms&key=d303&etag=%22{etag}%22").as_str())
    );
    assert_object(&s3, "/forms/d303", b"redirected");

    // ${filename}.
    let form = v4(bucket, "up/${filename}", &[]);
    let a = submit(&gw.url, bucket, &form, "photo.jpg", b"jpeg bytes");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    assert_object(&s3, "/forms/up/photo.jpg", b"jpeg bytes");

    // Field names are case-insensitive; fields after the file are ignored.
    let form = v4(bucket, "e-after", &[]);
    let (boundary, body) = form.body("f", b"after", &[("x-amz-meta-late", "1")]);
    let a = post(&gw.url, bucket, &boundary, body);
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    let head = s3.send(Method::HEAD, "/forms/e-after", &[], Vec::new(), false);
    assert_eq!(head.header("x-amz-meta-late"), None);

    // content-length-range: within, above, below.
    let range = [serde_json::json!(["content-length-range", 4, 8])];
    let ranged = |key: &str| Form::v4(bucket, key, &[], &[], &range, later(), AK, SK);
    let a = submit(&gw.url, bucket, &ranged("r-ok"), "f", b"12345678");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    let a = submit(&gw.url, bucket, &ranged("r-big"), "f", b"123456789");
    refused(&a, 400, "EntityTooLarge", "above the range");
    assert_absent(&s3, "/forms/r-big");
    let a = submit(&gw.url, bucket, &ranged("r-small"), "f", b"123");
    refused(&a, 400, "EntityTooSmall", "below the range");
    assert_absent(&s3, "/forms/r-small");

    // Expired policy.
    let form = Form::v4(
        bucket,
        "expired",
        &[],
        &[],
        &[],
        SystemTime::now() - Duration::from_secs(60),
        AK,
        SK,
    );
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "AccessDenied", "expired");
    assert!(a.text().contains("Policy expired."), "{}", a.text());
    assert_absent(&s3, "/forms/expired");

    // starts-with mismatch.
    let form = Form::v4(
        bucket,
        "other/k",
        &[],
        &[],
        &[serde_json::json!(["starts-with", "$key", "user/"])],
        later(),
        AK,
        SK,
    );
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "AccessDenied", "starts-with");
    assert!(a.text().contains("Policy Condition failed"), "{}", a.text());
    assert_absent(&s3, "/forms/other/k");
    // starts-with with an empty prefix matches anything.
    let form = Form::v4(
        bucket,
        "any",
        &[("Content-Type", "image/png")],
        &["Content-Type"],
        &[serde_json::json!(["starts-with", "$Content-Type", ""])],
        later(),
        AK,
        SK,
    );
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());

    // An extra field, not in the policy.
    let form = Form::v4(
        bucket,
        "extra",
        &[("x-amz-meta-sneaky", "1")],
        &["x-amz-meta-sneaky"],
        &[],
        later(),
        AK,
        SK,
    );
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "AccessDenied", "extra field");
    assert!(
        a.text().contains("Extra input fields: x-amz-meta-sneaky"),
        "{}",
        a.text()
    );
    // ... but x-ignore-* fields need no condition.
    let form = v4(bucket, "ignored", &[]).set("x-ignore-me", "1");
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());

    // Wrong signature, unknown key, no signature.
    let form = Form::v4(
        bucket,
        "badsig",
        &[],
        &[],
        &[],
        later(),
        AK,
        "not-the-secret",
    );
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "SignatureDoesNotMatch", "wrong secret");
    assert_absent(&s3, "/forms/badsig");
    let form = Form::v4(bucket, "nokey", &[], &[], &[], later(), "NOSUCHKEY", SK);
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "InvalidAccessKeyId", "unknown key");
    let form = Form {
        fields: vec![("key".into(), "anon".into())],
    };
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "AccessDenied", "anonymous");
    assert_absent(&s3, "/forms/anon");

    // No file part.
    let form = v4(bucket, "nofile", &[]);
    let mut body = Vec::new();
    let boundary = "bnd";
    for (k, v) in &form.fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let a = post(&gw.url, bucket, boundary, body);
    refused(&a, 400, "InvalidArgument", "no file");

    // Fields before the file beyond 20 KiB.
    let form = v4(bucket, "huge", &[]).set("x-ignore-pad", &"p".repeat(30 << 10));
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 400, "MaxPostPreDataLengthExceededError", "large fields");

    // A part head beyond the raw bound before the file.
    let boundary = "bnd2";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"x-ignore-a\"\r\nX-Pad: {}\r\n\r\nv\r\n--{boundary}--\r\n",
        "p".repeat(70 << 10)
    );
    let a = post(&gw.url, bucket, boundary, body.into_bytes());
    refused(
        &a,
        400,
        "MaxPostPreDataLengthExceededError",
        "a long part head",
    );

    // The file field's name is case-insensitive too.
    let form = v4(bucket, "upper-file", &[]);
    let (boundary, body) = form.body("f", b"upper", &[]);
    let body = String::from_utf8(body)
        .unwrap()
        .replace("name=\"file\"", "name=\"File\"");
    let a = post(&gw.url, bucket, &boundary, body.into_bytes());
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    assert_object(&s3, "/forms/upper-file", b"upper");

    // SigV2 form: good, then a wrong signature.
    let form = Form::v2(bucket, "v2/obj", SK);
    let a = submit(&gw.url, bucket, &form, "f", b"signed v2");
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    assert_object(&s3, "/forms/v2/obj", b"signed v2");
    let form = Form::v2(bucket, "v2/bad", "wrong");
    let a = submit(&gw.url, bucket, &form, "f", b"x");
    refused(&a, 403, "SignatureDoesNotMatch", "SigV2 form, wrong secret");
    assert_absent(&s3, "/forms/v2/bad");

    // A bucket that does not exist: the store's answer.
    if embedded {
        let form = v4("no-such-bucket-here", "k", &[]);
        let a = submit(&gw.url, "no-such-bucket-here", &form, "f", b"x");
        refused(&a, 404, "NoSuchBucket", "no bucket");
    }
}

fn md5(data: &[u8]) -> [u8; 16] {
    use s3s::crypto::Checksum as _;
    s3s::crypto::Md5::checksum(data)
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[1])
        .collect()
}

const SMALL_POOL: &[&str] = &["--staging-buffers", "2", "--chunk-mib", "1"];

#[test]
fn forms_through_the_embedded_store() {
    let gw = gateway_with(gateway_bin(), SMALL_POOL, &[]);
    cases(&gw, true);
}

#[test]
fn forms_through_s3s_fs() {
    let store = PlainS3::start();
    let mut args = vec![
        "--upstream",
        store.url.as_str(),
        "--upstream-access-key",
        AK,
        "--upstream-secret-key",
        SK,
    ];
    args.extend_from_slice(SMALL_POOL);
    let gw = gateway_with(gateway_bin(), &args, &[]);
    cases(&gw, false);
}

/// A 64 MiB file streams through: the bytes read back are equal, and the
/// gateway's peak memory grows by far less than the file.
#[test]
fn a_large_file_streams_with_bounded_memory() {
    let gw = gateway_with(gateway_bin(), SMALL_POOL, &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("big");
    // Warm up: one small upload, so the baseline has every code path.
    let a = submit(
        &gw.url,
        "big",
        &v4("big", "warm", &[]),
        "f",
        &pattern(1 << 20),
    );
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    let before = gw.peak_rss().expect("VmHWM");
    let data = pattern(64 << 20);
    let a = submit(
        &gw.url,
        "big",
        &v4("big", "large.bin", &[]),
        "large.bin",
        &data,
    );
    assert_eq!(a.status.as_u16(), 204, "{}", a.text());
    let after = gw.peak_rss().expect("VmHWM");
    let grew = after.saturating_sub(before);
    eprintln!("peak memory: {before} before, {after} after the 64 MiB upload");
    assert!(
        grew < 32 << 20,
        "the gateway's peak memory grew by {grew} bytes for a 64 MiB upload"
    );
    let got = s3.get_plain("/big/large.bin");
    assert_eq!(got.status.as_u16(), 200);
    assert_eq!(got.body.len(), data.len());
    assert!(got.body[..] == data[..], "bytes differ");
}

/// The safety issue's finding 1 through a form: tenant B's correctly
/// signed form for tenant A's bucket is refused (403 AccessDenied) and
/// nothing lands; A's own form is served.
#[test]
fn a_tenants_form_cannot_upload_into_another_tenants_bucket() {
    let creds = hipobj_testkit::CredentialsFile::with_text(
        "tenant-a secret-of-a buckets=alpha\ntenant-b secret-of-b buckets=beta\n",
    );
    let gw = gateway_with(gateway_bin(), &["--credentials-file", creds.arg()], &[]);
    let a = S3::with_keys(&gw.url, "tenant-a", "secret-of-a");
    a.create_bucket("alpha");
    let b_form = Form::v4(
        "alpha",
        "planted",
        &[],
        &[],
        &[],
        later(),
        "tenant-b",
        "secret-of-b",
    );
    let r = submit(&gw.url, "alpha", &b_form, "f", b"planted by b");
    refused(&r, 403, "AccessDenied", "B's form into A's bucket");
    let r = a.get_plain("/alpha/planted");
    refused(&r, 404, "NoSuchKey", "nothing planted");
    // A key with a dot segment may not lead out of the bucket either.
    let a_form = Form::v4(
        "alpha",
        "../beta/x",
        &[],
        &[],
        &[],
        later(),
        "tenant-a",
        "secret-of-a",
    );
    let r = submit(&gw.url, "alpha", &a_form, "f", b"x");
    refused(&r, 403, "AccessDenied", "a dotted key");
    let a_form = Form::v4(
        "alpha",
        "mine",
        &[],
        &[],
        &[],
        later(),
        "tenant-a",
        "secret-of-a",
    );
    let r = submit(&gw.url, "alpha", &a_form, "f", b"a's own");
    assert_eq!(r.status.as_u16(), 204, "{}", r.text());
    let r = a.get_plain("/alpha/mine");
    assert_eq!(&r.body[..], b"a's own");
}

/// Writes `head` and `body` on a new connection to the gateway, returning
/// the stream (the rest of the body may follow).
fn raw_post(
    url: &str,
    bucket: &str,
    boundary: &str,
    len: usize,
    prefix: &[u8],
) -> std::net::TcpStream {
    use std::io::Write as _;
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(prefix).unwrap();
    s
}

/// The status code of the answer read from `s`.
fn raw_status(s: &mut std::net::TcpStream) -> (u16, String) {
    use std::io::Read as _;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed before an answer");
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    // The rest of what came, for messages.
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    if let Ok(n) = s.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    (status, String::from_utf8_lossy(&got).into_owned())
}

/// The safety issue's finding 4, played: form uploads trickled in hold
/// spool space only within the global budget (`--post-spool-mib`): one
/// that would go past it is answered 503 SlowDown while another holds the
/// space, and served once that one is done; a form upload that goes on
/// past `--post-upload-timeout` is ended with 400 RequestTimeout, its
/// spool space given back.
#[test]
fn form_uploads_spool_within_a_global_budget_and_a_deadline() {
    let gw = gateway_with(
        gateway_bin(),
        &["--post-spool-mib", "4", "--post-upload-timeout", "3s"],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("spool");
    let spooled = || s3.metric("hipobj_post_spool_bytes", &[]);

    // Upload 1: 3 MiB of file sent, its last bytes held back.
    let big = pattern(3 << 20);
    let (boundary, body) = v4("spool", "one", &[]).body("one", &big, &[]);
    let held_back = 64;
    let mut one = raw_post(
        &gw.url,
        "spool",
        &boundary,
        body.len(),
        &body[..body.len() - held_back],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // (The parser keeps the file's last bytes until it sees the boundary.)
    while spooled() < ((3 << 20) - (64 << 10)) as f64 {
        assert!(
            std::time::Instant::now() < deadline,
            "upload 1 never spooled its file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Upload 2 (1.5 MiB) does not fit beside it.
    let r = submit(
        &gw.url,
        "spool",
        &v4("spool", "two", &[]),
        "two",
        &pattern(3 << 19),
    );
    refused(&r, 503, "SlowDown", "past the spool's budget");
    assert_absent(&s3, "/spool/two");
    // Upload 1 finishes and is stored; then upload 2 fits.
    {
        use std::io::Write as _;
        one.write_all(&body[body.len() - held_back..]).unwrap();
    }
    let (status, text) = raw_status(&mut one);
    assert_eq!(status, 204, "{text}");
    assert_object(&s3, "/spool/one", &big);
    let r = submit(
        &gw.url,
        "spool",
        &v4("spool", "two", &[]),
        "two",
        &pattern(3 << 19),
    );
    assert_eq!(r.status.as_u16(), 204, "{}", r.text());
    assert_eq!(spooled(), 0.0);

    // Upload 3 stops sending half-way (under the body timeout, 60 s): the
    // deadline (3 s) ends it.
    let (boundary, body) = v4("spool", "three", &[]).body("three", &big, &[]);
    let mut three = raw_post(
        &gw.url,
        "spool",
        &boundary,
        body.len(),
        &body[..body.len() / 2],
    );
    let (status, text) = raw_status(&mut three);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("RequestTimeout"), "{text}");
    assert_absent(&s3, "/spool/three");
    assert_eq!(spooled(), 0.0);
}
