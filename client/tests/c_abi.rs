//! The C ABI as a C program sees it: the programs in `tests/c/` are
//! compiled with gcc against `include/hipobj.h` and `libhipobj.so`, and
//! run. The header is also compiled as C++11.
//!
//! The binaries are left in `<target>/c-tests/`. With
//! `HIPOBJ_C_TESTS_VALGRIND=1` (as `.ci/run` sets for a second run) every
//! program runs under valgrind (`hipobj::testing::c_programs`).

#![forbid(unsafe_code)]

use hipobj::testing::c_programs::{self, command};
use hipobj::testing::line_server;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles `tests/c/<name>.c` as C11 into `<target>/c-tests/<name>`.
fn build_c(name: &str) -> PathBuf {
    let source = manifest_dir().join("tests/c").join(format!("{name}.c"));
    let tests_c = manifest_dir().join("tests/c");
    c_programs::build("gcc", "c11", &source, &[&tests_c], name)
}

/// Runs a test program with `env`, asserting success and its verdict line.
fn run(exe: &Path, name: &str, env: &[(&str, &str)]) {
    let mut cmd = command(exe);
    cmd.env_remove("HIPOBJ_PROVIDER")
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .env_remove("HIPOBJ_MAX_TRANSFERS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the C test program");
    assert!(
        out.status.success(),
        "{name} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn transfer() {
    let exe = build_c("transfer");
    let port = line_server::start()
        .expect("start the line server")
        .to_string();
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
    let path = c_programs::out_dir().join(format!("header_use.{ext}"));
    std::fs::write(&path, HEADER_USE).expect("write the header program");
    path
}

#[test]
fn header_compiles_as_c11() {
    let exe = c_programs::build("gcc", "c11", &header_program("c"), &[], "header_use_c");
    let status = command(&exe).status().expect("run header_use_c");
    assert!(status.success());
}

#[test]
fn header_compiles_as_cxx11() {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("g++ is not installed: the C++11 check of hipobj.h is skipped");
        return;
    }
    let exe = c_programs::build(
        "g++",
        "c++11",
        &header_program("cpp"),
        &[],
        "header_use_cxx",
    );
    let status = command(&exe).status().expect("run header_use_cxx");
    assert!(status.success());
}
