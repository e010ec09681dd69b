//! The store driven through s3s's whole S3 service with real HTTP
//! requests (path-style, no signing: an access policy that allows all):
//! bytes exact, status and error codes exact.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use s3s::access::{S3Access, S3AccessContext};
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::S3Result;
use sha2::Digest;

use hipobj_store::{Store, StoreConfig};

struct AllowAll;

#[async_trait::async_trait]
impl S3Access for AllowAll {
    async fn check(&self, _cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn code(&self) -> Option<String> {
        field(&self.text(), "Code")
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

fn field(s: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = s.find(&open)? + open.len();
    let end = start + s[start..].find(&format!("</{tag}>"))?;
    Some(s[start..end].to_owned())
}

fn fields(s: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let j = after.find(&close).unwrap();
        out.push(after[..j].to_owned());
        rest = &after[j..];
    }
    out
}

struct Server {
    svc: S3Service,
    root: PathBuf,
}

fn serve(root: &Path, fsync: bool) -> Server {
    let store = Store::open(root, StoreConfig { fsync }).unwrap();
    let mut b = S3ServiceBuilder::new(store);
    b.set_access(AllowAll);
    Server {
        svc: b.build(),
        root: root.to_owned(),
    }
}

impl Server {
    async fn send(&self, req: Request<s3s::Body>) -> Answer {
        let resp = self.svc.call(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let body: Bytes = body.into();
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .header("content-length", body.len())
            .body(s3s::Body::from(body))
            .unwrap();
        self.send(req).await
    }

    async fn put(&self, uri: &str, body: impl Into<Bytes>) -> Answer {
        self.call(Method::PUT, uri, &[], body).await
    }

    async fn get(&self, uri: &str) -> Answer {
        self.call(Method::GET, uri, &[], Bytes::new()).await
    }
}

fn md5_hex(data: &[u8]) -> String {
    use s3s::crypto::Checksum as _;
    hex::encode(s3s::crypto::Md5::checksum(data))
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

#[track_caller]
fn assert_err(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status.as_u16(), status, "{}", a.text());
    assert_eq!(a.code().as_deref(), Some(code), "{}", a.text());
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn buckets() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    assert_eq!(s.put("/bkt", Bytes::new()).await.status, 200);
    assert_err(
        &s.put("/bkt", Bytes::new()).await,
        409,
        "BucketAlreadyOwnedByYou",
    );
    assert_err(
        &s.put("/Bad_Name", Bytes::new()).await,
        400,
        "InvalidBucketName",
    );
    assert_eq!(
        s.call(Method::HEAD, "/bkt", &[], Bytes::new()).await.status,
        200
    );
    assert_eq!(
        s.call(Method::HEAD, "/nope", &[], Bytes::new())
            .await
            .status,
        404
    );
    assert_eq!(s.get("/bkt?location").await.status, 200);
    assert_err(&s.get("/nope?location").await, 404, "NoSuchBucket");
    s.put("/other", Bytes::new()).await;
    let l = s.get("/").await;
    assert_eq!(fields(&l.text(), "Name"), ["bkt", "other"]);
    s.put("/bkt/k", &b"x"[..]).await;
    assert_err(
        &s.call(Method::DELETE, "/bkt", &[], Bytes::new()).await,
        409,
        "BucketNotEmpty",
    );
    s.call(Method::DELETE, "/bkt/k", &[], Bytes::new()).await;
    assert_eq!(
        s.call(Method::DELETE, "/bkt", &[], Bytes::new())
            .await
            .status,
        204
    );
    assert_err(
        &s.call(Method::DELETE, "/bkt", &[], Bytes::new()).await,
        404,
        "NoSuchBucket",
    );
    assert_err(&s.get("/bkt?list-type=2").await, 404, "NoSuchBucket");
    assert_err(&s.put("/bkt/k", &b"x"[..]).await, 404, "NoSuchBucket");
}

#[tokio::test]
async fn objects_bytes_ranges_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    let data = pattern(3 * (1 << 20) + 12345, 7);
    let a = s
        .call(
            Method::PUT,
            "/bkt/dir/obj.bin",
            &[
                ("content-type", "application/x-test"),
                ("x-amz-meta-colour", "blue"),
                ("cache-control", "no-cache"),
            ],
            data.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let etag = format!("\"{}\"", md5_hex(&data));
    assert_eq!(a.header("etag").as_deref(), Some(etag.as_str()));

    let g = s.get("/bkt/dir/obj.bin").await;
    assert_eq!(g.status, 200);
    assert!(g.body[..] == data[..], "bytes differ");
    assert_eq!(g.header("etag").as_deref(), Some(etag.as_str()));
    assert_eq!(
        g.header("content-type").as_deref(),
        Some("application/x-test")
    );
    assert_eq!(g.header("x-amz-meta-colour").as_deref(), Some("blue"));
    assert_eq!(g.header("cache-control").as_deref(), Some("no-cache"));
    assert_eq!(g.header("content-length"), Some(data.len().to_string()));

    let h = s
        .call(Method::HEAD, "/bkt/dir/obj.bin", &[], Bytes::new())
        .await;
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some(data.len().to_string()));
    assert_eq!(h.header("x-amz-meta-colour").as_deref(), Some("blue"));

    let n = data.len();
    for (range, lo, hi) in [
        ("bytes=0-0", 0, 1),
        ("bytes=100-2000000", 100, 2_000_001),
        ("bytes=3000000-", 3_000_000, n),
        ("bytes=-10", n - 10, n),
        ("bytes=5-99999999", 5, n),
    ] {
        let a = s
            .call(
                Method::GET,
                "/bkt/dir/obj.bin",
                &[("range", range)],
                Bytes::new(),
            )
            .await;
        assert_eq!(a.status, 206, "{range}");
        assert!(a.body[..] == data[lo..hi], "{range}: bytes differ");
        assert_eq!(
            a.header("content-range"),
            Some(format!("bytes {lo}-{}/{n}", hi - 1)),
            "{range}"
        );
    }
    let a = s
        .call(
            Method::GET,
            "/bkt/dir/obj.bin",
            &[("range", "bytes=99999999-")],
            Bytes::new(),
        )
        .await;
    assert_err(&a, 416, "InvalidRange");

    assert_err(&s.get("/bkt/missing").await, 404, "NoSuchKey");
    assert_eq!(
        s.call(Method::HEAD, "/bkt/missing", &[], Bytes::new())
            .await
            .status,
        404
    );
    assert_err(&s.get("/nobkt/missing").await, 404, "NoSuchBucket");

    // An empty object.
    assert_eq!(s.put("/bkt/empty", Bytes::new()).await.status, 200);
    let g = s.get("/bkt/empty").await;
    assert_eq!((g.status.as_u16(), g.body.len()), (200, 0));
    assert_eq!(g.header("etag"), Some(format!("\"{}\"", md5_hex(b""))));

    // Overwrite, then delete; a missing key deletes fine.
    s.put("/bkt/dir/obj.bin", &b"new"[..]).await;
    assert_eq!(&s.get("/bkt/dir/obj.bin").await.body[..], b"new");
    assert_eq!(
        s.call(Method::DELETE, "/bkt/dir/obj.bin", &[], Bytes::new())
            .await
            .status,
        204
    );
    assert_err(&s.get("/bkt/dir/obj.bin").await, 404, "NoSuchKey");
    assert_eq!(
        s.call(Method::DELETE, "/bkt/dir/obj.bin", &[], Bytes::new())
            .await
            .status,
        204
    );
    // Only the empty object's two files are left besides the records.
    let left: Vec<_> = files(&dir.path().join("buckets/bkt/objects"));
    assert_eq!(left.len(), 2, "{left:?}");
}

#[tokio::test]
async fn checksums_and_content_md5() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    let data = b"hello checksums".to_vec();
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let crc32 = b64(&crc32fast::hash(&data).to_be_bytes());
    let sha256 = b64(&sha2::Sha256::digest(&data));
    let a = s
        .call(
            Method::PUT,
            "/bkt/k",
            &[
                ("x-amz-checksum-crc32", &crc32),
                ("x-amz-checksum-sha256", &sha256),
            ],
            data.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-amz-checksum-crc32"), Some(crc32.clone()));
    let g = s.get("/bkt/k").await;
    assert_eq!(g.header("x-amz-checksum-crc32"), Some(crc32.clone()));
    assert_eq!(g.header("x-amz-checksum-sha256"), Some(sha256));
    // A range carries no whole-object checksum.
    let g = s
        .call(
            Method::GET,
            "/bkt/k",
            &[("range", "bytes=0-1")],
            Bytes::new(),
        )
        .await;
    assert_eq!(g.header("x-amz-checksum-crc32"), None);

    let wrong = b64(&[0, 0, 0, 0]);
    let a = s
        .call(
            Method::PUT,
            "/bkt/k",
            &[("x-amz-checksum-crc32", &wrong)],
            &b"other"[..],
        )
        .await;
    assert_err(&a, 400, "BadDigest");
    assert!(
        s.get("/bkt/k").await.body[..] == data[..],
        "old object replaced"
    );

    let md5 = b64(&s3s::crypto::Md5::checksum(&data));
    use s3s::crypto::Checksum as _;
    let a = s
        .call(
            Method::PUT,
            "/bkt/m",
            &[("content-md5", &md5)],
            data.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = s
        .call(Method::PUT, "/bkt/m2", &[("content-md5", &md5)], &b"x"[..])
        .await;
    assert_err(&a, 400, "BadDigest");
    assert_err(&s.get("/bkt/m2").await, 404, "NoSuchKey");
}

#[tokio::test]
async fn conditional_requests() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    let a = s.put("/bkt/k", &b"v1"[..]).await;
    let etag = a.header("etag").unwrap();
    let get = |h: &'static str, v: String| {
        let s = &s;
        async move {
            s.call(Method::GET, "/bkt/k", &[(h, &v)], Bytes::new())
                .await
        }
    };
    assert_eq!(get("if-match", etag.clone()).await.status, 200);
    assert_err(
        &get("if-match", "\"nope\"".into()).await,
        412,
        "PreconditionFailed",
    );
    assert_eq!(get("if-none-match", etag.clone()).await.status, 304);
    assert_eq!(get("if-none-match", "*".into()).await.status, 304);
    assert_eq!(get("if-none-match", "\"nope\"".into()).await.status, 200);
    let future = "Fri, 01 Jan 2100 00:00:00 GMT".to_string();
    let past = "Sat, 01 Jan 2000 00:00:00 GMT".to_string();
    assert_eq!(get("if-modified-since", future.clone()).await.status, 304);
    assert_eq!(get("if-modified-since", past.clone()).await.status, 200);
    assert_err(
        &get("if-unmodified-since", past).await,
        412,
        "PreconditionFailed",
    );
    assert_eq!(get("if-unmodified-since", future).await.status, 200);
    let h = s
        .call(
            Method::HEAD,
            "/bkt/k",
            &[("if-none-match", &etag)],
            Bytes::new(),
        )
        .await;
    assert_eq!(h.status, 304);

    // Conditional writes.
    let a = s
        .call(Method::PUT, "/bkt/k", &[("if-none-match", "*")], &b"v2"[..])
        .await;
    assert_err(&a, 412, "PreconditionFailed");
    let a = s
        .call(
            Method::PUT,
            "/bkt/k",
            &[("if-match", "\"nope\"")],
            &b"v2"[..],
        )
        .await;
    assert_err(&a, 412, "PreconditionFailed");
    let a = s
        .call(Method::PUT, "/bkt/k", &[("if-match", &etag)], &b"v2"[..])
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(&s.get("/bkt/k").await.body[..], b"v2");
    let a = s
        .call(
            Method::PUT,
            "/bkt/new",
            &[("if-none-match", "*")],
            &b"n"[..],
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
}

#[tokio::test]
async fn hostile_keys_stay_in_their_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/aaa", Bytes::new()).await;
    s.put("/bbb", Bytes::new()).await;
    s.put("/bbb/secret.txt", &b"bucket b's secret"[..]).await;
    let long = "k".repeat(1024);
    let keys = [
        "../bbb/secret.txt",
        "../../bbb/secret.txt",
        "./x",
        "a//b",
        "/lead",
        "..",
        "../hipobj-store.json",
        "buckets/bbb/bucket.json",
        "\u{e9}\u{1F600}\u{202E}",
        "tab\there",
        long.as_str(),
    ];
    for k in keys {
        let enc: String =
            percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
                .replace("%2F", "/");
        let uri = format!("/aaa/{enc}");
        let a = s.put(&uri, format!("value of {k}")).await;
        assert_eq!(a.status, 200, "{k}: {}", a.text());
        let g = s.get(&uri).await;
        assert_eq!(g.text(), format!("value of {k}"), "{k}");
    }
    // The raw form, unescaped.
    let a = s.put("/aaa/../bbb/secret.txt", &b"raw"[..]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(s.get("/bbb/secret.txt").await.text(), "bucket b's secret");
    let l = s.get("/bbb?list-type=2").await;
    assert_eq!(fields(&l.text(), "Key"), ["secret.txt"]);
    let l = s.get("/aaa?list-type=2").await;
    let mut want: Vec<&str> = keys.to_vec();
    want.sort();
    let listed = fields(&l.text(), "Key");
    let listed: Vec<String> = listed
        .iter()
        .map(|k| k.replace("&amp;", "&").replace("&#9;", "\t"))
        .collect();
    assert_eq!(listed, want);
    assert_err(
        &s.put(&format!("/aaa/{}", "k".repeat(1025)), &b"x"[..])
            .await,
        400,
        "KeyTooLongError",
    );
    assert_eq!(
        s.call(Method::DELETE, "/aaa/../bbb/secret.txt", &[], Bytes::new())
            .await
            .status,
        204
    );
    assert_err(&s.get("/aaa/../bbb/secret.txt").await, 404, "NoSuchKey");
    assert_eq!(s.get("/bbb/secret.txt").await.text(), "bucket b's secret");
    // Nothing was written outside the buckets' own directories.
    for f in files(dir.path()) {
        let rel = f.strip_prefix(dir.path()).unwrap();
        let ok = rel == Path::new("hipobj-store.json")
            || rel.starts_with("buckets/aaa")
            || rel.starts_with("buckets/bbb");
        assert!(ok, "{}", f.display());
    }
    let in_b = files(&dir.path().join("buckets/bbb"));
    assert_eq!(in_b.len(), 3, "{in_b:?}"); // bucket.json, one record, one data file
    let _ = &s.root;
}

#[tokio::test]
async fn listings_v1_and_v2() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), false);
    s.put("/bkt", Bytes::new()).await;
    let mut keys: Vec<String> = (0..1100).map(|i| format!("flat/{i:05}")).collect();
    keys.extend(
        [
            "dir/a",
            "dir/sub/b",
            "dir/sub/c",
            "dir/z",
            "sp ace+plus%.txt",
            "\u{e9}t\u{e9}",
        ]
        .map(String::from),
    );
    for k in &keys {
        let enc = percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
            .to_string()
            .replace("%2F", "/");
        assert_eq!(
            s.put(&format!("/bkt/{enc}"), Bytes::new()).await.status,
            200
        );
    }
    keys.sort();

    // v2 over everything, 1000 at most per page.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut uri = "/bkt?list-type=2".to_string();
        if let Some(t) = &token {
            uri += &format!(
                "&continuation-token={}",
                percent_encoding::utf8_percent_encode(t, percent_encoding::NON_ALPHANUMERIC)
            );
        }
        let a = s.get(&uri).await;
        assert_eq!(a.status, 200, "{}", a.text());
        let t = a.text();
        seen.extend(
            fields(&t, "Key")
                .into_iter()
                .map(|k| k.replace("&amp;", "&")),
        );
        pages += 1;
        if field(&t, "IsTruncated").as_deref() == Some("true") {
            token = field(&t, "NextContinuationToken");
        } else {
            break;
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(seen, keys);

    // Delimiter, prefix, small pages.
    let a = s.get("/bkt?list-type=2&delimiter=/").await;
    let t = a.text();
    assert_eq!(fields(&t, "Prefix")[1..], ["dir/", "flat/"]);
    assert_eq!(fields(&t, "Key"), ["sp ace+plus%.txt", "\u{e9}t\u{e9}"]);
    let a = s.get("/bkt?list-type=2&delimiter=/&prefix=dir/").await;
    let t = a.text();
    assert_eq!(fields(&t, "Key"), ["dir/a", "dir/z"]);
    assert_eq!(fields(&t, "Prefix")[1..], ["dir/sub/"]);
    let a = s.get("/bkt?list-type=2&delimiter=/&max-keys=1").await;
    let t = a.text();
    assert_eq!(field(&t, "KeyCount").as_deref(), Some("1"));
    assert_eq!(fields(&t, "Prefix")[1..], ["dir/"]);
    let tok = field(&t, "NextContinuationToken").unwrap();
    let a = s
        .get(&format!(
            "/bkt?list-type=2&delimiter=/&max-keys=2&continuation-token={tok}"
        ))
        .await;
    let t = a.text();
    assert_eq!(fields(&t, "Prefix")[1..], ["flat/"]);
    assert_eq!(fields(&t, "Key"), ["sp ace+plus%.txt"]);
    let a = s.get("/bkt?list-type=2&start-after=flat/01098").await;
    assert_eq!(
        fields(&a.text(), "Key")[..2],
        ["flat/01099", "sp ace+plus%.txt"]
    );
    assert_err(
        &s.get("/bkt?list-type=2&continuation-token=!!!").await,
        400,
        "InvalidArgument",
    );

    // encoding-type=url encodes keys and prefixes.
    let a = s.get("/bkt?list-type=2&encoding-type=url&prefix=sp").await;
    let t = a.text();
    assert_eq!(fields(&t, "Key"), ["sp%20ace%2Bplus%25.txt"]);
    assert_eq!(field(&t, "EncodingType").as_deref(), Some("url"));

    // v1 with markers.
    let a = s.get("/bkt?prefix=flat/&max-keys=500").await;
    let t = a.text();
    assert_eq!(fields(&t, "Key").len(), 500);
    assert_eq!(field(&t, "IsTruncated").as_deref(), Some("true"));
    let next = field(&t, "NextMarker").unwrap();
    assert_eq!(next, "flat/00499");
    let a = s
        .get(&format!("/bkt?prefix=flat/&max-keys=1000&marker={next}"))
        .await;
    let t = a.text();
    assert_eq!(fields(&t, "Key").len(), 600);
    assert_eq!(field(&t, "IsTruncated").as_deref(), Some("false"));
}

