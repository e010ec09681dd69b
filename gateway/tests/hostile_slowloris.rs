//! Hostile clients of the HTTP front, against the real gateway binary
//! (embedded store, software RDMA): request heads trickled a line at a
//! time and silent connections are closed after --header-read-timeout; at
//! --max-connections a new connection closes the one that waited longest
//! for its head (503 SlowDown at once only when all are busy), and one
//! source address holds at most --max-connections-per-source;
//! an idle keep-alive connection is closed after --idle-timeout; a body
//! that stops coming fails after --body-read-timeout, and so does a client
//! that stops reading its answer. After each, signed requests are served.
//!
//! Every bound waited for is generous (60 s); what is asserted is what the
//! gateway did, read from the sockets and from its `/metrics`.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use hipobj_testkit::{assert_object, gateway_with, pattern, ServerProc, AK, S3, SK};

const GENEROUS: Duration = Duration::from_secs(60);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

fn addr(gw: &ServerProc) -> String {
    gw.url.trim_start_matches("http://").to_string()
}

/// The value of the counter `hipobj_http_connections_closed_total` with
/// `reason`, 0 when absent.
fn closed(gw: &ServerProc, reason: &str) -> u64 {
    let m = S3::new(&gw.url).get_unsigned("/metrics");
    assert_eq!(m.status.as_u16(), 200);
    let label = format!("hipobj_http_connections_closed_total{{reason=\"{reason}\"}} ");
    m.text()
        .lines()
        .find_map(|l| l.strip_prefix(&label))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Waits (at most [`GENEROUS`]) until `closed(gw, reason)` is at least `n`.
fn await_closed(gw: &ServerProc, reason: &str, n: u64) {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let got = closed(gw, reason);
        if got >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{got} connections closed for {reason}, expected {n}; log:\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the gateway has closed `s`: a read finds the end (or a reset)
/// rather than nothing yet. What it sent first is appended to `got`.
fn is_closed(s: &mut TcpStream, got: &mut Vec<u8>) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    s.set_nonblocking(false).unwrap();
    closed
}

/// Everything the gateway sends on `s` until it closes it (a reset counts
/// as the end), with a generous bound.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the gateway did not close the connection within {GENEROUS:?}")
            }
            Err(_) => return out,
        }
    }
}

/// One response read off `s`: its head, and a body of its Content-Length.
fn read_response(s: &mut TcpStream) -> (String, Vec<u8>) {
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before a response: {data:?}");
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(data[..end].to_vec()).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = data[end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut buf).expect("the body");
        assert!(n > 0, "closed within the body");
        body.extend_from_slice(&buf[..n]);
    }
    (head, body)
}

/// The head of a request signed with the test credentials (payload
/// UNSIGNED-PAYLOAD), as it goes on the wire.
fn signed_head(gw: &ServerProc, method: &str, path: &str, content_length: usize) -> String {
    crate::hostile_common::signed_wire_head(
        &gw.url,
        method,
        path,
        &[("content-length", content_length.to_string())],
        "UNSIGNED-PAYLOAD",
        (AK, SK),
    )
}

/// A signed PUT of `len` bytes whose body never comes, sent with
/// `Expect: 100-continue`; returns once the gateway asked for the body
/// (the request is being served: its connection is busy).
fn busy_upload(gw: &ServerProc, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr(gw)).unwrap();
    let head = signed_head(gw, "PUT", path, 1000).replacen(
        "\r\n\r\n",
        "\r\nexpect: 100-continue\r\n\r\n",
        1,
    );
    s.write_all(head.as_bytes()).unwrap();
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).expect("100 Continue");
        assert!(n > 0, "closed before 100 Continue");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    s
}

