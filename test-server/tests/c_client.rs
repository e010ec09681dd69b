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

mod common;

use common::{pattern, xml_field, Server, S3};
use hipobj::testing::c_programs;
use http::Method;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Object sizes: a byte, a page, and past one 8 MiB staging buffer.
const SIZES: [usize; 3] = [1, 4096, (8 << 20) + 1];
/// The program PUTs `pattern(PUT_SEED_BASE + size)` (as in rdma_client.c).
const PUT_SEED_BASE: u64 = 1 << 32;
/// `/bkt/seed-<size>` holds `pattern(SEEDED_SEED_BASE + size)`.
const SEEDED_SEED_BASE: u64 = 2 << 32;
/// How long the program may run.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

// ---- Building the program ----------------------------------------------

/// Compiles `tests/c/rdma_client.c` into `<target>/c-tests/rdma_client`,
/// linked to libhipobj with an rpath to it.
fn build_program() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-server is in the workspace");
    c_programs::build(
        "gcc",
        "c11",
        &ws.join("test-server/tests/c/rdma_client.c"),
        &[&ws.join("client/tests/c")],
        "rdma_client",
    )
}

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

/// The program's S3 client: a thread serving the line protocol on
/// 127.0.0.1, one connection at a time.
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

    /// Stops the relay and returns what it did. A panic of the relay thread
    /// (an HTTP failure) is raised here.
    fn finish(mut self) -> Vec<Exchange> {
        self.shut();
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn shut(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept; the thread sees the flag and ends.
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

/// Serves one connection until it closes.
fn serve(s3: &S3, conn: TcpStream, log: &Mutex<Vec<Exchange>>) {
    let mut out = conn.try_clone().expect("clone the relay socket");
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        let fields: Vec<&str> = line.split(' ').collect();
        let answer = match fields[..] {
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
                eprintln!("relay: a malformed line {line:?}");
                "NONE".to_string()
            }
        };
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

/// Runs the program with `args`, killed after [`PROGRAM_TIMEOUT`].
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
        .expect("run rdma_client");
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
        if let Some(status) = child.try_wait().expect("wait for rdma_client") {
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
    let exe = build_program();
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

    let relay = Relay::start(&server.url);
    let mut argv = vec![relay.port.to_string()];
    argv.extend(args);
    let outcome = run_program(&exe, &argv);
    let log = relay.finish();
    let trace: String = log
        .iter()
        .map(|e| format!("  {} {} -> {} {:?}\n", e.method, e.path, e.status, e.reply))
        .collect();
    assert!(
        outcome.success && outcome.stdout.lines().any(|l| l == "rdma_client: ok"),
        "rdma_client failed ({}):\nstdout:\n{}\nstderr:\n{}\nrelayed:\n{trace}",
        outcome.status,
        outcome.stdout,
        outcome.stderr
    );

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
