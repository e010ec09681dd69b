//! Servers as processes, where the workspace's binaries are, free ports,
//! and this test binary re-run as a child client process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A binary of the workspace next to this test executable
/// (`target/<profile>/deps/<test>` → `target/<profile>/<name>`), for the
/// binaries of other packages (a package's own are
/// `env!("CARGO_BIN_EXE_<name>")`). `cargo test --workspace` builds every
/// package's binaries; alone, a package's tests need them built first.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe
        .parent()
        .expect("the test executable's directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p {name}` with this profile), \
         or run `cargo test --workspace`",
        bin.display()
    );
    bin
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An unsigned `GET /health` of `url` (`http://host:port`) answers 200.
/// Plain blocking I/O, no runtime: callable inside async tests. A server
/// that accepts but does not answer within 30 s counts as not healthy.
pub fn healthy(url: &str) -> bool {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200")
}

/// A server process. Its temporary files (the test server's store) live in
/// a directory this handle owns, the child's `TMPDIR`, removed on drop even
/// when the process had to be killed. Dropping it stops the process (see
/// [`stop`](Self::stop)).
#[derive(Debug)]
pub struct ServerProc {
    child: Child,
    /// `http://host:port`.
    pub url: String,
    /// The port it listens on.
    pub port: u16,
    /// Where its stderr goes, when kept (see [`log`](Self::log)).
    log: Option<PathBuf>,
    _tmp: tempfile::TempDir,
}

/// When a starting server counts as started.
#[derive(Debug, Clone, Copy)]
pub enum Ready {
    /// It has printed the URL it serves as the last word of its first line
    /// on stdout (`... listening on http://host:port`).
    Announced,
    /// `127.0.0.1:port` accepts connections.
    Listening(u16),
    /// `GET /health` of `127.0.0.1:port` answers 200.
    Healthy(u16),
}

/// What of a server's output [`ServerProc::launch`] keeps in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Nothing,
    Stderr,
    StdoutAndStderr,
}

/// A server that did not start: it exited first, printed something else
/// than its URL, or was not ready within 30 s.
#[derive(Debug)]
pub struct NotStarted {
    /// What happened, for messages.
    pub why: String,
    /// Its exit status, when it exited by itself.
    pub status: Option<ExitStatus>,
    /// What it wrote to stderr, when kept (else empty).
    pub log: String,
}

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.why)?;
        if !self.log.is_empty() {
            write!(f, "; its stderr:\n{}", self.log)?;
        }
        Ok(())
    }
}

