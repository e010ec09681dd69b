//! `hipobj conformance` against real processes: the test server (every
//! check PASS or SKIP, the re-handshake check with a restart command, the
//! other-key check with a second tenant), the test server behind
//! `tamper-proxy` once per mode (the check the mode names FAILs, exit 1),
//! hipobj-gateway in front of the separately started store (Ceph RGW in
//! CI, or s3s-fs), a server
//! without RDMA (exit 3) and bad arguments (exit 2).
//!
//! Needs the workspace's binaries (`hipobj`, `hipobj-test-server`,
//! `hipobj-gateway`): `cargo test --workspace` builds them.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hipobj_e2e::external_store;
use hipobj_testkit::{free_port, workspace_bin, PlainS3, ServerProc, Tenant, AK, SK};
use serde_json::Value;

/// The tampering modes and the check each must make FAIL (as
/// `tamper-proxy --list` prints them, and `docs/conformance.md`).
const MODES: [(&str, &str); 17] = [
    ("drop-reply", "reply.get"),
    ("range200", "get.range.206"),
    ("flip-byte", "get.whole"),
    ("write-past-end", "status.buffer-too-small.400"),
    ("accept-unsigned", "status.token-not-signed.403"),
    ("accept-unsigned", "v2.status.unsigned-header.403"),
    ("partial-put", "put.failed.old-intact"),
    ("status500", "status.malformed-token.400"),
    ("serve-other-op", "status.other-operation.501"),
    ("fallback-on-421", "status.unknown-pair.421"),
    ("v2-cookie-echo", "v2.get.whole"),
    ("v2-ready-404-as-200", "v2.status.unknown-session.404"),
    ("v2-ready-404-as-200", "v2.status.wrong-cookie.404"),
    ("v2-cancel-once", "v2.cancel.twice"),
    ("v2-prepare-400-as-200", "v2.status.size-over-cap.400"),
    ("v2-shift-offset", "v2.get.range"),
    ("v2-put-short", "v2.put.whole"),
];

fn proxy_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tamper-proxy"))
}

/// `hipobj conformance --endpoint URL --json ARGS` with the test keys.
fn conformance(url: &str, keys: (&str, &str), args: &[&str]) -> (Output, Option<Value>) {
    let out = Command::new(workspace_bin("hipobj"))
        .args(["conformance", "--endpoint", url, "--json"])
        .args(["--access-key", keys.0, "--secret-key", keys.1])
        // Two soft NICs on two loopback addresses: every check runs through
        // soft0, and nics.round-robin spreads its parts over both.
        .args(["--nic", "soft0,soft1"])
        .args(args)
        .env("HIPOBJ_SOFT_ADDRS", "127.0.0.1,127.0.0.2")
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::null())
        .output()
        .expect("running hipobj conformance");
    let doc = serde_json::from_slice(&out.stdout).ok();
    (out, doc)
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The result of every check in the document.
fn results(doc: &Value) -> Vec<(String, String)> {
    doc["checks"]
        .as_array()
        .expect("a checks array")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn result_of(doc: &Value, id: &str) -> Option<String> {
    results(doc)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, r)| r)
}

/// No FAIL, exit 0; the ids with each result.
#[track_caller]
fn assert_no_fail(out: &Output, doc: Option<&Value>) -> Vec<(String, String)> {
    let doc = doc.unwrap_or_else(|| panic!("no JSON document: {}", describe(out)));
    let r = results(doc);
    let failed: Vec<_> = r.iter().filter(|(_, v)| v == "FAIL").collect();
    assert!(failed.is_empty(), "FAIL: {failed:?}\n{}", describe(out));
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    r
}

/// The test server started (and restarted) by a script on a fixed port,
/// so that the suite's `--restart-cmd` can restart it; stopped on drop.
struct Restartable {
    dir: tempfile::TempDir,
    url: String,
}

impl Restartable {
    fn script(&self) -> PathBuf {
        self.dir.path().join("restart.sh")
    }

