//! The code a ConnectX, bnxt or ionic deployment runs, end to end on every
//! CI run: the gateway, the test server and the client library on this
//! project's libibverbs provider (`HIPOBJ_PROVIDER=verbs`), which loads
//! soft-verbs as its `libibverbs.so.1` (through `LD_LIBRARY_PATH`, as a
//! user would). `hipobj demo`, `hipobj conformance` against the test
//! server and against the gateway in front of the external store (Ceph
//! RGW in CI), and `hipobj cp`
//! both ways through the gateway, every byte by RDMA.
//!
//! Needs the workspace's binaries: `cargo test --workspace` builds them.

#![forbid(unsafe_code)]

use std::process::{Command, Output, Stdio};

use hipobj_e2e::external_store;
use hipobj_soft_verbs::testing::library_dir;
use hipobj_testkit::{gateway_with, workspace_bin, Ready, ServerProc, AK, SK};
use serde_json::Value;

/// The device soft-verbs lists (HIPOBJ_SOFT_ADDRS unset: 127.0.0.1).
const DEVICE: &str = "hipobj_soft0";

/// Puts `cmd` on the libibverbs provider over soft-verbs.
fn on_verbs(cmd: &mut Command) -> &mut Command {
    cmd.env("HIPOBJ_PROVIDER", "verbs")
        .env("LD_LIBRARY_PATH", library_dir())
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .env_remove("HIPOBJ_NIC")
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::null())
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `hipobj conformance` on the libibverbs provider: no check FAILs, and
/// the RDMA checks PASS (DC is SKIP: soft-verbs has none).
fn conformance_passes(url: &str) {
    let out = on_verbs(&mut Command::new(workspace_bin("hipobj")))
        .args(["conformance", "--endpoint", url, "--json"])
        .args(["--access-key", AK, "--secret-key", SK, "--nic", DEVICE])
        .output()
        .expect("running hipobj conformance");
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}):\n{}", describe(&out)));
    let checks = doc["checks"].as_array().expect("a checks array");
    let result = |id: &str| {
        checks
            .iter()
            .find(|c| c["id"] == id)
            .and_then(|c| c["result"].as_str())
            .unwrap_or("missing")
            .to_string()
    };
    for c in checks {
        assert_ne!(c["result"], "FAIL", "{c}\n{}", describe(&out));
    }
    for id in [
        "handshake.rc",
        "dialect.rc.library",
        "get.whole",
        "get.unaligned",
        "multipart.rdma",
        "status.buffer-too-small.400",
        "put.failed.old-intact",
        "transfer.1gib",
    ] {
        assert_eq!(result(id), "PASS", "{id}\n{}", describe(&out));
    }
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn demo_runs_on_the_libibverbs_provider() {
    let out = on_verbs(&mut Command::new(workspace_bin("hipobj")))
        .args(["demo", "--size", "4MiB", "--count", "1"])
        .output()
        .expect("running hipobj demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    for want in [
        "RDMA through libibverbs on hipobj_soft0",
        "by rdma in",
        "bytes match: 4194304 of 4194304",
        "demo: OK",
    ] {
        assert!(text.contains(want), "missing {want:?}\n{}", describe(&out));
    }
}

#[test]
fn conformance_against_the_test_server_on_the_libibverbs_provider() {
    let mut cmd = Command::new(workspace_bin("hipobj-test-server"));
    on_verbs(&mut cmd).arg("0").env("RUST_LOG", "info");
    let server = ServerProc::try_start(cmd, Ready::Announced).unwrap_or_else(|e| panic!("{e}"));
    conformance_passes(&server.url);
    assert!(
        server.log().contains("RDMA device hipobj_soft0 (verbs)"),
        "{}",
        server.log()
    );
}

/// The gateway in front of the external store on the libibverbs provider.
fn verbs_gateway(endpoint: &str, ak: &str, sk: &str) -> ServerProc {
    let lib = library_dir().to_string_lossy().into_owned();
    gateway_with(
        &workspace_bin("hipobj-gateway"),
        &[
            "--upstream",
            endpoint,
            "--upstream-access-key",
            ak,
            "--upstream-secret-key",
            sk,
            "--rdma-provider",
            "verbs",
            "--rdma-device",
            DEVICE,
            "--staging-buffers",
            "8",
        ],
        &[("LD_LIBRARY_PATH", lib.as_str())],
    )
}

#[test]
fn conformance_through_the_gateway_on_the_libibverbs_provider() {
    let Some((endpoint, ak, sk)) = external_store() else {
        eprintln!("skipped: no HIPOBJ_TEST_S3_ENDPOINT (set by .ci/run, which starts Ceph RGW)");
        return;
    };
    let gw = verbs_gateway(&endpoint, &ak, &sk);
    conformance_passes(&gw.url);
}

#[test]
fn cp_both_ways_through_the_gateway_on_the_libibverbs_provider() {
    let Some((endpoint, ak, sk)) = external_store() else {
        eprintln!("skipped: no HIPOBJ_TEST_S3_ENDPOINT (set by .ci/run, which starts Ceph RGW)");
        return;
    };
    let gw = verbs_gateway(&endpoint, &ak, &sk);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("up.bin");
    let back = tmp.path().join("back.bin");
    std::fs::write(&src, hipobj_testkit::pattern(7, (40 << 20) + 12345)).unwrap();
    let hipobj = |args: &[&str]| {
        let out = on_verbs(&mut Command::new(workspace_bin("hipobj")))
            .env("HOME", tmp.path())
            .env("AWS_ENDPOINT_URL", &gw.url)
            .env("AWS_ACCESS_KEY_ID", AK)
            .env("AWS_SECRET_ACCESS_KEY", SK)
            .env("HIPOBJ_NIC", DEVICE)
            .args(args)
            .output()
            .expect("running hipobj");
        assert!(out.status.success(), "hipobj {args:?}\n{}", describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bucket = format!("soft-verbs-cp-{}", std::process::id());
    let url = format!("s3://{bucket}/up.bin");
    hipobj(&["mb", &format!("s3://{bucket}")]);
    let up = hipobj(&[
        "cp",
        src.to_str().unwrap(),
        &url,
        "--part-size",
        "16MiB",
        "--require-rdma",
    ]);
    assert!(up.contains("41955385 bytes"), "{up}");
    assert!(up.trim_end().ends_with("path: rdma"), "{up}");
    let down = hipobj(&[
        "cp",
        &url,
        back.to_str().unwrap(),
        "--part-size",
        "16MiB",
        "--require-rdma",
    ]);
    assert!(down.trim_end().ends_with("path: rdma"), "{down}");
    assert_eq!(
        std::fs::read(&src).unwrap(),
        std::fs::read(&back).unwrap(),
        "the bytes back differ"
    );
}
