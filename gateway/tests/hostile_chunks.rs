//! The safety issue's finding 5, played against the real gateway: signed
//! aws-chunked uploads that declare a 16 MiB chunk and then stall make the
//! gateway hold room for the chunk until its signature can be checked.
//! The room comes out of a process-wide budget with a share per access
//! key: a chunk past either is answered 503 SlowDown before anything of it
//! is buffered, and a stalled upload that goes away gives its share back.

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::s3::S3;
use hipobj_testkit::CredentialsFile;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

const CHUNK: usize = 16 << 20;

/// Opens a signed aws-chunked PUT of one 16 MiB chunk to `path` as
/// `(access_key, secret)` and sends its head and the chunk's header line
/// (its data never follows).
fn stalled_upload(url: &str, path: &str, access_key: &str, secret: &str) -> TcpStream {
    let addr = url.trim_start_matches("http://");
    let chunk_header = format!("{CHUNK:x};chunk-signature={}\r\n", "0".repeat(64));
    let end = format!("0;chunk-signature={}\r\n\r\n", "0".repeat(64));
    let len = chunk_header.len() + CHUNK + 2 + end.len();
    let head = crate::hostile_common::signed_wire_head(
        url,
        "PUT",
        path,
        &[
            ("host", addr.to_string()),
            ("content-encoding", "aws-chunked".into()),
            ("x-amz-decoded-content-length", CHUNK.to_string()),
            ("content-length", len.to_string()),
        ],
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        (access_key, secret),
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(chunk_header.as_bytes()).unwrap();
    s
}

/// The status line and what follows of the answer on `s`.
fn answer(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("</Error>") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn stalled_chunks_hold_memory_only_within_the_budget_and_each_keys_share() {
    let creds = CredentialsFile::with_text("tenant-a secret-of-a\ntenant-b secret-of-b\n");
    let gw = gateway_with(
        bin(),
        &[
            "--credentials-file",
            creds.arg(),
            "--chunk-buffer-mib",
            "40",
            "--chunk-buffer-per-key-mib",
            "20",
        ],
        &[],
    );
    let admin = S3::new(&gw.url);
    admin.create_bucket("chunks");
    let held = || admin.metric("hipobj_chunk_buffer_bytes", &[]);
    let wait_held = |n: usize| {
        admin.wait_metric("hipobj_chunk_buffer_bytes", &[], |v| v == n as f64);
    };

    // Tenant a's first stalled chunk is given room: 16 MiB held.
    let a1 = stalled_upload(&gw.url, "/chunks/a1", "tenant-a", "secret-of-a");
    wait_held(CHUNK);
    // Its second would pass a's share (20 MiB): 503 SlowDown at once.
    let mut a2 = stalled_upload(&gw.url, "/chunks/a2", "tenant-a", "secret-of-a");
    let text = answer(&mut a2);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("<Code>SlowDown</Code>"), "{text}");
    assert_eq!(held(), CHUNK as f64);
    // Tenant b is served beside it (32 MiB of 40)...
    let b1 = stalled_upload(&gw.url, "/chunks/b1", "tenant-b", "secret-of-b");
    wait_held(2 * CHUNK);
    // ... but a third chunk passes the process's budget, whoever sends it.
    let mut c = stalled_upload(
        &gw.url,
        "/chunks/c",
        "hipobj-test-key",
        "hipobj-test-secret",
    );
    let text = answer(&mut c);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("<Code>SlowDown</Code>"), "{text}");
    assert!(admin.metric("hipobj_chunk_buffer_refused_total", &[]) >= 2.0);
    // The stalled uploads go away: their room comes back, and nothing
    // was stored.
    drop(a1);
    drop(b1);
    wait_held(0);
    for k in ["a1", "a2", "b1", "c"] {
        assert_eq!(admin.get_plain(&format!("/chunks/{k}")).status, 404, "{k}");
    }
}