    fn start(bin: &Path, creds: &Path) -> Restartable {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let script = format!(
            r#"#!/usr/bin/env bash
# Stops the test server whose pid is in {d}/pid (if any), starts it again on
# port {port}, and returns once it serves.
set -u
cd {d}
if [ -f pid ]; then
    kill "$(cat pid)" 2>/dev/null
    for _ in $(seq 1 600); do
        (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null || break
        sleep 0.05
    done
fi
rm -f out
"{bin}" {port} --credentials-file "{creds}" >out 2>err </dev/null &
echo $! >pid
for _ in $(seq 1 600); do
    grep -q listening out 2>/dev/null && exit 0
    kill -0 "$(cat pid)" 2>/dev/null || break
    sleep 0.05
done
cat err >&2
exit 1
"#,
            d = dir.path().display(),
            bin = bin.display(),
            creds = creds.display(),
        );
        std::fs::write(dir.path().join("restart.sh"), script).unwrap();
        let r = Restartable {
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        let st = Command::new("bash").arg(r.script()).status().unwrap();
        assert!(st.success(), "the test server did not start");
        r
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

#[test]
fn every_check_passes_or_skips_against_the_test_server() {
    let alt = Tenant::named("conformance-alt");
    let creds = hipobj_testkit::CredentialsFile::new(std::slice::from_ref(&alt));
    let server = Restartable::start(&workspace_bin("hipobj-test-server"), creds.path());
    let restart = format!("bash {}", server.script().display());
    let (out, doc) = conformance(
        &server.url,
        (AK, SK),
        &[
            "--restart-cmd",
            &restart,
            "--alt-access-key",
            &alt.access_key,
            "--alt-secret-key",
            &alt.secret_key,
        ],
    );
    let r = assert_no_fail(&out, doc.as_ref());
    // The reference peer serves every dialect: nothing is skipped there
    // but the busy check, which needs one data-phase slot
    // (the_v2_dialect_passes_against_the_test_server runs it so).
    let skipped: Vec<_> = r
        .iter()
        .filter(|(id, v)| v != "PASS" && id != "v2.status.busy.409")
        .collect();
    assert!(
        skipped.is_empty(),
        "not PASS: {skipped:?}\n{}",
        describe(&out)
    );
    for id in [
        "transfer.1gib",
        "rehandshake.after-restart",
        "status.other-key.403",
        "dialect.cuobject.get",
        "nics.round-robin",
    ] {
        assert!(r.iter().any(|(i, _)| i == id), "{id} did not run");
    }
}

#[test]
fn each_tampering_mode_makes_its_check_fail() {
    let listed = Command::new(proxy_bin()).arg("--list").output().unwrap();
    let listed: Vec<(String, String)> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect();
    let want: Vec<(String, String)> = MODES
        .iter()
        .map(|(m, c)| (m.to_string(), c.to_string()))
        .collect();
    assert_eq!(listed, want, "tamper-proxy --list and this table disagree");

    let server = hipobj_testkit::test_server(&workspace_bin("hipobj-test-server"), &["0"]);
    // The suite passes through the proxy when it breaks nothing that is run.
    for (mode, check) in MODES {
        let mut cmd = Command::new(proxy_bin());
        cmd.args(["--upstream", &server.url, "--mode", mode])
            .stdin(Stdio::null());
        let proxy = ServerProc::start_announcing(cmd);
        let (out, doc) = conformance(&proxy.url, (AK, SK), &["--only", check]);
        let doc = doc.unwrap_or_else(|| panic!("{mode}: no JSON: {}", describe(&out)));
        assert_eq!(
            result_of(&doc, check).as_deref(),
            Some("FAIL"),
            "{mode} must make {check} FAIL\n{}",
            describe(&out)
        );
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", describe(&out));
        drop(proxy);
    }
}

#[test]
fn the_checks_tampering_modes_break_pass_without_the_proxy() {
    let server = hipobj_testkit::test_server(&workspace_bin("hipobj-test-server"), &["0"]);
    let only: Vec<&str> = MODES.iter().map(|(_, c)| *c).collect();
    let (out, doc) = conformance(&server.url, (AK, SK), &["--only", &only.join(",")]);
    let r = assert_no_fail(&out, doc.as_ref());
    assert_eq!(r.len(), MODES.len(), "{r:?}");
    assert!(r.iter().all(|(_, v)| v == "PASS"), "{r:?}");
}

/// The v2 dialect against a test server with one data-phase slot: every
/// check PASSes (busy included), none SKIPs; with v2 turned off every one
/// SKIPs.
#[test]
fn the_v2_dialect_passes_against_the_test_server() {
    let server = hipobj_testkit::test_server(
        &workspace_bin("hipobj-test-server"),
        &["0", "--rc-v2-ready-slots", "1"],
    );
    let (out, doc) = conformance(&server.url, (AK, SK), &["--dialect", "v2", "--only", "v2"]);
    let r = assert_no_fail(&out, doc.as_ref());
    assert_eq!(r.len(), 9, "{r:?}");
    assert!(
        r.iter().all(|(_, v)| v == "PASS"),
        "{r:?}\n{}",
        describe(&out)
    );
    drop(server);
    let off =
        hipobj_testkit::test_server(&workspace_bin("hipobj-test-server"), &["0", "--no-rc-v2"]);
    let (out, doc) = conformance(&off.url, (AK, SK), &["--dialect", "v2", "--only", "v2"]);
    let r = assert_no_fail(&out, doc.as_ref());
    assert!(r.iter().all(|(_, v)| v == "SKIP"), "{r:?}");
}

#[test]
fn a_server_without_rdma_exits_3() {
    let plain = PlainS3::start();
    let (out, _) = conformance(&plain.url, (AK, SK), &["--only", "get.whole"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no x-amz-rdma-reply"),
        "{}",
        describe(&out)
    );
}

#[test]
fn bad_arguments_exit_2() {
    let (out, _) = conformance("http://127.0.0.1:9", (AK, SK), &["--only", "no.such.check"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let (out, _) = conformance("http://127.0.0.1:9", (AK, SK), &["--dialect", "xyz"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn every_check_passes_or_skips_through_the_gateway_in_front_of_the_store() {
    let Some((endpoint, ak, sk)) = external_store() else {
        eprintln!("skipped: no HIPOBJ_TEST_S3_ENDPOINT (set by .ci/run, which starts Ceph RGW)");
        return;
    };
    let gw = hipobj_testkit::gateway(&workspace_bin("hipobj-gateway"), &endpoint, &ak, &sk);
    let (out, doc) = conformance(&gw.url, (AK, SK), &[]);
    let r = assert_no_fail(&out, doc.as_ref());
    assert!(
        r.iter().any(|(id, v)| id == "transfer.1gib" && v == "PASS"),
        "the 1 GiB check must run here too\n{}",
        describe(&out)
    );
    // s3s-fs 0.14.1 ignores partNumber in GetObject (the whole object,
    // 200): the part check is SKIP there, the rest PASS.
    for (id, v) in &r {
        let want = match id.as_str() {
            "get.part.206"
            | "status.other-key.403"
            | "rehandshake.after-restart"
            | "v2.status.busy.409" => "SKIP",
            _ => "PASS",
        };
        assert_eq!(v, want, "{id}\n{}", describe(&out));
    }
}

/// `hipobj bench` through the gateway in front of the separately started
/// store (Ceph RGW in CI, or s3s-fs): every PUT and GET of each
/// size on both paths succeeds, the RDMA path without falling back (the
/// bench requires RDMA there), and the bytes it counts are the bytes it
/// asked for.
#[test]
fn bench_runs_through_the_gateway_in_front_of_the_store() {
    let Some((endpoint, ak, sk)) = external_store() else {
        eprintln!("skipped: no HIPOBJ_TEST_S3_ENDPOINT (set by .ci/run, which starts Ceph RGW)");
        return;
    };
    let gw = hipobj_testkit::gateway(&workspace_bin("hipobj-gateway"), &endpoint, &ak, &sk);
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(workspace_bin("hipobj"))
        .args(["bench", "--endpoint", &gw.url, "--json"])
        .args(["--access-key", AK, "--secret-key", SK])
        .args([
            "--sizes",
            "4KiB,1MiB,16MiB",
            "--concurrency",
            "2",
            "--count",
            "4",
        ])
        .args(["--bucket", "bench-through-gateway"])
        .env("HOME", home.path())
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::null())
        .output()
        .expect("running hipobj bench");
    assert!(out.status.success(), "{}", describe(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rows = doc["results"].as_array().expect("a results array");
    assert_eq!(rows.len(), 12, "{}", describe(&out));
    for size in [4u64 << 10, 1 << 20, 16 << 20] {
        for op in ["put", "get"] {
            for path in ["rdma", "http"] {
                let r = rows
                    .iter()
                    .find(|r| r["size"] == size && r["op"] == op && r["path"] == path)
                    .unwrap_or_else(|| panic!("no row {size} {op} {path}\n{}", describe(&out)));
                assert_eq!(r["ops"], 4, "{r}");
                assert_eq!(r["errors"], 0, "{r}");
                assert_eq!(r["bytes"], 4 * size, "{r}");
            }
        }
    }
}
