//! Graceful shutdown of the HTTP front, against the real gateway binary:
//! on SIGTERM it stops accepting, and a request in flight (its body still
//! coming) is finished and answered before the process exits.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use hipobj_testkit::{gateway_with, AK, REGION, S3, SK};

const GENEROUS: Duration = Duration::from_secs(60);

#[test]
fn sigterm_finishes_the_request_in_flight() {
    let store = tempfile::tempdir().unwrap();
    let mut gw = gateway_with(
        Path::new(env!("CARGO_BIN_EXE_hipobj-gateway")),
        &["--data-dir", store.path().to_str().unwrap()],
        &[],
    );
    let addr = gw.url.trim_start_matches("http://").to_string();
    let s3 = S3::new(&gw.url);
    s3.create_bucket("drain");
    // A PUT whose head and first half are sent before SIGTERM.
    let body = b"first half, second half".to_vec();
    let mut req = http::Request::builder()
        .method("PUT")
        .uri(format!("{}/drain/obj", gw.url))
        .header("content-length", body.len())
        .body(hipobj_gateway::body::Body::empty())
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
    let mut head = "PUT /drain/obj HTTP/1.1\r\n".to_string();
    for (k, v) in req.headers() {
        head.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap()));
    }
    head.push_str("\r\n");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body[..11]).unwrap();
    // SIGTERM only once the gateway has read the head: a connection whose
    // request has not begun is closed at shutdown, as by any HTTP server.
    // The scrape is a request in flight too, hence 2.
    s3.wait_metric("hipobj_http_requests_in_flight", &[], |v| v >= 2.0);
    let status = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // It stops accepting ...
    let deadline = Instant::now() + GENEROUS;
    while TcpStream::connect(&addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gw.alive(), "exited with a request in flight");
    // ... and finishes the request in flight.
    s.write_all(&body[11..]).unwrap();
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    let deadline = Instant::now() + GENEROUS;
    while gw.alive() {
        assert!(
            Instant::now() < deadline,
            "did not exit after its last request"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The object was stored: a gateway started again on the same store
    // serves it.
    let again = gateway_with(
        Path::new(env!("CARGO_BIN_EXE_hipobj-gateway")),
        &["--data-dir", store.path().to_str().unwrap()],
        &[],
    );
    let got = S3::new(&again.url).get_plain("/drain/obj");
    assert_eq!(got.status, 200);
    assert_eq!(got.body[..], body[..]);
}
