//! A C program moves objects by RDMA to and from the real test server,
//! through `hipobj.h` only.
//!
//! `tests/c/rdma_client.c` is compiled with gcc (strict flags) against
//! `client/include/hipobj.h` and `libhipobj.so`, and run with the software
//! RDMA provider. A C program has no S3 SDK to sign requests with, so this
//! test plays the application's S3 client: a relay thread on 127.0.0.1
//! takes `METHOD PATH TOKEN` lines from the program's callbacks, sends each
//! as a SigV4-signed request (UNSIGNED-PAYLOAD, no body, the token among
//! the signed headers) to the test server, and answers the response's
//! `x-amz-rdma-reply` value, or `NONE`, as one line. Setup and the checks
//! of what was stored use plain signed HTTP.
//!
//! The binary is left in `<target>/c-tests/rdma_client`; with
//! `HIPOBJ_C_TESTS_VALGRIND=1` (as `.ci/run` sets for a second run) it runs
//! under valgrind (`hipobj::testing::c_programs`).

#![forbid(unsafe_code)]

mod c_relay;
mod common;

use c_relay::{build_program, run_program, Relay};
use common::{pattern, xml_field, Server, S3};
use http::Method;
use std::sync::Mutex;

/// Object sizes: a byte, a page, and past one 8 MiB staging buffer.
const SIZES: [usize; 3] = [1, 4096, (8 << 20) + 1];
/// The program PUTs `pattern(PUT_SEED_BASE + size)` (as in rdma_client.c).
const PUT_SEED_BASE: u64 = 1 << 32;
/// `/bkt/seed-<size>` holds `pattern(SEEDED_SEED_BASE + size)`.
const SEEDED_SEED_BASE: u64 = 2 << 32;

// ---- The relay ---------------------------------------------------------

/// One request the relay made.
#[derive(Debug, Clone)]
struct Exchange {
    method: String,
    path: String,
    status: u16,
    reply: Option<String>,
    etag: Option<String>,
}

/// Relays one `METHOD PATH TOKEN` line; answers the reply or `NONE`.
fn relay_line(s3: &S3, fields: &[&str], log: &Mutex<Vec<Exchange>>) -> String {
    match fields {
        [method, path, token] if path.starts_with('/') => {
            let method = Method::from_bytes(method.as_bytes()).expect("a method");
            let a = s3.send(
                method.clone(),
                path,
                &[(hipobj_wire::headers::RDMA_TOKEN, token)],
                Vec::new(),
                true,
            );
            let reply = a.reply();
            log.lock().unwrap().push(Exchange {
                method: method.to_string(),
                path: path.to_string(),
                status: a.status.as_u16(),
                reply: reply.clone(),
                etag: a.header("etag"),
            });
            reply.unwrap_or_else(|| "NONE".to_string())
        }
        _ => {
            eprintln!("relay: a malformed line {fields:?}");
            "NONE".to_string()
        }
    }
}

// ---- The test ----------------------------------------------------------

/// CreateMultipartUpload of `path`; its upload id.
fn create_upload(s3: &S3, path: &str) -> String {
    let a = s3.send(
        Method::POST,
        &format!("{path}?uploads"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(a.status, 200, "create the upload of {path}: {}", a.text());
    let id = xml_field(&a.body, "UploadId").expect("an UploadId");
    assert!(
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
        "an upload id that needs no escaping in a query: {id:?}"
    );
    id
}

/// CompleteMultipartUpload of `path` with its one part.
fn complete_upload(s3: &S3, path: &str, upload_id: &str, etag: &str) {
    let body = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>\
         </CompleteMultipartUpload>"
    );
    let a = s3.send(
        Method::POST,
        &format!("{path}?uploadId={upload_id}"),
        &[],
        body.into_bytes(),
        false,
    );
    assert_eq!(a.status, 200, "complete the upload of {path}: {}", a.text());
}

/// Asserts that a plain GET of `path` answers exactly `data`.
#[track_caller]
fn assert_stored(s3: &S3, path: &str, data: &[u8]) {
    let a = s3.get_plain(path);
    assert_eq!(a.status, 200, "GET {path}: {}", a.text());
    assert_eq!(a.body.len(), data.len(), "GET {path}: length");
    if let Some(i) = a.body.iter().zip(data).position(|(x, y)| x != y) {
        panic!(
            "GET {path}: byte {i} is {:#04x}, expected {:#04x}",
            a.body[i], data[i]
        );
    }
}

#[test]
fn c_program_moves_objects_by_rdma_through_the_test_server() {
    let exe = build_program("rdma_client");
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");

    let mut args = Vec::new();
    let mut uploads = Vec::new();
    for size in SIZES {
        let seeded = s3.put_plain(
            &format!("/bkt/seed-{size}"),
            pattern(SEEDED_SEED_BASE + size as u64, size),
        );
        assert_eq!(seeded.status, 200, "seed {size}: {}", seeded.text());
        let mp = format!("/bkt/c-mp-{size}");
        let id = create_upload(&s3, &mp);
        args.push(format!("{size}:{id}"));
        uploads.push((size, mp, id));
    }

    let relay = Relay::start(&server.url, relay_line);
    let mut argv = vec![relay.port.to_string()];
    argv.extend(args);
    let outcome = run_program(&exe, &argv);
    let log = relay.finish();
    let trace: String = log
        .iter()
        .map(|e| format!("  {} {} -> {} {:?}\n", e.method, e.path, e.status, e.reply))
        .collect();
    outcome.assert_ok("rdma_client", &trace);

    // Every relayed request succeeded with an RDMA reply.
    for e in &log {
        assert_eq!(e.status, 200, "{} {}:\n{trace}", e.method, e.path);
        assert!(
            e.reply.is_some(),
            "{} {}: no reply\n{trace}",
            e.method,
            e.path
        );
    }
    // The application-driven handshakes, one per size.
    let heads = log.iter().filter(|e| e.method == "HEAD").count();
    assert_eq!(heads, SIZES.len(), "HEADs:\n{trace}");

    // What the program stored, read back over plain HTTP.
    for (size, mp, id) in uploads {
        let put = pattern(PUT_SEED_BASE + size as u64, size);
        let seeded = pattern(SEEDED_SEED_BASE + size as u64, size);
        assert_stored(&s3, &format!("/bkt/c-obj-{size}"), &put);
        assert_stored(&s3, &format!("/bkt/c-driven-{size}"), &seeded);

        let part = log
            .iter()
            .rfind(|e| e.method == "PUT" && e.path.contains(&format!("uploadId={id}")))
            .unwrap_or_else(|| panic!("no part PUT for {mp}:\n{trace}"));
        let etag = part.etag.as_deref().expect("the part's ETag");
        complete_upload(&s3, &mp, &id, etag);
        assert_stored(&s3, &mp, &put);
    }
}
