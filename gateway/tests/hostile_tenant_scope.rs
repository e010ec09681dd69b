//! Tenants apart, played against the real gateway binary (embedded store,
//! software provider): tenant B, signing only with its own keys, tries
//! every way to reach tenant A's bucket that the attack run found open
//! (listing, reading, overwriting, deleting, copying, joining A's multipart
//! upload, RDMA GET and PUT, a presigned URL, an encoded or dotted path, a
//! store's IAM API), and each is refused with 403 AccessDenied before the
//! store sees it; A's data is intact afterwards. SIGHUP reloads the
//! credentials file without touching an upload in flight.

use crate::s3_edges::{path_and_query, presign_as};

use hipobj::Direction;
use hipobj_gateway::body::Body;
use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::{client, pattern};
use hipobj_testkit::s3::{assert_absent, assert_error, assert_object, xml_field, Answer, S3};
use hipobj_testkit::CredentialsFile;
use hipobj_wire::headers::RDMA_TOKEN;
use http::Method;
use std::time::{Duration, Instant, SystemTime};

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

/// A: `alpha` and every bucket starting `alpha-`; B: `beta`.
fn scoped_tenants() -> CredentialsFile {
    CredentialsFile::with_text(
        "# two tenants apart\n\
         tenant-a secret-of-a buckets=alpha,alpha-*\n\
         tenant-b secret-of-b buckets=beta\n",
    )
}

#[track_caller]
fn denied(a: &Answer, what: &str) {
    assert_error(a, 403, "AccessDenied", None, what);
}