impl ServerProc {
    /// Starts `cmd`, a server that prints the URL it serves as the last
    /// word of its first line on stdout (`... listening on http://...`),
    /// and returns once it has.
    pub fn start_announcing(cmd: Command) -> ServerProc {
        Self::launch(cmd, Ready::Announced, Keep::Nothing).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `cmd`, a server that will listen on `127.0.0.1:port`, and
    /// returns once its `/health` answers 200; panics if it exits first or
    /// is not healthy within 30 s.
    pub fn start_serving(cmd: Command, port: u16) -> ServerProc {
        Self::launch(cmd, Ready::Healthy(port), Keep::Nothing).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `cmd` and returns once it is `ready`, with its stderr kept
    /// (see [`log`](Self::log)); a [`NotStarted`] with that log when it
    /// exits first, or is not ready within 30 s (then it is stopped).
    pub fn try_start(cmd: Command, ready: Ready) -> Result<ServerProc, NotStarted> {
        Self::launch(cmd, ready, Keep::Stderr)
    }

    /// As [`try_start`](Self::try_start), with its stdout kept in the same
    /// log as its stderr (for servers that log to stdout, as s3s-fs does);
    /// with [`Ready::Announced`] stdout is read for the URL instead.
    pub fn try_start_logging_all(cmd: Command, ready: Ready) -> Result<ServerProc, NotStarted> {
        Self::launch(cmd, ready, Keep::StdoutAndStderr)
    }

    /// Spawns `cmd` with `RUST_LOG=warn` (unless it sets `RUST_LOG`) and a
    /// `TMPDIR` of its own, its output kept as `keep` says, and waits
    /// until it is `ready`.
    fn launch(mut cmd: Command, ready: Ready, keep: Keep) -> Result<ServerProc, NotStarted> {
        let what = cmd.get_program().to_string_lossy().into_owned();
        let tmp = tempfile::tempdir().expect("a directory for the server's temporary files");
        let log = (keep != Keep::Nothing).then(|| tmp.path().join("stderr.log"));
        if let Some(path) = &log {
            let f = std::fs::File::create(path).expect("a file for the server's stderr");
            if keep == Keep::StdoutAndStderr && !matches!(ready, Ready::Announced) {
                cmd.stdout(f.try_clone().expect("a second handle on the server's log"));
            }
            cmd.stderr(f);
        }
        if matches!(ready, Ready::Announced) {
            cmd.stdout(Stdio::piped());
        }
        if !cmd.get_envs().any(|(k, _)| k == "RUST_LOG") {
            cmd.env("RUST_LOG", "warn");
        }
        let child = cmd
            .env("TMPDIR", tmp.path())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let mut p = ServerProc {
            child,
            url: String::new(),
            port: 0,
            log,
            _tmp: tmp,
        };
        let waited = match ready {
            Ready::Announced => p.announced(),
            Ready::Listening(port) => p.await_ready(port, "listening", |url| {
                std::net::TcpStream::connect(url.trim_start_matches("http://")).is_ok()
            }),
            Ready::Healthy(port) => p.await_ready(port, "healthy", healthy),
        };
        match waited {
            Ok(()) => Ok(p),
            Err((why, status)) => {
                p.stop();
                Err(NotStarted {
                    why: format!("{what}: {why}"),
                    status,
                    log: p.log(),
                })
            }
        }
    }

    /// Reads the URL it announces on its first line. Errors say why, with
    /// the exit status when it exited by itself.
    fn announced(&mut self) -> Result<(), (String, Option<ExitStatus>)> {
        let mut line = String::new();
        let _ = BufReader::new(self.child.stdout.take().unwrap()).read_line(&mut line);
        if line.is_empty() {
            let status = self.exited_within(Duration::from_secs(5));
            return Err(("ended its stdout before it served".into(), status));
        }
        let url = line.trim().rsplit(' ').next().unwrap_or("");
        let port = url.strip_prefix("http://").and_then(|a| {
            a.rsplit(':')
                .next()
                .and_then(|p| p.trim_end_matches('/').parse().ok())
        });
        let Some(port) = port else {
            return Err((format!("unexpected first line {line:?}"), None));
        };
        self.url = url.trim_end_matches('/').to_string();
        self.port = port;
        Ok(())
    }

    /// Waits until `ready(url)` for `127.0.0.1:port`, at most 30 s; errors
    /// as [`announced`](Self::announced)'s.
    fn await_ready(
        &mut self,
        port: u16,
        state: &str,
        ready: impl Fn(&str) -> bool,
    ) -> Result<(), (String, Option<ExitStatus>)> {
        self.url = format!("http://127.0.0.1:{port}");
        self.port = port;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready(&self.url) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err((format!("exited at start: {status}"), Some(status)));
            }
            if Instant::now() >= deadline {
                return Err((format!("was not {state} at {} within 30 s", self.url), None));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Its exit status, once it has exited within `limit`.
    fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => return None,
            }
        }
    }

    /// What it wrote to stderr so far, when kept ([`try_start`](Self::try_start);
    /// its stdout too with [`try_start_logging_all`](Self::try_start_logging_all)),
    /// else empty.
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `GET /health` answers 200.
    pub fn healthy(&self) -> bool {
        healthy(&self.url)
    }

