//! The attack on the embedded store, played against the real gateway
//! process (embedded store in a data directory of the test's own): keys
//! with `../` (raw, `%2F`-escaped, `%2E`-escaped) must stay keys of the
//! bucket they were sent to. Bucket b's object stays untouched, the key
//! is stored and listed under bucket a exactly as sent, GET returns it,
//! DELETE removes only it, and nothing is written outside the store's
//! root. Also odd keys: any UTF-8, 1024 bytes, `./`, `//`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hipobj_gateway::body::Body;
use hipobj_testkit::{assert_error, gateway_with, xml_field, ServerProc, AK, REGION, S3, SK};
use http::StatusCode;

fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

/// The gateway with its embedded store in `data`.
fn start(data: &Path) -> ServerProc {
    gateway_with(gateway_bin(), &["--data-dir", data.to_str().unwrap()], &[])
}

/// A signed request sent as raw bytes on its own connection, the request
/// line exactly `method path` (no client library in between to normalize
/// it); the status and body of the answer.
fn raw(url: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let addr = url.trim_start_matches("http://");
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{url}{path}"))
        .header("content-length", body.len())
        .body(Body::empty())
        .unwrap();
    hipobj_gateway::upstream::sign_request(
        &mut req,
        AK,
        SK,
        REGION,
        "UNSIGNED-PAYLOAD",
        SystemTime::now(),
    )
    .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    if !req.headers().contains_key("host") {
        head += &format!("host: {addr}\r\n");
    }
    for (k, v) in req.headers() {
        head += &format!("{k}: {}\r\n", v.to_str().unwrap());
    }
    head += "\r\n";
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
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

fn keys(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<Key>") {
        let after = &rest[i + 5..];
        let j = after.find("</Key>").unwrap();
        out.push(
            after[..j]
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        );
        rest = &after[j..];
    }
    out
}

/// `k` escaped for a path: every byte but unreserved ones and `/`.
fn esc(k: &str) -> String {
    percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
        .to_string()
        .replace("%2F", "/")
        .replace("%2E", ".")
        .replace("%2D", "-")
        .replace("%5F", "_")
}