/// The safety issue's finding 7, played: the cap's worth of clients
/// trickling request heads (or silent) no longer lock a well-behaved client
/// out: it is served at once, the connection that waited longest for its
/// head closed to make room; every trickling connection is closed in the
/// end; only when every connection is serving a request is a new one
/// answered 503 SlowDown.
#[test]
fn trickled_heads_make_room_and_are_cut_off_and_the_cap_refuses_when_all_are_busy() {
    const CAP: usize = 64;
    let gw = gateway_with(
        bin(),
        &[
            "--max-connections",
            &CAP.to_string(),
            "--max-connections-per-source",
            &CAP.to_string(),
            // Long enough for the cap to be filled and tried.
            "--header-read-timeout",
            "5s",
        ],
        &[],
    );
    // The cap's worth of slow clients: half trickle a request head, half
    // send nothing.
    let mut slow: Vec<TcpStream> = (0..CAP)
        .map(|i| {
            let mut s = TcpStream::connect(addr(&gw)).unwrap();
            if i % 2 == 0 {
                s.write_all(b"GET /slow/x HTTP/1.1\r\nHost: x\r\n").unwrap();
            }
            s
        })
        .collect();
    // (b) Beyond the cap, a well-behaved client is served at once: the
    // longest-waiting slow connection made room.
    let s3 = S3::new(&gw.url);
    s3.create_bucket("slow");
    let data = pattern(3, 100_000);
    let a = s3.put_plain("/slow/obj", data.clone());
    assert_eq!(a.status.as_u16(), 200, "{}", a.text());
    assert_object(&s3, "/slow/obj", &data);
    assert!(closed(&gw, "evicted") >= 1);
    // (a) Trickling keeps no connection open: each gets a header line every
    // 200 ms, and every one is closed all the same.
    let deadline = Instant::now() + GENEROUS;
    let mut open: Vec<usize> = (0..CAP).collect();
    let mut line = 0u64;
    while !open.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} slow connections still open after {GENEROUS:?}",
            open.len()
        );
        line += 1;
        open.retain(|&i| {
            let s = &mut slow[i];
            let mut got = Vec::new();
            if is_closed(s, &mut got) {
                // Closed without an answer (or with a 408).
                assert!(
                    got.is_empty() || got.starts_with(b"HTTP/1.1 408"),
                    "{}",
                    String::from_utf8_lossy(&got)
                );
                return false;
            }
            if i % 2 == 0 {
                // A write to a connection the gateway just closed may fail.
                let _ = s.write_all(format!("X-Slow-{line}: a\r\n").as_bytes());
            }
            true
        });
        // The attack itself: the next header line comes 200 ms later.
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(slow);
    assert!(closed(&gw, "header_timeout") + closed(&gw, "evicted") >= CAP as u64);
    drop(s3);
    // (c) Every connection serving a request (a body that does not come):
    // a new one is answered 503 SlowDown, Connection: close, and the end.
    let busy: Vec<TcpStream> = (0..CAP)
        .map(|i| busy_upload(&gw, &format!("/slow/busy{i}")))
        .collect();
    let mut extra = TcpStream::connect(addr(&gw)).unwrap();
    extra
        .write_all(b"GET /slow/x HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut extra)).into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{head}"
    );
    assert_eq!(
        hipobj_testkit::xml_field(body.as_bytes(), "Code").as_deref(),
        Some("SlowDown")
    );
    assert_eq!(
        hipobj_testkit::xml_field(body.as_bytes(), "Message").as_deref(),
        Some("too many connections")
    );
    drop(busy);
    // (d) The gateway serves well-behaved clients again, once it has seen
    // the busy connections close (each connection's task notices its EOF
    // on its own: on a loaded machine, after this test's next request).
    let s3 = S3::new(&gw.url);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while s3.get_plain("/slow/obj").status == 503 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_object(&s3, "/slow/obj", &data);
    assert!(closed(&gw, "refused") >= 1);
}

