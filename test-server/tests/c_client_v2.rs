//! A C program moves objects by hipobj-rc-v2 to and from the real test
//! server, through `hipobj.h` only (`hipObjInitV2`, `hipObjPutV2`,
//! `hipObjGetV2` and the `hipObjOpsV2_t` callbacks).
//!
//! `tests/c/v2_client.c` is compiled with gcc (strict flags) against
//! `client/include/hipobj.h` and `libhipobj.so`, and run with the software
//! RDMA provider. A C program has no S3 SDK to sign requests with, so this
//! test plays the application's HTTP client: a relay thread on 127.0.0.1
//! takes one line per control request from the program's callbacks
//! (`PREPARE ...`, `READY ...`, `CANCEL ...`; the grammar is in the C
//! file), sends it as a SigV4-signed, body-less `POST` (UNSIGNED-PAYLOAD,
//! every `x-amz-rdma-*` header signed) to `/.hipobj-rc/prepare`, `/ready`
//! or `/cancel`, and answers the response's fields as one line.
//!
//! The binary is left in `<target>/c-tests/v2_client`; with
//! `HIPOBJ_C_TESTS_VALGRIND=1` (as `.ci/run` sets for a second run) it runs
//! under valgrind (`hipobj::testing::c_programs`).

#![forbid(unsafe_code)]

mod common;

use common::{pattern, Server, S3};
use hipobj::testing::c_programs;
use hipobj_wire::rc_v2::{
    CANCEL_PATH, H_BYTES, H_CHECKSUM, H_COOKIE, H_ETAG, H_MR_ADDR, H_MR_RKEY, H_OFFSET, H_OP,
    H_PROTOCOL, H_PROTOCOL_STATUS, H_PSN, H_QPN, H_REPLY, H_SESSION, H_SIZE, H_TARGET, H_TOKEN,
    H_VERSION_ID, PREPARE_PATH, PROTOCOL, READY_PATH, UNSUPPORTED,
};
use http::Method;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Object sizes: a byte, a page, and a few MiB.
const SIZES: [usize; 3] = [1, 4096, (3 << 20) + 7];
/// The program PUTs `pattern(PUT_SEED_BASE + size)` (as in v2_client.c).
const PUT_SEED_BASE: u64 = 1 << 32;
/// How long the program may run.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

/// Compiles `tests/c/v2_client.c` into `<target>/c-tests/v2_client`.
fn build_program() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-server is in the workspace");
    c_programs::build(
        "gcc",
        "c11",
        &ws.join("test-server/tests/c/v2_client.c"),
        &[&ws.join("client/tests/c")],
        "v2_client",
    )
}

// ---- The relay ---------------------------------------------------------

/// One control request the relay made.
#[derive(Debug, Clone)]
struct Exchange {
    kind: String,
    status: u16,
    echo: bool,
}