fn names(listing: &Answer) -> Vec<String> {
    let s = listing.text();
    s.split("<Name>")
        .skip(1)
        .map(|p| p.split('<').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_tenant_reaches_only_its_own_buckets_over_http() {
    let creds = scoped_tenants();
    let gw = gateway_with(bin(), &["--credentials-file", creds.arg()], &[]);
    let a = S3::with_keys(&gw.url, "tenant-a", "secret-of-a");
    let b = S3::with_keys(&gw.url, "tenant-b", "secret-of-b");
    // The flags' key is unrestricted (no policy fields).
    let admin = S3::new(&gw.url);
    a.create_bucket("alpha");
    b.create_bucket("beta");
    admin.create_bucket("gamma");
    let secret = pattern(7, 10_000);
    assert!(a.put_plain("/alpha/k", secret.clone()).status.is_success());
    assert!(b
        .put_plain("/beta/own", b"b's".to_vec())
        .status
        .is_success());

    // ListBuckets: each tenant sees its own; the unrestricted key all.
    let l = b.get_plain("/");
    assert_eq!(l.status, 200, "{}", l.text());
    assert_eq!(names(&l), ["beta"], "{}", l.text());
    assert_eq!(names(&a.get_plain("/")), ["alpha"]);
    let mut all = names(&admin.get_plain("/"));
    all.sort();
    assert_eq!(all, ["alpha", "beta", "gamma"]);

    // B against A's bucket, by every operation.
    denied(&b.get_plain("/alpha/k"), "GetObject");
    let h = b.send(Method::HEAD, "/alpha/k", &[], Vec::new(), false);
    assert_eq!(h.status, 403, "HeadObject");
    denied(&b.get_plain("/alpha?list-type=2"), "ListObjectsV2");
    denied(&b.get_plain("/alpha"), "ListObjects");
    denied(
        &b.put_plain("/alpha/k", b"overwritten".to_vec()),
        "PutObject",
    );
    denied(
        &b.put_plain("/alpha/new", b"planted".to_vec()),
        "PutObject, new",
    );
    denied(
        &b.send(Method::DELETE, "/alpha/k", &[], Vec::new(), false),
        "DeleteObject",
    );
    denied(
        &b.send(Method::DELETE, "/alpha", &[], Vec::new(), false),
        "DeleteBucket",
    );
    denied(
        &b.put_plain("/alpha-x", Vec::new()),
        "CreateBucket in A's prefix",
    );
    denied(
        &b.put_plain("/gamma/x", b"x".to_vec()),
        "a bucket of nobody's scope",
    );
    let delete = b"<Delete><Object><Key>k</Key></Object></Delete>".to_vec();
    denied(
        &b.send(Method::POST, "/alpha?delete", &[], delete, false),
        "DeleteObjects",
    );
    // Copies out of A's bucket into B's.
    denied(
        &b.send(
            Method::PUT,
            "/beta/stolen",
            &[("x-amz-copy-source", "/alpha/k")],
            Vec::new(),
            false,
        ),
        "CopyObject from A's bucket",
    );
    denied(
        &b.send(
            Method::PUT,
            "/beta/stolen",
            &[("x-amz-copy-source", "%61lpha/k")],
            Vec::new(),
            false,
        ),
        "CopyObject, the source's bucket encoded",
    );
    // Paths that a store would read as A's bucket.
    denied(&b.get_plain("/%61lpha/k"), "an encoded bucket name");
    denied(&b.get_plain("/beta/../alpha/k"), "a dot segment");
    denied(
        &b.get_plain("/beta/%2E%2E/alpha/k"),
        "an encoded dot segment",
    );
    // The store's own service-level APIs (RGW's IAM, STS).
    denied(
        &b.send(
            Method::POST,
            "/?Action=CreateUser&UserName=x",
            &[],
            Vec::new(),
            false,
        ),
        "a service-level Action",
    );

    // A's multipart upload: B may neither add a part nor finish nor abort it.
    let up = a.send(Method::POST, "/alpha/mp?uploads", &[], Vec::new(), false);
    assert_eq!(up.status, 200, "{}", up.text());
    let id = xml_field(&up.body, "UploadId").unwrap();
    let part = pattern(3, 5 << 20);
    // (A small body: a refusal is answered before the body is read, and
    // the connection then closed.)
    denied(
        &b.send(
            Method::PUT,
            &format!("/alpha/mp?partNumber=1&uploadId={id}"),
            &[],
            part[..1024].to_vec(),
            false,
        ),
        "UploadPart into A's upload",
    );
    let complete = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>";
    denied(
        &b.send(
            Method::POST,
            &format!("/alpha/mp?uploadId={id}"),
            &[],
            complete.as_bytes().to_vec(),
            false,
        ),
        "CompleteMultipartUpload of A's upload",
    );
    denied(
        &b.send(
            Method::DELETE,
            &format!("/alpha/mp?uploadId={id}"),
            &[],
            Vec::new(),
            false,
        ),
        "AbortMultipartUpload of A's upload",
    );
    // B's own upload may not copy a part out of A's bucket.
    let own = b.send(Method::POST, "/beta/mp?uploads", &[], Vec::new(), false);
    let own_id = xml_field(&own.body, "UploadId").unwrap();
    denied(
        &b.send(
            Method::PUT,
            &format!("/beta/mp?partNumber=1&uploadId={own_id}"),
            &[("x-amz-copy-source", "alpha/k")],
            Vec::new(),
            false,
        ),
        "UploadPartCopy from A's bucket",
    );

    // A presigned URL that B made for A's object.
    let url = presign_as(
        &format!("{}/alpha/k", gw.url),
        SystemTime::now(),
        Duration::from_secs(300),
        "tenant-b",
        "secret-of-b",
    );
    denied(&b.get_unsigned(&path_and_query(&url)), "B's presigned URL");
    // ... while A's own presigned URL works.
    let url = presign_as(
        &format!("{}/alpha/k", gw.url),
        SystemTime::now(),
        Duration::from_secs(300),
        "tenant-a",
        "secret-of-a",
    );
    let got = a.get_unsigned(&path_and_query(&url));
    assert_eq!(got.status, 200, "{}", got.text());
    assert!(got.body[..] == secret[..]);

    // A's data is as A left it, and A's upload goes on.
    assert_object(&a, "/alpha/k", &secret);
    assert_absent(&a, "/alpha/new");
    assert_absent(&b, "/beta/stolen");
    let p = a.send(
        Method::PUT,
        &format!("/alpha/mp?partNumber=1&uploadId={id}"),
        &[],
        part.clone(),
        false,
    );
    assert_eq!(p.status, 200, "{}", p.text());
    let etag = p.header("etag").unwrap();
    let complete = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part></CompleteMultipartUpload>"
    );
    let done = a.send(
        Method::POST,
        &format!("/alpha/mp?uploadId={id}"),
        &[],
        complete.into_bytes(),
        false,
    );
    assert_eq!(done.status, 200, "{}", done.text());
    assert_object(&a, "/alpha/mp", &part);
    // A's prefix grant covers buckets A creates under it.
    a.create_bucket("alpha-2");
    assert!(a.put_plain("/alpha-2/k", b"x".to_vec()).status.is_success());
}

#[test]
fn a_tenant_cannot_move_another_tenants_objects_by_rdma() {
    let creds = scoped_tenants();
    let gw = gateway_with(
        bin(),
        &["--credentials-file", creds.arg(), "--chunk-mib", "1"],
        &[],
    );
    let a = S3::with_keys(&gw.url, "tenant-a", "secret-of-a");
    let b = S3::with_keys(&gw.url, "tenant-b", "secret-of-b");
    a.create_bucket("alpha");
    b.create_bucket("beta");
    let obj = pattern(0xA, (2 << 20) + 3);
    assert!(a.put_plain("/alpha/k", obj.clone()).status.is_success());
    let mine = pattern(0xB, 4096);
    assert!(b.put_plain("/beta/k", mine.clone()).status.is_success());

    let lib = client();
    let token = lib.handshake_token().unwrap();
    // A handshake on A's object is refused like any request on it.
    let hs = b.send(
        Method::HEAD,
        "/alpha/k",
        &[(RDMA_TOKEN, &token)],
        Vec::new(),
        true,
    );
    assert_eq!(hs.status, 403, "B's handshake on A's object");
    assert_eq!(hs.reply().as_deref(), Some("403"));
    // On its own bucket it goes through, and B's own transfers work.
    let hs = b.send(
        Method::HEAD,
        "/beta/k",
        &[(RDMA_TOKEN, &token)],
        Vec::new(),
        true,
    );
    assert_eq!(hs.status, 200, "{}", hs.text());
    lib.complete_handshake(&hs.reply().unwrap()).unwrap();

    let mut back = vec![0u8; obj.len()];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let own = buf.token(Direction::Get, 0, mine.len()).unwrap();
        let r = b.send(
            Method::GET,
            "/beta/k",
            &[(RDMA_TOKEN, &own)],
            Vec::new(),
            true,
        );
        assert_eq!(r.status, 200, "B's own RDMA GET: {}", r.text());

        // RDMA GET of A's object into B's buffer.
        let t = buf.token(Direction::Get, 0, obj.len()).unwrap();
        let r = b.send(
            Method::GET,
            "/alpha/k",
            &[(RDMA_TOKEN, &t)],
            Vec::new(),
            true,
        );
        assert_error(
            &r,
            403,
            "AccessDenied",
            Some("403"),
            "B's RDMA GET of A's object",
        );
        // RDMA PUT from B's buffer over A's object, and as a new one.
        for path in ["/alpha/k", "/alpha/planted"] {
            let t = buf.token(Direction::Put, 0, 4096).unwrap();
            let r = b.send(Method::PUT, path, &[(RDMA_TOKEN, &t)], Vec::new(), true);
            assert_error(
                &r,
                403,
                "AccessDenied",
                Some("403"),
                "B's RDMA PUT into A's bucket",
            );
        }
    }
    // Only B's own object reached the buffer; nothing of A's.
    assert!(back[..mine.len()] == mine[..]);
    assert!(back[mine.len()..].iter().all(|&x| x == 0));
    assert_object(&a, "/alpha/k", &obj);
    assert_absent(&a, "/alpha/planted");
}

