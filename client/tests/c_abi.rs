//! The C ABI as a C program sees it: the programs in `tests/c/` are
//! compiled with gcc against `include/hipobj.h` and `libhipobj.so`, and
//! run. The header is also compiled as C++11.
//!
//! The binaries are left in `<target>/c-tests/` (CI runs `lifecycle` from
//! there under valgrind).

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Where cargo put `libhipobj.so`: `target/<profile>/deps` when it was
/// built for these tests, `target/<profile>` after a `cargo build`; the
/// newer of the two when both are there (a `cargo build` from before the
/// last change leaves a stale copy in `target/<profile>`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/c_abi-<hash>
    let deps = exe
        .parent()
        .expect("the test binary lives in target/<profile>/deps");
    let profile = deps.parent().expect("target/<profile>");
    let modified = |d: &Path| {
        std::fs::metadata(d.join("libhipobj.so"))
            .and_then(|m| m.modified())
            .ok()
    };
    let found = [deps, profile]
        .into_iter()
        .filter_map(|d| Some((modified(d)?, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d)
        .unwrap_or_else(|| {
            panic!(
                "no libhipobj.so in {} or {}",
                profile.display(),
                deps.display()
            )
        })
        .to_path_buf();
    found
}

/// `target/<profile>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// `target/c-tests`, created.
fn out_dir() -> PathBuf {
    let dir = profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .join("c-tests");
    std::fs::create_dir_all(&dir).expect("create target/c-tests");
    dir
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check_output(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles `source` with `compiler` and the strict flags, linked to
/// libhipobj with an rpath to it, into `<target>/c-tests/<name>`.
fn build(compiler: &str, std: &str, source: &Path, name: &str) -> PathBuf {
    let lib = lib_dir();
    let exe = out_dir().join(name);
    let out = Command::new(compiler)
        .arg(format!("-std={std}"))
        .args(STRICT)
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .arg("-I")
        .arg(manifest_dir().join("tests/c"))
        .arg(source)
        .arg(format!("-L{}", lib.display()))
        .arg("-lhipobj")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    check_output(&format!("{compiler} {}", source.display()), &out);
    exe
}

fn build_c(name: &str) -> PathBuf {
    let source = manifest_dir().join("tests/c").join(format!("{name}.c"));
    build("gcc", "c11", &source, name)
}

/// Runs a test program with `env`, asserting success and its verdict line.
fn run(exe: &Path, name: &str, env: &[(&str, &str)]) {
    let mut cmd = Command::new(exe);
    // cargo's LD_LIBRARY_PATH names target/<profile> before the rpath the
    // program was linked with (a DT_RUNPATH is searched after it), which
    // would load a stale libhipobj.so left there by an older `cargo build`.
    cmd.env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("HIPOBJ_PROVIDER")
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .env_remove("HIPOBJ_MAX_TRANSFERS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the C test program");
    check_output(name, &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == format!("{name}: ok")),
        "{name} printed no verdict:\n{stdout}"
    );
}

#[test]
fn api_basics() {
    let exe = build_c("api_basics");
    run(&exe, "api_basics", &[]);
}

#[test]
fn no_device_through_the_real_loaders() {
    let exe = build_c("nodevice");
    run(
        &exe,
        "nodevice",
        &[("HIPOBJ_PROVIDER", "auto"), ("HIPOBJ_MAX_TRANSFERS", "2")],
    );
}

#[test]
fn lifecycle() {
    let exe = build_c("lifecycle");
    run(
        &exe,
        "lifecycle",
        &[("HIPOBJ_PROVIDER", "soft"), ("HIPOBJ_MAX_TRANSFERS", "4")],
    );
}

/// `hipobj-peer-server`, killed when dropped.
struct PeerServer {
    child: Child,
    port: u16,
}

impl PeerServer {
    fn start() -> PeerServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hipobj-peer-server"))
            .env_remove("HIPOBJ_SOFT_ADDRS")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hipobj-peer-server");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("read the server's first line");
        let port = first
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hipobj-peer-server's first line is {first:?}, not PORT <n>");
        };
        PeerServer { child, port }
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn transfer() {
    let exe = build_c("transfer");
    let server = PeerServer::start();
    let port = server.port.to_string();
    run(
        &exe,
        "transfer",
        &[
            ("HIPOBJ_PROVIDER", "soft"),
            ("HIPOBJ_MAX_TRANSFERS", "4"),
            ("HIPOBJ_TEST_PEER_PORT", &port),
        ],
    );
}

/// A program using every type and macro of the header, and one function.
const HEADER_USE: &str = r#"
#include "hipobj.h"
#include <string.h>

static int send_request(void* ctx, const char* token, size_t len) {
    (void)ctx; (void)token; (void)len; return 0;
}
static int recv_reply(void* ctx, char* reply, size_t* len) {
    (void)ctx; (void)reply; (void)len; return 0;
}

int main(void) {
    hipObjError_t e = HIPOBJ_SUCCESS;
    hipObjOps_t ops = {send_request, recv_reply};
    hipObjConfig_t config = {NULL, NULL, NULL, NULL, 0u, -1, "soft0"};
    hipObjHandle_t handle = NULL;
    hipObjOpError_t op = hipObjBusy;
    off_t offset = 0;
    int codes[] = {HIPOBJ_RDMA_OP_PUT, HIPOBJ_RDMA_OP_GET, HIPOBJ_SYNC_TO_HOST,
                   HIPOBJ_SYNC_TO_DEVICE, HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED,
                   HIPOBJ_RDMA_REPLY_RECONNECT, HIPOBJ_BASE_ERR,
                   HIPOBJ_VERSION_MAJOR, HIPOBJ_VERSION_MINOR, HIPOBJ_VERSION_PATCH};
    (void)ops; (void)config; (void)handle; (void)offset; (void)codes;
    if (e.opError != hipObjSuccess || (int)op != 13) return 1;
    return strcmp(hipObjGetVersionString(), "0.1.0") == 0 ? 0 : 1;
}
"#;

fn header_program(ext: &str) -> PathBuf {
    let path = out_dir().join(format!("header_use.{ext}"));
    std::fs::write(&path, HEADER_USE).expect("write the header program");
    path
}

#[test]
fn header_compiles_as_c11() {
    let exe = build("gcc", "c11", &header_program("c"), "header_use_c");
    let status = Command::new(&exe).status().expect("run header_use_c");
    assert!(status.success());
}

#[test]
fn header_compiles_as_cxx11() {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("g++ is not installed: the C++11 check of hipobj.h is skipped");
        return;
    }
    let exe = build("g++", "c++11", &header_program("cpp"), "header_use_cxx");
    let status = Command::new(&exe).status().expect("run header_use_cxx");
    assert!(status.success());
}