#[tokio::test]
async fn multipart_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    let create = |key: &'static str| {
        let s = &s;
        async move {
            let a = s
                .call(
                    Method::POST,
                    &format!("/bkt/{key}?uploads"),
                    &[],
                    Bytes::new(),
                )
                .await;
            assert_eq!(a.status, 200, "{}", a.text());
            field(&a.text(), "UploadId").unwrap()
        }
    };
    let p1 = pattern(5 << 20, 1);
    let p2 = pattern(1000, 2);
    let up = create("mp").await;
    let a1 = s
        .put(&format!("/bkt/mp?partNumber=1&uploadId={up}"), p1.clone())
        .await;
    assert_eq!(a1.status, 200, "{}", a1.text());
    let e1 = a1.header("etag").unwrap();
    assert_eq!(e1, format!("\"{}\"", md5_hex(&p1)));
    let e2 = s
        .put(&format!("/bkt/mp?partNumber=2&uploadId={up}"), p2.clone())
        .await
        .header("etag")
        .unwrap();

    let l = s.get(&format!("/bkt/mp?uploadId={up}")).await;
    assert_eq!(fields(&l.text(), "PartNumber"), ["1", "2"]);
    let l = s.get("/bkt?uploads").await;
    assert_eq!(fields(&l.text(), "UploadId"), std::slice::from_ref(&up));

    let complete = |parts: &[(u32, &str)]| {
        let mut x = String::from("<CompleteMultipartUpload>");
        for (n, e) in parts {
            x += &format!("<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>");
        }
        x + "</CompleteMultipartUpload>"
    };
    let uri = format!("/bkt/mp?uploadId={up}");
    let a = s
        .call(Method::POST, &uri, &[], complete(&[(2, &e2), (1, &e1)]))
        .await;
    assert_err(&a, 400, "InvalidPartOrder");
    let a = s
        .call(
            Method::POST,
            &uri,
            &[],
            complete(&[(1, &e1), (2, "\"0000\"")]),
        )
        .await;
    assert_err(&a, 400, "InvalidPart");
    let a = s
        .call(Method::POST, &uri, &[], complete(&[(1, &e1), (3, &e2)]))
        .await;
    assert_err(&a, 400, "InvalidPart");
    let a = s
        .call(Method::POST, &uri, &[], complete(&[(1, &e1), (2, &e2)]))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let mut cat = Vec::new();
    for p in [&p1, &p2] {
        use s3s::crypto::Checksum as _;
        cat.extend_from_slice(&s3s::crypto::Md5::checksum(p));
    }
    let want = format!("{}-2", md5_hex(&cat));
    assert_eq!(
        field(&a.text(), "ETag").unwrap().replace("&quot;", "\""),
        format!("\"{want}\"")
    );
    let g = s.get("/bkt/mp").await;
    assert_eq!(g.header("etag"), Some(format!("\"{want}\"")));
    let mut whole = p1.clone();
    whole.extend_from_slice(&p2);
    assert!(g.body[..] == whole[..], "bytes differ");
    let g = s.get("/bkt/mp?partNumber=2").await;
    assert_eq!(g.status, 206);
    assert!(g.body[..] == p2[..]);
    assert_eq!(g.header("x-amz-mp-parts-count").as_deref(), Some("2"));
    let g = s.get("/bkt/mp?partNumber=3").await;
    assert_eq!(g.status, 416, "{}", g.text());
    // The upload is gone.
    assert_err(
        &s.call(Method::POST, &uri, &[], complete(&[(1, &e1)])).await,
        404,
        "NoSuchUpload",
    );
    assert_err(&s.get(&uri).await, 404, "NoSuchUpload");
    assert_err(
        &s.put(&format!("/bkt/mp?partNumber=1&uploadId={up}"), &b"x"[..])
            .await,
        404,
        "NoSuchUpload",
    );
    assert!(!dir.path().join("buckets/bkt/uploads").join(&up).exists());
    assert_err(
        &s.put("/bkt/mp?partNumber=1&uploadId=../../../x", &b"x"[..])
            .await,
        404,
        "NoSuchUpload",
    );

    // A small part before the last: EntityTooSmall; the upload stays.
    let up = create("small").await;
    let e1 = s
        .put(
            &format!("/bkt/small?partNumber=1&uploadId={up}"),
            &b"tiny"[..],
        )
        .await
        .header("etag")
        .unwrap();
    let e2 = s
        .put(
            &format!("/bkt/small?partNumber=2&uploadId={up}"),
            &b"last"[..],
        )
        .await
        .header("etag")
        .unwrap();
    let uri = format!("/bkt/small?uploadId={up}");
    let a = s
        .call(Method::POST, &uri, &[], complete(&[(1, &e1), (2, &e2)]))
        .await;
    assert_err(&a, 400, "EntityTooSmall");
    // One small part alone is fine (it is the last).
    let a = s.call(Method::POST, &uri, &[], complete(&[(1, &e1)])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(&s.get("/bkt/small").await.body[..], b"tiny");

    // Abort.
    let up = create("gone").await;
    s.put(&format!("/bkt/gone?partNumber=1&uploadId={up}"), &b"x"[..])
        .await;
    let uri = format!("/bkt/gone?uploadId={up}");
    assert_eq!(
        s.call(Method::DELETE, &uri, &[], Bytes::new()).await.status,
        204
    );
    assert_err(
        &s.call(Method::DELETE, &uri, &[], Bytes::new()).await,
        404,
        "NoSuchUpload",
    );
    assert_err(&s.get("/bkt/gone").await, 404, "NoSuchKey");
    assert!(fields(&s.get("/bkt?uploads").await.text(), "UploadId").is_empty());

    // UploadPartCopy.
    let up = create("copied").await;
    let a = s
        .call(
            Method::PUT,
            &format!("/bkt/copied?partNumber=1&uploadId={up}"),
            &[
                ("x-amz-copy-source", "/bkt/mp"),
                ("x-amz-copy-source-range", "bytes=10-5242889"),
            ],
            Bytes::new(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let e = field(&a.text(), "ETag").unwrap().replace("&quot;", "\"");
    let a = s
        .call(
            Method::POST,
            &format!("/bkt/copied?uploadId={up}"),
            &[],
            complete(&[(1, &e)]),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(s.get("/bkt/copied").await.body[..] == whole[10..5_242_890]);
}

#[tokio::test]
async fn copy_and_batch_delete() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    s.put("/dst", Bytes::new()).await;
    s.call(
        Method::PUT,
        "/bkt/src",
        &[("x-amz-meta-a", "1"), ("content-type", "text/x")],
        &b"payload"[..],
    )
    .await;
    let a = s
        .call(
            Method::PUT,
            "/dst/copy",
            &[("x-amz-copy-source", "/bkt/src")],
            Bytes::new(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        field(&a.text(), "ETag")
            .unwrap()
            .replace("&quot;", "")
            .trim_matches('"'),
        md5_hex(b"payload")
    );
    let g = s.get("/dst/copy").await;
    assert_eq!(&g.body[..], b"payload");
    assert_eq!(g.header("x-amz-meta-a").as_deref(), Some("1"));
    assert_eq!(g.header("content-type").as_deref(), Some("text/x"));
    let a = s
        .call(
            Method::PUT,
            "/dst/copy2",
            &[
                ("x-amz-copy-source", "/bkt/src"),
                ("x-amz-metadata-directive", "REPLACE"),
                ("x-amz-meta-b", "2"),
            ],
            Bytes::new(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let g = s.get("/dst/copy2").await;
    assert_eq!(g.header("x-amz-meta-a"), None);
    assert_eq!(g.header("x-amz-meta-b").as_deref(), Some("2"));
    let a = s
        .call(
            Method::PUT,
            "/bkt/src",
            &[("x-amz-copy-source", "/bkt/src")],
            Bytes::new(),
        )
        .await;
    assert_err(&a, 400, "InvalidRequest");
    let a = s
        .call(
            Method::PUT,
            "/dst/x",
            &[("x-amz-copy-source", "/bkt/missing")],
            Bytes::new(),
        )
        .await;
    assert_err(&a, 404, "NoSuchKey");
    let a = s
        .call(
            Method::PUT,
            "/dst/x",
            &[
                ("x-amz-copy-source", "/bkt/src"),
                ("x-amz-copy-source-if-match", "\"no\""),
            ],
            Bytes::new(),
        )
        .await;
    assert_err(&a, 412, "PreconditionFailed");

    let body = "<Delete><Object><Key>copy</Key></Object><Object><Key>copy2</Key></Object><Object><Key>never</Key></Object></Delete>";
    use base64::Engine as _;
    use s3s::crypto::Checksum as _;
    let md5 = base64::engine::general_purpose::STANDARD
        .encode(s3s::crypto::Md5::checksum(body.as_bytes()));
    let a = s
        .call(Method::POST, "/dst?delete", &[("content-md5", &md5)], body)
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(fields(&a.text(), "Key"), ["copy", "copy2", "never"]);
    assert!(fields(&s.get("/dst?list-type=2").await.text(), "Key").is_empty());
}

#[tokio::test]
async fn a_body_cut_off_leaves_the_old_object() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), true);
    s.put("/bkt", Bytes::new()).await;
    s.put("/bkt/k", &b"the old object"[..]).await;
    let chunks: Vec<Result<http_body::Frame<Bytes>, std::io::Error>> = vec![
        Ok(http_body::Frame::data(Bytes::from(vec![b'n'; 3 << 20]))),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "cut off",
        )),
    ];
    let body = http_body_util::StreamBody::new(futures::stream::iter(chunks));
    let req = Request::builder()
        .method(Method::PUT)
        .uri("/bkt/k")
        .header("content-length", 8 << 20)
        .body(s3s::Body::http_body(body))
        .unwrap();
    let a = s.send(req).await;
    assert!(!a.status.is_success(), "{}", a.status);
    assert_eq!(&s.get("/bkt/k").await.body[..], b"the old object");
    // A body shorter than its Content-Length is refused too.
    let chunks: Vec<Result<http_body::Frame<Bytes>, std::io::Error>> =
        vec![Ok(http_body::Frame::data(Bytes::from_static(b"short")))];
    let req = Request::builder()
        .method(Method::PUT)
        .uri("/bkt/k")
        .header("content-length", 100)
        .body(s3s::Body::http_body(http_body_util::StreamBody::new(
            futures::stream::iter(chunks),
        )))
        .unwrap();
    let a = s.send(req).await;
    assert!(!a.status.is_success(), "{}", a.status);
    assert_eq!(&s.get("/bkt/k").await.body[..], b"the old object");
    // No temporary file is left.
    assert_eq!(
        std::fs::read_dir(dir.path().join("buckets/bkt/tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn objects_survive_a_restart_and_leftovers_are_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(2 << 20, 9);
    let up;
    {
        let s = serve(dir.path(), true);
        s.put("/bkt", Bytes::new()).await;
        s.call(
            Method::PUT,
            "/bkt/../k",
            &[("x-amz-meta-x", "y")],
            data.clone(),
        )
        .await;
        s.put("/bkt/gone", &b"x"[..]).await;
        s.call(Method::DELETE, "/bkt/gone", &[], Bytes::new()).await;
        let a = s
            .call(Method::POST, "/bkt/mp?uploads", &[], Bytes::new())
            .await;
        up = field(&a.text(), "UploadId").unwrap();
        s.put(&format!("/bkt/mp?partNumber=1&uploadId={up}"), &b"part"[..])
            .await;
    }
    // Leftovers of writes cut short by a crash.
    let b = dir.path().join("buckets/bkt");
    std::fs::write(b.join("tmp/0123"), b"half a body").unwrap();
    let leaf = files(&b.join("objects"))[0].parent().unwrap().to_owned();
    let orphan = leaf.join(format!("{}.{}.data", "f".repeat(64), "0".repeat(32)));
    std::fs::write(&orphan, b"no record").unwrap();

    let s = serve(dir.path(), true);
    let g = s.get("/bkt/../k").await;
    assert!(g.body[..] == data[..], "bytes differ");
    assert_eq!(g.header("x-amz-meta-x").as_deref(), Some("y"));
    assert_eq!(
        fields(&s.get("/bkt?list-type=2").await.text(), "Key"),
        ["../k"]
    );
    assert_eq!(
        fields(&s.get("/bkt?uploads").await.text(), "UploadId"),
        std::slice::from_ref(&up)
    );
    assert_eq!(
        fields(
            &s.get(&format!("/bkt/mp?uploadId={up}")).await.text(),
            "PartNumber"
        ),
        ["1"]
    );
    assert!(!orphan.exists());
    assert_eq!(std::fs::read_dir(b.join("tmp")).unwrap().count(), 0);
}