/// The gateway in front of a second gateway as its store, the second one
/// with tenants of its own: a tenant whose line says `upstream=` reaches
/// the store as that identity (and the store's own scope applies), one
/// without it as the first gateway's store key.
#[test]
fn upstream_credentials_are_the_tenants_identity_at_the_store() {
    let store_creds = CredentialsFile::with_text(
        "store-narrow narrow-secret buckets=narrow\n\
         store-wide wide-secret\n",
    );
    let store = gateway_with(bin(), &["--credentials-file", store_creds.arg()], &[]);
    let at_store = S3::with_keys(&store.url, "store-wide", "wide-secret");
    at_store.create_bucket("narrow");
    at_store.create_bucket("wide");

    let front_creds = CredentialsFile::with_text(
        "t-narrow t-narrow-secret upstream=store-narrow:narrow-secret\n\
         t-default t-default-secret\n",
    );
    let front = gateway_with(
        bin(),
        &[
            "--credentials-file",
            front_creds.arg(),
            "--upstream",
            &store.url,
            "--upstream-access-key",
            "store-wide",
            "--upstream-secret-key",
            "wide-secret",
        ],
        &[],
    );
    let narrow = S3::with_keys(&front.url, "t-narrow", "t-narrow-secret");
    let default = S3::with_keys(&front.url, "t-default", "t-default-secret");
    assert!(narrow
        .put_plain("/narrow/k", b"n".to_vec())
        .status
        .is_success());
    // The front lets it through (no buckets= here); the store refuses its
    // identity outside its scope.
    let r = narrow.put_plain("/wide/k", b"n".to_vec());
    assert_error(
        &r,
        403,
        "AccessDenied",
        None,
        "t-narrow at the store, outside its scope",
    );
    assert_eq!(names(&narrow.get_plain("/")), ["narrow"]);
    // The tenant without upstream= is the front's store key: everything.
    assert!(default
        .put_plain("/wide/k", b"d".to_vec())
        .status
        .is_success());
    assert_object(&at_store, "/wide/k", b"d");
    assert_object(&at_store, "/narrow/k", b"n");
}