/// The per-source cap: one address holds at most its share; at it, its
/// own longest-waiting connection makes room for its new one, and
/// another address's connections are never taken.
#[test]
fn a_source_address_holds_at_most_its_share() {
    // Two sources: 127.0.0.1 and 127.0.0.2 (both on loopback).
    let gw = gateway_with(
        bin(),
        &[
            "--max-connections",
            "64",
            "--max-connections-per-source",
            "8",
            "--header-read-timeout",
            "30s",
        ],
        &[],
    );
    let server: std::net::SocketAddr = addr(&gw).parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let from = |local: &str| -> TcpStream {
        let local: std::net::SocketAddr = format!("{local}:0").parse().unwrap();
        rt.block_on(async {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind(local).unwrap();
            let s = sock.connect(server).await.unwrap();
            // Accepted and counted before the next one comes.
            s.into_std().unwrap()
        })
    };
    // The other source's 4 silent connections.
    let mut other: Vec<TcpStream> = (0..4).map(|_| from("127.0.0.2")).collect();
    // 20 silent connections from the first source: it keeps 8.
    let mut mine: Vec<TcpStream> = (0..20).map(|_| from("127.0.0.1")).collect();
    // The first 12 of them were closed to make room, the last 8 are open;
    // the other source's are all open.
    let mut got = Vec::new();
    let deadline = Instant::now() + GENEROUS;
    let mut closed_n;
    loop {
        closed_n = 0;
        for s in &mut mine {
            if is_closed(s, &mut got) {
                closed_n += 1;
            }
        }
        if closed_n >= 12 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(closed_n, 12);
    for s in &mut mine[12..] {
        assert!(!is_closed(s, &mut got));
    }
    for s in &mut other {
        assert!(
            !is_closed(s, &mut got),
            "another source's connection was taken"
        );
    }
    assert!(closed(&gw, "evicted") >= 12);
}
#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let gw = gateway_with(
        bin(),
        &["--idle-timeout", "1s", "--header-read-timeout", "30s"],
        &[],
    );
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (head, body) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"{\"status\":\"ok\"}\n");
    // Kept alive, then closed when idle: nothing more comes, then the end.
    let rest = read_to_close(&mut s);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert_eq!(closed(&gw, "idle_timeout"), 1);
    assert_eq!(closed(&gw, "header_timeout"), 0);
    // A new connection is served.
    let s3 = S3::new(&gw.url);
    s3.create_bucket("idle");
    assert_eq!(s3.put_plain("/idle/o", b"x".to_vec()).status.as_u16(), 200);
    assert_object(&s3, "/idle/o", b"x");
}

#[test]
fn a_stalled_body_and_a_client_that_stops_reading_are_cut_off() {
    let gw = gateway_with(
        bin(),
        &["--body-read-timeout", "1s", "--idle-timeout", "30s"],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("stall");
    // A PUT that promises 1000 bytes and sends 10.
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(signed_head(&gw, "PUT", "/stall/part", 1000).as_bytes())
        .unwrap();
    s.write_all(b"0123456789").unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
    // The request failed as S3 says: 400 RequestTimeout; nothing stored.
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert_eq!(
        hipobj_testkit::xml_field(answer.as_bytes(), "Code").as_deref(),
        Some("RequestTimeout"),
        "{answer}"
    );
    let a = s3.get_plain("/stall/part");
    assert_eq!(a.status.as_u16(), 404, "{}", a.text());
    // A GET of an object larger than the sockets' buffers whose answer is
    // never read.
    let big = pattern(7, 48 << 20);
    assert_eq!(s3.put_plain("/stall/big", big.clone()).status.as_u16(), 200);
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(signed_head(&gw, "GET", "/stall/big", 0).as_bytes())
        .unwrap();
    await_closed(&gw, "send_stall", 1);
    let got = read_to_close(&mut s);
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert!(got.len() < big.len(), "{} bytes came", got.len());
    // Others are served.
    assert_object(&s3, "/stall/big", &big);
}

/// A request head larger than a connection's read buffer (64 KiB) is
/// refused with 431 and the connection closed, before any of it is
/// buffered further; a head of a few tens of KiB (far over S3's 8 KiB) is
/// still read and answered.
#[test]
fn a_head_over_the_read_buffer_is_refused() {
    let gw = gateway_with(bin(), &[], &[]);
    let head_with = |filler: usize| {
        format!(
            "GET /health/live HTTP/1.1\r\nHost: x\r\nx-filler: {}\r\n\r\n",
            "a".repeat(filler)
        )
    };
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(head_with(40 << 10).as_bytes()).unwrap();
    let (head, body) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"{\"status\":\"ok\"}\n");

    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    // The gateway may close while the rest is still being written.
    let _ = s.write_all(head_with(100 << 10).as_bytes());
    let got = read_to_close(&mut s);
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("HTTP/1.1 431"),
        "expected 431 Request Header Fields Too Large, got {got:?}"
    );
    // A new connection is served.
    let s3 = S3::new(&gw.url);
    s3.create_bucket("heads");
    assert_eq!(s3.put_plain("/heads/o", b"x".to_vec()).status.as_u16(), 200);
    assert_object(&s3, "/heads/o", b"x");
}
