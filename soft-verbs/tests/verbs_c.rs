//! The verbs' semantics as a C program sees them: `tests/c/verbs_check.c`,
//! compiled here against rdma-core's own `<infiniband/verbs.h>` (its inline
//! functions, structure layouts and symbol versions) and linked with this
//! build's `libibverbs.so.1`, checks exact outcomes (bytes, completion
//! status, opcode, length, immediate, errno values) of the device queries,
//! the unsupported verbs, the QP state machine, posting (immediates,
//! inline, several SGEs, unsignalled requests, the `ibv_wr_*` interface),
//! the RC error paths (RNR, a peer not ready, remote access), completion
//! channels and `EBUSY` on parents with children.
//!
//! One test per check: each compiles the program (a C compiler, `cc` or
//! `$CC`, is needed) and runs that check alone in its own process, which
//! opens its own device (`hipobj_soft0` on 127.0.0.1) and connects two of
//! its QPs to each other.

use hipobj_soft_verbs::testing::library_dir;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long one check may run (the program's own alarm is at 100 s).
const LIMIT: Duration = Duration::from_secs(120);

/// The compiled program, in a directory removed when dropped.
struct Program {
    dir: tempfile::TempDir,
    exe: PathBuf,
}

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/verbs_check.c")
}

/// Compiles `verbs_check.c` with warnings as errors, linked with the
/// library of this build (found at run time through its rpath too).
fn build() -> Program {
    let lib = library_dir();
    let dir = tempfile::Builder::new()
        .prefix("verbs_check")
        .tempdir()
        .expect("a temporary directory");
    let exe = dir.path().join("verbs_check");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let o = Command::new(&cc)
        .args(["-Wall", "-Werror", "-O1", "-I/usr/include"])
        .arg(source())
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-libverbs")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler {cc:?}: {e}"));
    assert!(
        o.status.success(),
        "compiling {} failed:\n{}{}",
        source().display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    Program { dir, exe }
}

/// Runs `child` to its end, killing it after `LIMIT`.
fn wait(child: &mut std::process::Child, name: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("check {name} did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs check `name` alone; it must print `ok NAME`, no `FAIL`, and exit 0.
/// Whether the C program can be built here: `<infiniband/verbs.h>`
/// (libibverbs-dev) is installed. Without it the checks print that they
/// were skipped, unless `REQUIRE_IBVERBS_HEADERS` is set (CI sets it).
fn header_present(name: &str) -> bool {
    if std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        return true;
    }
    assert!(
        std::env::var_os("REQUIRE_IBVERBS_HEADERS").is_none_or(|v| v.is_empty()),
        "{name}: <infiniband/verbs.h> is not installed, and REQUIRE_IBVERBS_HEADERS is set"
    );
    println!(
        "SKIPPED {name}: <infiniband/verbs.h> is not installed (apt-get install libibverbs-dev; \
         REQUIRE_IBVERBS_HEADERS=1 makes this a failure)"
    );
    false
}

fn check(name: &str) {
    if !header_present(name) {
        return;
    }
    let p = build();
    let out_path = p.dir.path().join("stdout");
    let err_path = p.dir.path().join("stderr");
    let mut child = Command::new(&p.exe)
        .arg(name)
        .env("LD_LIBRARY_PATH", library_dir())
        .env("HIPOBJ_SOFT_TIMEOUT_SCALE", "1")
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("starting verbs_check");
    let status = wait(&mut child, name);
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let all = format!("--- stdout:\n{out}--- stderr:\n{err}");
    assert!(
        !all.contains("FAIL"),
        "check {name} failed ({status}):\n{all}"
    );
    assert!(status.success(), "check {name} exited {status}:\n{all}");
    let want = format!("ok {name}");
    assert!(
        out.lines().any(|l| l == want),
        "check {name} did not print {want:?}:\n{all}"
    );
}

/// `ibv_get_device_list` lists `hipobj_soft0`; `ibv_query_device_ex`,
/// `ibv_query_port`, `ibv_query_gid_ex` (all header inlines) and
/// `ibv_query_pkey` describe an active RoCE v2 port with MTU 4096, GID
/// `::ffff:127.0.0.1`, no atomics, 16384 WRs per queue.
#[test]
fn devices() {
    check("devices");
}

/// dma-buf and iova != addr registration, SRQs, UD QPs, `ibv_create_cq_ex`:
/// NULL with `EOPNOTSUPP`; an atomic in a posted list: `EINVAL`, `bad_wr`
/// naming it, the WRITE before it posted and completed.
#[test]
fn unsupported() {
    check("unsupported");
}

/// RESET -> RTR, INIT without access flags, RTS -> RTR: `EINVAL`; sends
/// before RTS: `EINVAL`; `ibv_query_qp` reports state and attributes; ERR
/// flushes, RESET -> INIT -> RTR -> RTS works again.
#[test]
fn state_machine() {
    check("state_machine");
}

/// WRITE_WITH_IMM lands in the peer's region and completes its receive as
/// `RECV_RDMA_WITH_IMM` with the immediate as posted (network order);
/// SEND_WITH_IMM lands in the receive buffer.
#[test]
fn write_imm_and_send_imm() {
    check("write_imm_and_send_imm");
}

/// An inline send from unregistered memory overwritten right after the
/// post arrives as it was; three SGEs arrive concatenated; too much inline
/// data (per post or per QP) is `EINVAL`.
#[test]
fn inline_and_sges() {
    check("inline_and_sges");
}

/// Five unsignalled WRITEs and a signalled one: one completion, all bytes.
#[test]
fn unsignalled() {
    check("unsignalled");
}

/// `ibv_create_qp_ex` with send ops and the `ibv_wr_*` interface: WRITE,
/// SEND_WITH_IMM with inline data, READ into an SGE list, completed in
/// order; an operation the QP was not made for is `EINVAL` and an atomic
/// `EOPNOTSUPP`, each posting nothing.
#[test]
fn wr_api() {
    check("wr_api");
}

/// A SEND to a peer without a receive and `rnr_retry` 1:
/// `RNR_RETRY_EXC_ERR`, the QP in ERR, later posts flushed.
#[test]
fn rnr() {
    check("rnr");
}

/// A WRITE to a peer QP left in INIT: dropped, `RETRY_EXC_ERR`, the
/// peer's memory untouched.
#[test]
fn not_ready_peer_drops() {
    check("not_ready_peer_drops");
}

/// A wrong rkey, a WRITE one byte past the region, a region without remote
/// write: `REM_ACCESS_ERR`, nothing written.
#[test]
fn remote_access() {
    check("remote_access");
}

/// A completion channel shared by two CQs: the event names the CQ that
/// completed and its context, `EAGAIN` when non-blocking with none, and
/// `poll(2)` on its descriptor sees events.
#[test]
fn events() {
    check("events");
}

/// `EBUSY` for a PD, CQ or channel with live children; 0 once they are gone.
#[test]
fn busy() {
    check("busy");
}