#[test]
fn upstream_credentials_in_front_of_the_embedded_store_are_refused_at_start() {
    let creds = CredentialsFile::with_text("t s upstream=AK:SK\n");
    let e =
        hipobj_testkit::process::try_gateway_with(bin(), &["--credentials-file", creds.arg()], &[])
            .expect_err("the gateway started");
    let shown = e.to_string();
    assert!(
        shown.contains("names store credentials (upstream=)"),
        "{shown}"
    );
    assert!(!shown.contains("SK\n") && !shown.contains(":SK"), "{shown}");
}

/// Counts the reload lines in the gateway's log, waiting (up to 10 s)
/// until there are `n` of `line`.
fn wait_log(gw: &hipobj_testkit::ServerProc, line: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = gw.log();
        if log.matches(line).count() >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {n}x {line:?} in the log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hup(pid: u32) {
    let st = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn sighup_reloads_the_credentials_and_spares_uploads_in_flight() {
    use std::os::unix::fs::PermissionsExt as _;
    let creds = CredentialsFile::with_text("tenant-a secret-of-a buckets=alpha\n");
    let path = creds.path().to_path_buf();
    let mut gw = gateway_with(
        bin(),
        &["--credentials-file", creds.arg()],
        &[("RUST_LOG", "info")],
    );
    let a = S3::with_keys(&gw.url, "tenant-a", "secret-of-a");
    let c = S3::with_keys(&gw.url, "tenant-c", "secret-of-c");
    a.create_bucket("alpha");
    assert_error(
        &c.get_plain("/alpha/x"),
        403,
        "InvalidAccessKeyId",
        None,
        "c before the reload",
    );

    // A's upload, its body sent in two halves with the reload between.
    let data = pattern(5, 2 << 20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|c| (c, rx))
    }));
    let mut req = http::Request::builder()
        .method(Method::PUT)
        .uri(format!("{}/alpha/slow", gw.url))
        .header("content-length", data.len())
        .body(body)
        .unwrap();
    hipobj_gateway::upstream::sign_request(
        &mut req,
        "tenant-a",
        "secret-of-a",
        hipobj_testkit::REGION,
        "UNSIGNED-PAYLOAD",
        SystemTime::now(),
    )
    .unwrap();
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let upload = rt.spawn(async move {
        use http_body_util::BodyExt as _;
        let resp = client.request(req).await.expect("the upload's answer");
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    });
    let half = data.len() / 2;
    rt.block_on(tx.send(Ok(bytes::Bytes::copy_from_slice(&data[..half]))))
        .unwrap();
    // The upload is being served (its head verified under A's key) before
    // the reload: in flight beside the scrape that counts itself.
    a.wait_metric("hipobj_http_requests_in_flight", &[], |v| v >= 2.0);

    // A leaves the file, C comes in; SIGHUP.
    std::fs::write(&path, "tenant-c secret-of-c buckets=alpha\n").unwrap();
    hup(gw.pid());
    wait_log(&gw, "SIGHUP: credentials reloaded", 1);
    assert!(gw.alive(), "SIGHUP killed the gateway");

    // The upload that started under A's key finishes.
    if rt
        .block_on(tx.send(Ok(bytes::Bytes::copy_from_slice(&data[half..]))))
        .is_err()
    {
        let (status, body) = rt.block_on(upload).unwrap();
        panic!(
            "the upload was answered before its body ended: {status} {}\n{}",
            String::from_utf8_lossy(&body),
            gw.log()
        );
    }
    drop(tx);
    let (status, body) = rt.block_on(upload).unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // The new set: c in, a out.
    assert_absent(&c, "/alpha/none");
    assert_error(
        &a.get_plain("/alpha/x"),
        403,
        "InvalidAccessKeyId",
        None,
        "a after the reload",
    );
    assert_object(&c, "/alpha/slow", &data);

    // A file that cannot be used keeps the keys in force.
    std::fs::write(&path, "a-line-with-one-field\n").unwrap();
    hup(gw.pid());
    wait_log(&gw, "SIGHUP: credentials not reloaded", 1);
    std::fs::write(&path, "tenant-d secret-of-d\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    hup(gw.pid());
    wait_log(&gw, "SIGHUP: credentials not reloaded", 2);
    assert!(gw.alive());
    assert_object(&c, "/alpha/slow", &data);
    let d = S3::with_keys(&gw.url, "tenant-d", "secret-of-d");
    assert_error(
        &d.get_plain("/alpha/slow"),
        403,
        "InvalidAccessKeyId",
        None,
        "d from a world-writable file",
    );
    // No secret in the log.
    let log = gw.log();
    for s in ["secret-of-a", "secret-of-c", "secret-of-d"] {
        assert!(!log.contains(s), "{s} in the log");
    }
}