#[test]
fn dot_dot_keys_stay_in_their_bucket() {
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("store");
    let gw = start(&data);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bucket-a");
    s3.create_bucket("bucket-b");
    let secret = b"bucket b's secret".to_vec();
    assert_eq!(
        s3.put_plain("/bucket-b/secret.txt", secret.clone()).status,
        200
    );

    // (request path, the key it names in bucket-a)
    let attacks = [
        ("/bucket-a/../bucket-b/secret.txt", "../bucket-b/secret.txt"),
        (
            "/bucket-a/..%2Fbucket-b%2Fsecret.txt",
            "../bucket-b/secret.txt",
        ),
        (
            "/bucket-a/..%2F..%2Fbucket-b/secret.txt",
            "../../bucket-b/secret.txt",
        ),
        (
            "/bucket-a/%2E%2E/%2E%2E/bucket-b/secret.txt",
            "../../bucket-b/secret.txt",
        ),
        (
            "/bucket-a/../../hipobj-store.json",
            "../../hipobj-store.json",
        ),
        (
            "/bucket-a/../../buckets/bucket-b/bucket.json",
            "../../buckets/bucket-b/bucket.json",
        ),
        (
            "/bucket-a/../../../../../../../../tmp/escaped",
            "../../../../../../../../tmp/escaped",
        ),
    ];
    for (i, (path, key)) in attacks.iter().enumerate() {
        let value = format!("attack {i}: {key}");
        let (status, body) = raw(&gw.url, "PUT", path, value.as_bytes());
        assert_eq!(status, 200, "PUT {path}: {body}");
        // Bucket b's object is untouched.
        let a = s3.get_plain("/bucket-b/secret.txt");
        assert_eq!(a.status, StatusCode::OK, "{path}");
        assert!(
            a.body[..] == secret[..],
            "{path} overwrote bucket b's object"
        );
        // The key reads back under bucket a, by the raw path and escaped.
        let (status, body) = raw(&gw.url, "GET", path, b"");
        assert_eq!((status, body.as_str()), (200, value.as_str()), "GET {path}");
        let a = s3.get_plain(&format!("/bucket-a/{}", esc(key)));
        assert_eq!(a.text(), value, "GET {key}");
    }

    // Listed under bucket a exactly as sent; bucket b has its one object.
    let mut want: Vec<String> = attacks.iter().map(|(_, k)| k.to_string()).collect();
    want.sort();
    want.dedup();
    let a = s3.get_plain("/bucket-a?list-type=2");
    assert_eq!(keys(&a.text()), want, "{}", a.text());
    let a = s3.get_plain("/bucket-b?list-type=2");
    assert_eq!(keys(&a.text()), ["secret.txt"], "{}", a.text());
    // The store's own records are intact: it lists both buckets.
    let a = s3.get_plain("/");
    assert!(a.text().contains("<Name>bucket-a</Name>"), "{}", a.text());
    assert!(a.text().contains("<Name>bucket-b</Name>"), "{}", a.text());

    // Nothing was written outside the store's own directories.
    assert_eq!(
        std::fs::read_dir(top.path()).unwrap().count(),
        1,
        "files beside the store"
    );
    for f in files(&data) {
        let rel = f.strip_prefix(&data).unwrap();
        let ok = rel == Path::new("hipobj-store.json")
            || rel.starts_with("buckets/bucket-a/objects")
            || rel.starts_with("buckets/bucket-b/objects")
            || rel == Path::new("buckets/bucket-a/bucket.json")
            || rel == Path::new("buckets/bucket-b/bucket.json");
        assert!(ok, "unexpected file {}", f.display());
    }
    // Bucket b holds its record and one object (record and data file).
    assert_eq!(files(&data.join("buckets/bucket-b")).len(), 3);

    // DELETE removes only the key in bucket a.
    for (path, key) in attacks {
        let (status, body) = raw(&gw.url, "DELETE", path, b"");
        assert_eq!(status, 204, "DELETE {path}: {body}");
        let a = s3.get_plain(&format!("/bucket-a/{}", esc(key)));
        assert_error(&a, 404, "NoSuchKey", None, key);
        let a = s3.get_plain("/bucket-b/secret.txt");
        assert!(a.body[..] == secret[..], "DELETE {path} touched bucket b");
    }
    assert!(keys(&s3.get_plain("/bucket-a?list-type=2").text()).is_empty());
}

#[test]
fn odd_keys_round_trip_exactly() {
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("store");
    let gw = start(&data);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("odd");
    let long = "\u{e9}".repeat(512); // 1024 bytes of UTF-8
    let odd = [
        "./dot",
        "a//b",
        "//lead",
        "trail/",
        "./",
        "\u{e9}t\u{e9} \u{1F600} \u{202E}rtl",
        "tab\tand\u{7f}del",
        "100%25 literal %41",
        "a+b c&d<e>'f\"",
        "\u{fffd}\u{10ffff}",
        long.as_str(),
    ];
    for k in odd {
        let path = format!("/odd/{}", esc(k));
        let a = s3.put_plain(&path, k.as_bytes().to_vec());
        assert_eq!(a.status, 200, "PUT {k:?}: {}", a.text());
        let a = s3.get_plain(&path);
        assert_eq!(a.status, 200, "GET {k:?}: {}", a.text());
        assert_eq!(&a.body[..], k.as_bytes(), "GET {k:?}");
    }
    let mut want: Vec<String> = odd.iter().map(|k| k.to_string()).collect();
    want.sort();
    let a = s3.get_plain("/odd?list-type=2");
    assert_eq!(keys(&a.text()), want, "{}", a.text());
    // encoding-type=url encodes them; decoded they are the keys.
    let a = s3.get_plain("/odd?list-type=2&encoding-type=url");
    let decoded: Vec<String> = keys(&a.text())
        .iter()
        .map(|k| {
            percent_encoding::percent_decode_str(k)
                .decode_utf8()
                .unwrap()
                .into_owned()
        })
        .collect();
    assert_eq!(decoded, want);
    assert_eq!(xml_field(&a.body, "EncodingType").as_deref(), Some("url"));
    // 1025 bytes is too long.
    let a = s3.put_plain(&format!("/odd/{}x", esc(&long)), b"x".to_vec());
    assert_error(&a, 400, "KeyTooLongError", None, "1025-byte key");
    // No file is named after a key.
    for f in files(&data) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains("dot") && !name.contains("lead"), "{name}");
    }
}
