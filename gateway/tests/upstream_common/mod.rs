//! The S3 flow both upstream tests drive through an [`Upstream`].

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use hipobj_gateway::body::Body;
use hipobj_gateway::upstream::{Payload, Upstream};

/// A status, headers and the whole body (small bodies only: tests).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Sends one request with `headers` and `body` signed as `payload`.
pub async fn call_with(
    up: &dyn Upstream,
    method: Method,
    target: &str,
    headers: &[(&str, &str)],
    body: Bytes,
    payload: Payload,
) -> Answer {
    let mut req = Request::builder().method(method.clone()).uri(target);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if !body.is_empty() || method == Method::PUT || method == Method::POST {
        req = req.header("content-length", body.len());
    }
    let req = req.body(Body::from(body)).unwrap();
    let resp = up
        .send(req, payload)
        .await
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"));
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("response body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// Sends one request with its body signed by its SHA-256.
pub async fn call(
    up: &dyn Upstream,
    method: Method,
    target: &str,
    body: impl Into<Bytes>,
) -> Answer {
    let body = body.into();
    let payload = Payload::Sha256(sha256_hex(&body));
    call_with(up, method, target, &[], body, payload).await
}

/// The text of the first `<tag>` element in `xml`.
pub fn xml_field<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(&xml[start..end])
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Bucket and object round trip, listing, multipart and errors.
pub async fn s3_flow(up: &dyn Upstream) {
    assert!(up.ready().await, "{} not ready", up.describe());

    // CreateBucket.
    let a = call(up, Method::PUT, "/bucket", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK, "CreateBucket: {}", a.text());

    // PutObject, payload signed by its hash; a key that needs escaping.
    let a = call(
        up,
        Method::PUT,
        "/bucket/hello%20world.txt",
        &b"0123456789"[..],
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "PutObject: {}", a.text());
    assert!(a.headers.contains_key("etag"));

    // PutObject, unsigned payload, under a "directory".
    let unsigned = pattern(100_000, 7);
    let a = call_with(
        up,
        Method::PUT,
        "/bucket/dir/unsigned.bin",
        &[("content-type", "application/octet-stream")],
        Bytes::from(unsigned.clone()),
        Payload::Unsigned,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "PutObject unsigned: {}", a.text());

    // GetObject, whole and a range.
    let a = call(up, Method::GET, "/bucket/hello%20world.txt", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(&a.body[..], b"0123456789");
    let a = call(up, Method::GET, "/bucket/dir/unsigned.bin", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body, unsigned);
    let e = sha256_hex(b"");
    let a = call_with(
        up,
        Method::GET,
        "/bucket/hello%20world.txt",
        &[("range", "bytes=2-5")],
        Bytes::new(),
        Payload::Sha256(e.clone()),
    )
    .await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT, "{}", a.text());
    assert_eq!(&a.body[..], b"2345");
    assert_eq!(a.headers["content-range"], "bytes 2-5/10");

    // HeadObject.
    let a = call(up, Method::HEAD, "/bucket/hello%20world.txt", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers["content-length"], "10");
    assert!(a.body.is_empty());

    // ListObjectsV2 with an empty delimiter (minio-py) lists everything.
    let a = call(
        up,
        Method::GET,
        "/bucket?list-type=2&delimiter=&prefix=",
        Bytes::new(),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    let xml = a.text();
    assert!(xml.contains("<Key>hello world.txt</Key>"), "{xml}");
    assert!(xml.contains("<Key>dir/unsigned.bin</Key>"), "{xml}");
    assert!(!xml.contains("<CommonPrefixes>"), "{xml}");

    // ListObjectsV2 with `/` groups the directory.
    let a = call(
        up,
        Method::GET,
        "/bucket?list-type=2&delimiter=%2F",
        Bytes::new(),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    let xml = a.text();
    assert!(xml.contains("<Key>hello world.txt</Key>"), "{xml}");
    assert!(!xml.contains("<Key>dir/unsigned.bin</Key>"), "{xml}");
    assert!(xml.contains("<Prefix>dir/</Prefix>"), "{xml}");

    // Multipart: create, two parts, complete.
    let a = call(up, Method::POST, "/bucket/big.bin?uploads", Bytes::new()).await;
    assert_eq!(
        a.status,
        StatusCode::OK,
        "CreateMultipartUpload: {}",
        a.text()
    );
    let xml = a.text();
    let upload_id = xml_field(&xml, "UploadId").expect("UploadId").to_owned();
    let part1 = pattern(5 << 20, 1);
    let part2 = pattern(300_000, 2);
    let mut etags = Vec::new();
    for (n, part) in [(1, &part1), (2, &part2)] {
        let target = format!("/bucket/big.bin?partNumber={n}&uploadId={upload_id}");
        let a = call(up, Method::PUT, &target, Bytes::from(part.clone())).await;
        assert_eq!(a.status, StatusCode::OK, "UploadPart {n}: {}", a.text());
        etags.push(a.headers["etag"].to_str().unwrap().to_owned());
    }
    let complete = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{}</ETag></Part>\
         <Part><PartNumber>2</PartNumber><ETag>{}</ETag></Part></CompleteMultipartUpload>",
        etags[0], etags[1]
    );
    let target = format!("/bucket/big.bin?uploadId={upload_id}");
    let a = call(up, Method::POST, &target, complete.into_bytes()).await;
    assert_eq!(
        a.status,
        StatusCode::OK,
        "CompleteMultipartUpload: {}",
        a.text()
    );
    assert!(
        a.text().contains("<CompleteMultipartUploadResult"),
        "{}",
        a.text()
    );
    let a = call(up, Method::GET, "/bucket/big.bin", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body.len(), part1.len() + part2.len());
    assert!(a.body[..part1.len()] == part1[..] && a.body[part1.len()..] == part2[..]);

    // DeleteObject, then the store's 404 passes through intact.
    let a = call(
        up,
        Method::DELETE,
        "/bucket/hello%20world.txt",
        Bytes::new(),
    )
    .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text());
    let a = call(up, Method::GET, "/bucket/hello%20world.txt", Bytes::new()).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.headers["content-type"].to_str().unwrap().contains("xml"));
    assert_eq!(
        xml_field(&a.text(), "Code"),
        Some("NoSuchKey"),
        "{}",
        a.text()
    );
}
