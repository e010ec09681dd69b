//! What the C programs' tests (`c_client.rs`, `c_client_v2.rs`) share: the
//! program built from `tests/c/<name>.c`, the relay that plays its S3
//! client, and the program run with a deadline.
//!
//! A C program has no S3 SDK to sign requests with, so the test plays the
//! application's S3 client: a relay thread on 127.0.0.1 takes one line per
//! request from the program's callbacks, has the test's `handle` send it
//! as a signed request to the test server, and answers `handle`'s line.
#![allow(dead_code)]

use crate::common::S3;
use hipobj::testing::c_programs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a program may run.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

/// Compiles `tests/c/<name>.c` (with `client/tests/c` on the include path)
/// into `<target>/c-tests/<name>`, linked to libhipobj with an rpath to it.
pub fn build_program(name: &str) -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-server is in the workspace");
    c_programs::build(
        "gcc",
        "c11",
        &ws.join(format!("test-server/tests/c/{name}.c")),
        &[&ws.join("client/tests/c")],
        name,
    )
}

/// Answers one line of the program (split at spaces), sending what it asks
/// for with the client given, and noting each request made in the log.
pub type Handler<E> = fn(&S3, &[&str], &Mutex<Vec<E>>) -> String;

/// The program's S3 client: a thread serving the line protocol on
/// 127.0.0.1, one connection at a time; `E` is what it notes per request.
pub struct Relay<E: Send + 'static> {
    pub port: u16,
    log: Arc<Mutex<Vec<E>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl<E: Send + 'static> Relay<E> {
    /// Starts relaying to the server at `server_url` through `handle`.
    pub fn start(server_url: &str, handle: Handler<E>) -> Relay<E> {
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
                    serve(&s3, conn, &log, handle);
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
    pub fn finish(mut self) -> Vec<E> {
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

impl<E: Send + 'static> Drop for Relay<E> {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Serves one connection until it closes.
fn serve<E>(s3: &S3, conn: TcpStream, log: &Mutex<Vec<E>>, handle: Handler<E>) {
    let mut out = conn.try_clone().expect("clone the relay socket");
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        let fields: Vec<&str> = line.split(' ').collect();
        let answer = handle(s3, &fields, log);
        if out.write_all(format!("{answer}\n").as_bytes()).is_err() {
            break;
        }
    }
    let _ = out.shutdown(Shutdown::Both);
}

/// How a program ended.
pub struct Outcome {
    pub success: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// Asserts that program `name` exited 0 after printing `<name>: ok`;
    /// else fails with its output and `trace` (what the relay did).
    #[track_caller]
    pub fn assert_ok(&self, name: &str, trace: &str) {
        let verdict = format!("{name}: ok");
        assert!(
            self.success && self.stdout.lines().any(|l| l == verdict),
            "{name} failed ({}):\nstdout:\n{}\nstderr:\n{}\nrelayed:\n{trace}",
            self.status,
            self.stdout,
            self.stderr
        );
    }
}

/// Runs the program with `args` on the soft provider, killed after
/// [`PROGRAM_TIMEOUT`].
pub fn run_program(exe: &Path, args: &[String]) -> Outcome {
    let name = exe.file_name().map_or_else(
        || exe.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
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
        .unwrap_or_else(|e| panic!("run {name}: {e}"));
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
        if let Some(status) = child
            .try_wait()
            .unwrap_or_else(|e| panic!("wait for {name}: {e}"))
        {
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
