//! The embedded store (hipobj-store) behind the real gateway process:
//! a PUT whose body is cut off leaves the old object, objects survive a
//! restart on the same data directory, listings page with delimiter and
//! continuation, multipart objects get S3's ETag.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::SystemTime;

use hipobj_gateway::body::Body;
use hipobj_testkit::{assert_object, gateway_with, xml_field, ServerProc, AK, REGION, S3, SK};
use http::{Method, StatusCode};
use sha2::Digest;

fn gateway_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

fn start(data: Option<&Path>) -> ServerProc {
    let args: Vec<&str> = match data {
        Some(d) => vec!["--data-dir", d.to_str().unwrap()],
        None => vec![],
    };
    gateway_with(gateway_bin(), &args, &[])
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[1] ^ seed)
        .collect()
}

fn md5(data: &[u8]) -> [u8; 16] {
    use s3s::crypto::Checksum as _;
    s3s::crypto::Md5::checksum(data)
}

fn all(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let j = after.find(&close).unwrap();
        out.push(after[..j].to_owned());
        rest = &after[j..];
    }
    out
}

#[test]
fn a_put_cut_off_leaves_the_old_object() {
    let gw = start(None);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let old = pattern(100_000, 3);
    s3.put_plain("/bkt/obj", old.clone());
    // A signed PUT of 8 MiB of which 1 MiB is sent before the connection
    // is closed.
    let addr = gw.url.trim_start_matches("http://");
    let len = 8 << 20;
    let mut req = http::Request::builder()
        .method("PUT")
        .uri(format!("{}/bkt/obj", gw.url))
        .header("content-length", len)
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
    let mut head = "PUT /bkt/obj HTTP/1.1\r\n".to_string();
    if !req.headers().contains_key("host") {
        head += &format!("host: {addr}\r\n");
    }
    for (k, v) in req.headers() {
        head += &format!("{k}: {}\r\n", v.to_str().unwrap());
    }
    head += "\r\n";
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&vec![b'n'; 1 << 20]).unwrap();
    drop(s);
    // Whenever the store notices, the old object is what is there.
    assert_object(&s3, "/bkt/obj", &old);
    let a = s3.get_plain("/bkt?list-type=2");
    assert_eq!(all(&a.text(), "Key"), ["obj"]);
    assert_eq!(all(&a.text(), "Size"), ["100000"]);
}

