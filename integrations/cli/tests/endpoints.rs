//! `hipobj` given several endpoints (`--endpoint a,b`, `AWS_ENDPOINT_URL`,
//! a profile's `endpoint_url`): two `hipobj-gateway` processes in front of
//! one s3s-fs (served in this process); `cp` by RDMA survives the death
//! (SIGKILL) of the gateway it uses, `ls` passes over a dead first
//! endpoint, and a malformed list is a usage error naming where it came
//! from.

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use hipobj_testkit::{free_port, workspace_bin, PlainS3, ServerProc, AK, SK};

fn gateway(upstream: &str) -> ServerProc {
    hipobj_testkit::gateway(&workspace_bin("hipobj-gateway"), upstream, AK, SK)
}

/// `hipobj` with the test credentials in the environment, a home without
/// AWS files, `AWS_ENDPOINT_URL` when given, and nothing else of the
/// test's environment.
fn hipobj(endpoint_env: Option<&str>, home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipobj"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AWS_ACCESS_KEY_ID", AK)
        .env("AWS_SECRET_ACCESS_KEY", SK)
        .env("RUST_LOG", "warn");
    if let Some(e) = endpoint_env {
        cmd.env("AWS_ENDPOINT_URL", e);
    }
    cmd.args(args).output().expect("run hipobj")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The gateway's `/metrics`; empty when it does not answer.
fn metrics(url: &str) -> String {
    let Ok(mut s) = std::net::TcpStream::connect(url.trim_start_matches("http://")) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Whether an RDMA transfer is under way through the gateway (bytes moved
/// by the handshake flow, or a hipobj-rc-v2 data phase).
fn busy(url: &str) -> bool {
    metrics(url).lines().any(|l| {
        (l.starts_with("hipobj_rdma_bytes_total{") || l.starts_with("hipobj_rc_v2_transfers"))
            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) > Some(0.0)
    })
}

/// SIGKILLs `pid` (a gateway of this test) once it is busy; whether it did.
fn kill_when_busy(url: String, pid: u32) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if busy(&url) {
                return Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    })
}

fn write_pattern(path: &Path, len: usize, seed: u64) {
    let mut v = Vec::with_capacity(len + 8);
    let mut x = seed | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    std::fs::write(path, v).unwrap();
}

#[track_caller]
fn assert_same_file(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

#[test]
fn cp_moves_on_when_its_gateway_dies() {
    let store = PlainS3::start();
    let mut a = gateway(&store.url);
    let b = gateway(&store.url);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let list = format!("{},{}", a.url, b.url);
    ok(hipobj(Some(&list), home, &["mb", "s3://ep-test"]));

    // Up: 40 MiB in 5 MiB parts by RDMA through A, which dies mid-way.
    let src = home.join("big.bin");
    write_pattern(&src, (40 << 20) + 11, 3);
    let killer = kill_when_busy(a.url.clone(), a.pid());
    let up = hipobj(
        None,
        home,
        &[
            "cp",
            src.to_str().unwrap(),
            "s3://ep-test/big.bin",
            "--endpoint",
            &list,
            "--part-size",
            "5MiB",
            "--require-rdma",
        ],
    );
    assert!(killer.join().unwrap(), "gateway A was never busy");
    let up = ok(up);
    assert!(up.trim_end().ends_with("path: rdma"), "{up}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!a.alive());
    // B took over: it served RDMA requests of the copy.
    let m = metrics(&b.url);
    assert!(
        m.lines().any(|l| l.starts_with("hipobj_requests_total{")
            && l.contains("path=\"rdma\"")
            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) > Some(0.0)),
        "B served no RDMA request: {m}"
    );
    assert_same_file(&src, &store.object_file("ep-test", "big.bin"));

    // Down, with A (dead) first in AWS_ENDPOINT_URL.
    let back = home.join("back.bin");
    let down = ok(hipobj(
        Some(&list),
        home,
        &[
            "cp",
            "s3://ep-test/big.bin",
            back.to_str().unwrap(),
            "--part-size",
            "5MiB",
            "--require-rdma",
        ],
    ));
    assert!(down.trim_end().ends_with("path: rdma"), "{down}");
    assert_same_file(&src, &back);

    // ls from a profile's endpoint_url with a dead endpoint first.
    let dead = format!("http://127.0.0.1:{}", free_port());
    std::fs::create_dir(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/config"),
        format!("[default]\nendpoint_url = {dead}, {}\n", b.url),
    )
    .unwrap();
    let listed = ok(hipobj(None, home, &["ls", "s3://ep-test"]));
    assert!(listed.contains("big.bin"), "{listed}");
}

#[test]
fn a_malformed_endpoint_list_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let out = hipobj(
        None,
        home,
        &["ls", "--endpoint", "http://127.0.0.1:1,https://127.0.0.1:2"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("--endpoint") && err.contains("https"), "{err}");
    let out = hipobj(Some("http://127.0.0.1:1,"), home, &["ls"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("AWS_ENDPOINT_URL") && err.contains("empty entry"),
        "{err}"
    );
}