struct Relay {
    port: u16,
    log: Arc<Mutex<Vec<Exchange>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    fn start(server_url: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let url = server_url.to_string();
        let thread = {
            let log = Arc::clone(&log);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let s3 = S3::new(&url);
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    serve(&s3, conn, &log);
                }
            })
        };
        Relay {
            port,
            log,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<Exchange> {
        self.shut();
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn shut(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Err(panic) = thread.join() {
            if !std::thread::panicking() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shut();
    }
}

/// A field of an answer line: the value, or `-`.
fn field(v: Option<String>) -> String {
    match v {
        Some(s) if !s.is_empty() && !s.contains([' ', '\n']) => s,
        _ => "-".to_string(),
    }
}

/// Sends one control request and answers its line.
fn control(s3: &S3, fields: &[&str], log: &Mutex<Vec<Exchange>>) -> String {
    let mut h: Vec<(&str, String)> = vec![(H_PROTOCOL, PROTOCOL.to_string())];
    let (kind, path) = match fields {
        ["PREPARE", method, target, token, psn, cookie, size, offset] => {
            h.push((H_OP, method.to_string()));
            h.push((H_TARGET, target.to_string()));
            h.push((H_TOKEN, token.to_string()));
            h.push((H_PSN, psn.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            h.push((H_SIZE, size.to_string()));
            if *offset != "0" {
                h.push((H_OFFSET, offset.to_string()));
            }
            ("PREPARE", PREPARE_PATH)
        }
        ["READY", session, cookie, qpn, addr, rkey] => {
            h.push((H_SESSION, session.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            h.push((H_QPN, qpn.to_string()));
            if *addr != "-" {
                h.push((H_MR_ADDR, addr.to_string()));
                h.push((H_MR_RKEY, rkey.to_string()));
            }
            ("READY", READY_PATH)
        }
        ["CANCEL", session, cookie] => {
            h.push((H_SESSION, session.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            ("CANCEL", CANCEL_PATH)
        }
        _ => {
            eprintln!("relay: a malformed line {fields:?}");
            return "0".to_string();
        }
    };
    let headers: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = s3.send(Method::POST, path, &headers, Vec::new(), true);
    let status = a.status.as_u16();
    let echo = a.header(H_PROTOCOL).as_deref() == Some(PROTOCOL);
    log.lock().unwrap().push(Exchange {
        kind: kind.to_string(),
        status,
        echo,
    });
    let flag = |b: bool| if b { "1" } else { "0" };
    match kind {
        "PREPARE" => {
            let unsupported = a
                .header(H_PROTOCOL_STATUS)
                .is_some_and(|v| v.eq_ignore_ascii_case(UNSUPPORTED));
            let token = a
                .header(H_REPLY)
                .and_then(|r| r.strip_prefix("200:").map(str::to_string));
            format!(
                "{status} {} {} {} {} {} {} {}",
                flag(echo),
                flag(unsupported),
                field(token),
                field(a.header(H_SESSION)),
                field(a.header(H_PSN)),
                field(a.header(H_MR_ADDR)),
                field(a.header(H_MR_RKEY)),
            )
        }
        "READY" => format!(
            "{status} {} {} {} {} {} {}",
            flag(echo),
            a.header(H_BYTES).unwrap_or_else(|| "0".into()),
            field(a.header(H_COOKIE)),
            field(a.header(H_ETAG)),
            field(a.header(H_VERSION_ID)),
            field(
                a.header(H_CHECKSUM)
                    .and_then(|c| c.strip_prefix("CRC64NVME ").map(str::to_string))
            ),
        ),
        _ => status.to_string(),
    }
}

/// Serves one connection until it closes.
fn serve(s3: &S3, conn: TcpStream, log: &Mutex<Vec<Exchange>>) {
    let mut out = conn.try_clone().expect("clone the relay socket");
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        let fields: Vec<&str> = line.split(' ').collect();
        let answer = control(s3, &fields, log);
        if out.write_all(format!("{answer}\n").as_bytes()).is_err() {
            break;
        }
    }
    let _ = out.shutdown(Shutdown::Both);
}

// ---- Running the program -----------------------------------------------

struct Outcome {
    success: bool,
    status: String,
    stdout: String,
    stderr: String,
}

fn run_program(exe: &Path, args: &[String]) -> Outcome {
    let mut child = c_programs::command(exe)
        .args(args)
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .env_remove("HIPOBJ_MAX_TRANSFERS")
        .env_remove("HIPOBJ_REQUIRE_GPU_DIRECT")
        .env("HIPOBJ_PROVIDER", "soft")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run v2_client");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PROGRAM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for v2_client") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        success: status.is_some_and(|s| s.success()),
        status: status.map_or_else(
            || format!("killed after {PROGRAM_TIMEOUT:?}"),
            |s| s.to_string(),
        ),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

// ---- The test ----------------------------------------------------------

#[test]
fn c_program_moves_objects_by_rc_v2_through_the_test_server() {
    let exe = build_program();
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");

    let relay = Relay::start(&server.url);
    let mut argv = vec![relay.port.to_string()];
    argv.extend(SIZES.iter().map(|s| s.to_string()));
    let outcome = run_program(&exe, &argv);
    let log = relay.finish();
    let trace: String = log
        .iter()
        .map(|e| format!("  {} -> {} (echo {})\n", e.kind, e.status, e.echo))
        .collect();
    assert!(
        outcome.success && outcome.stdout.lines().any(|l| l == "v2_client: ok"),
        "v2_client failed ({}):\nstdout:\n{}\nstderr:\n{}\nrelayed:\n{trace}",
        outcome.status,
        outcome.stdout,
        outcome.stderr
    );
    // Every answer echoed the protocol; the missing key was the only
    // refusal of each size (at PREPARE or at READY), and a CANCEL follows
    // only a READY refused.
    assert!(log.iter().all(|e| e.echo), "{trace}");
    let refused = log
        .iter()
        .filter(|e| e.kind != "CANCEL" && e.status != 200)
        .count();
    assert_eq!(refused, SIZES.len(), "{trace}");
    for (i, e) in log.iter().enumerate() {
        if e.kind == "CANCEL" {
            let before = &log[i - 1];
            assert!(before.kind == "READY" && before.status != 200, "{trace}");
        }
    }

    // What the program stored, read back over plain HTTP.
    for size in SIZES {
        let a = s3.get_plain(&format!("/bkt/v2-obj-{size}"));
        assert_eq!(a.status, 200, "GET v2-obj-{size}: {}", a.text());
        assert!(
            a.body == pattern(PUT_SEED_BASE + size as u64, size),
            "v2-obj-{size}: other bytes"
        );
    }
}