#[test]
fn objects_survive_a_restart() {
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("store");
    let big = pattern(3 << 20, 5);
    let upload;
    {
        let gw = start(Some(&data));
        let s3 = S3::new(&gw.url);
        s3.create_bucket("keep");
        s3.put_plain("/keep/../odd/key", big.clone());
        let a = s3.send(
            Method::PUT,
            "/keep/meta",
            &[
                ("x-amz-meta-colour", "blue"),
                ("content-type", "text/x-test"),
            ],
            b"with metadata".to_vec(),
            false,
        );
        assert_eq!(a.status, 200, "{}", a.text());
        let a = s3.send(Method::POST, "/keep/mp?uploads", &[], Vec::new(), false);
        upload = xml_field(&a.body, "UploadId").unwrap();
        let a = s3.put_plain(
            &format!("/keep/mp?partNumber=1&uploadId={upload}"),
            b"part one".to_vec(),
        );
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let gw = start(Some(&data));
    let s3 = S3::new(&gw.url);
    assert_object(&s3, "/keep/../odd/key", &big);
    let a = s3.get_plain("/keep/meta");
    assert_eq!(&a.body[..], b"with metadata");
    assert_eq!(a.header("x-amz-meta-colour").as_deref(), Some("blue"));
    assert_eq!(a.header("content-type").as_deref(), Some("text/x-test"));
    let a = s3.get_plain("/keep?list-type=2");
    assert_eq!(all(&a.text(), "Key"), ["../odd/key", "meta"]);
    let a = s3.get_plain("/keep?uploads");
    assert_eq!(all(&a.text(), "UploadId"), std::slice::from_ref(&upload));
    let a = s3.get_plain(&format!("/keep/mp?uploadId={upload}"));
    assert_eq!(all(&a.text(), "PartNumber"), ["1"]);
}

#[test]
fn listings_page_with_delimiter_and_continuation() {
    let gw = start(None);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("list");
    let mut keys: Vec<String> = (0..23).map(|i| format!("top/{i:03}")).collect();
    keys.extend(["a/1", "a/2", "b/x/1", "c", "d+e f"].map(String::from));
    for k in &keys {
        let path = format!("/list/{}", k.replace('+', "%2B").replace(' ', "%20"));
        assert_eq!(s3.put_plain(&path, Vec::new()).status, 200, "{k}");
    }
    keys.sort();
    // v2, four at a time.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut q = "/list?list-type=2&max-keys=4".to_string();
        if let Some(t) = &token {
            q += &format!("&continuation-token={t}");
        }
        let a = s3.get_plain(&q);
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
        let t = a.text();
        let page = all(&t, "Key");
        assert!(page.len() <= 4);
        seen.extend(page);
        match xml_field(&a.body, "NextContinuationToken") {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(seen, keys);
    // v1 with delimiter, one at a time: prefixes and keys in order.
    let mut entries = Vec::new();
    let mut marker = String::new();
    loop {
        let a = s3.get_plain(&format!("/list?delimiter=/&max-keys=1&marker={marker}"));
        let t = a.text();
        entries.extend(all(&t, "Key"));
        entries.extend(all(&t, "Prefix").into_iter().filter(|p| !p.is_empty()));
        if xml_field(&a.body, "IsTruncated").as_deref() != Some("true") {
            break;
        }
        marker = xml_field(&a.body, "NextMarker")
            .unwrap()
            .replace('+', "%2B")
            .replace(' ', "%20");
    }
    assert_eq!(entries, ["a/", "b/", "c", "d+e f", "top/"]);
    // encoding-type=url is honoured.
    let a = s3.get_plain("/list?list-type=2&prefix=d&encoding-type=url");
    assert_eq!(all(&a.text(), "Key"), ["d%2Be%20f"]);
}

#[test]
fn multipart_objects_have_s3s_etag() {
    let gw = start(None);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("mpu");
    let a = s3.send(Method::POST, "/mpu/obj?uploads", &[], Vec::new(), false);
    let upload = xml_field(&a.body, "UploadId").unwrap();
    let parts = [pattern(5 << 20, 1), pattern(5 << 20, 2), pattern(777, 3)];
    let mut xml = String::from("<CompleteMultipartUpload>");
    for (i, p) in parts.iter().enumerate() {
        let n = i + 1;
        let a = s3.put_plain(
            &format!("/mpu/obj?partNumber={n}&uploadId={upload}"),
            p.clone(),
        );
        assert_eq!(a.status, 200, "{}", a.text());
        let etag = a.header("etag").unwrap();
        assert_eq!(etag, format!("\"{}\"", hex::encode(md5(p))));
        xml += &format!("<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>");
    }
    xml += "</CompleteMultipartUpload>";
    let a = s3.send(
        Method::POST,
        &format!("/mpu/obj?uploadId={upload}"),
        &[],
        xml.into_bytes(),
        false,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    let mut cat = Vec::new();
    for p in &parts {
        cat.extend_from_slice(&md5(p));
    }
    let want = format!("\"{}-3\"", hex::encode(md5(&cat)));
    let a = s3.send(Method::HEAD, "/mpu/obj", &[], Vec::new(), false);
    assert_eq!(a.header("etag"), Some(want));
    assert_eq!(
        a.header("content-length"),
        Some(((10 << 20) + 777).to_string())
    );
    let whole: Vec<u8> = parts.concat();
    assert_object(&s3, "/mpu/obj", &whole);
    let a = s3.get_plain("/mpu/obj");
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&a.body)),
        hex::encode(sha2::Sha256::digest(&whole))
    );
}