    /// SIGTERM (the server finishes and removes its store), SIGKILL if it
    /// has not exited within 5 s.
    pub fn stop(&mut self) {
        stop_child(&mut self.child);
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops a server process: SIGTERM, then SIGKILL after 5 s.
pub fn stop_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `hipobj-test-server ARGS` (the binary at `bin`), once it has printed
/// the URL it serves.
pub fn test_server(bin: &Path, args: &[&str]) -> ServerProc {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    ServerProc::start_announcing(cmd)
}

/// `hipobj-gateway` (the binary at `bin`) on a free loopback port in front
/// of `upstream`, signing for it with `access_key` and `secret_key`, on the
/// software provider with 8 staging buffers and cuObject's public DC key,
/// once its `/health` answers 200.
pub fn gateway(bin: &Path, upstream: &str, access_key: &str, secret_key: &str) -> ServerProc {
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--upstream",
        upstream,
        "--upstream-access-key",
        access_key,
        "--upstream-secret-key",
        secret_key,
        // The software provider even where the host has a NIC.
        "--rdma-device",
        "soft0",
        // The test clients' DC targets use cuObject's public key.
        "--dc-key",
        "cuobject",
        "--staging-buffers",
        "8",
    ])
    .env_remove("HIPOBJ_DATA_DIR")
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    ServerProc::start_serving(cmd, port)
}

/// `hipobj-gateway` (the binary at `bin`) with `args`, and `env` in its
/// environment, on a loopback port it picks (`--listen 127.0.0.1:0`),
/// the software provider's `soft0` (unless `args` hold `--rdma-device`)
/// and cuObject's public DC key (`--dc-key
/// cuobject`: `args` must not name another), none of the variables of this environment that
/// name its store, keys or region passed on; once it has printed the URL
/// it serves. Its stderr is kept ([`ServerProc::log`]); a [`NotStarted`]
/// with that log when it exits first (a setting refused, ...).
pub fn try_gateway_with(
    bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<ServerProc, NotStarted> {
    let mut cmd = Command::new(bin);
    cmd.args(["--listen", "127.0.0.1:0", "--dc-key", "cuobject"]);
    // The software provider even where the host has a NIC, unless `args`
    // name the devices.
    if !args.contains(&"--rdma-device") {
        cmd.args(["--rdma-device", "soft0"]);
    }
    cmd.args(args);
    for var in [
        "HIPOBJ_UPSTREAM",
        "HIPOBJ_DATA_DIR",
        "HIPOBJ_ACCESS_KEY",
        "HIPOBJ_SECRET_KEY",
        "HIPOBJ_REGION",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).stdin(Stdio::null());
    ServerProc::try_start(cmd, Ready::Announced)
}

/// As [`try_gateway_with`], which must start: panics with its log.
#[track_caller]
pub fn gateway_with(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> ServerProc {
    try_gateway_with(bin, args, env).unwrap_or_else(|e| panic!("{e}"))
}

/// Environment variable naming what a child client process does.
pub const CHILD_ROLE: &str = "HIPOBJ_TEST_CHILD_ROLE";
/// The line a child prints when its transfer is about to start.
pub const CHILD_READY: &str = "HIPOBJ-TEST-CHILD-READY";

/// Re-runs this test binary as a child client process: only its ignored
/// test `entry` runs, with `role` and `env` in its environment. `entry` is
/// the test function's path as `concat!(module_path!(), "::name")` writes
/// it; its first segment (the test binary's crate) is dropped, as libtest
/// names tests without it, so the same call works in a test binary of its
/// own and in a module of a shared one.
pub fn spawn_child(entry: &str, role: &str, env: &[(&str, String)]) -> Child {
    let entry = entry.split_once("::").map_or(entry, |(_, test)| test);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        entry,
        "--nocapture",
        "--ignored",
        "--test-threads=1",
    ])
    .env(CHILD_ROLE, role)
    .env("RUST_LOG", "error")
    .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn the child client process")
}

/// Reads a child's stdout until it says it is ready; false if it ended first.
pub fn wait_ready(child: &mut Child) -> bool {
    let Some(out) = child.stdout.take() else {
        return false;
    };
    let mut lines = BufReader::new(out).lines();
    let ready = lines.any(|l| l.is_ok_and(|l| l.contains(CHILD_READY)));
    // Keep draining in the background so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    ready
}
