//! The S3 commands of the real `hipobj` binary: `cp` both ways by RDMA
//! against `hipobj-test-server` (compared with `cmp`), `ls`/`rm`/`mb`, the
//! AWS config files, exit status 3 for `--require-rdma` against a server
//! without RDMA (s3s-fs), `bench --json`, and `hipobj demo` exactly as the
//! README shows it.

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::{Command, Output};

use hipobj_testkit::{workspace_bin, PlainS3, ServerProc, AK, SK};
use serde_json::Value;

/// `hipobj-test-server 0` on the software provider, with its default
/// staging pool (see `cp_with_a_contended_staging_pool` for why), and
/// `extra` arguments.
fn test_server(extra: &[&str]) -> ServerProc {
    let mut args = vec!["0", "--rdma-device", "soft0"];
    args.extend_from_slice(extra);
    hipobj_testkit::test_server(&workspace_bin("hipobj-test-server"), &args)
}

/// `hipobj` with the endpoint and test credentials in the environment,
/// a home without AWS files, and nothing else of the test's environment.
fn hipobj_cmd(url: &str, home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipobj"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AWS_ENDPOINT_URL", url)
        .env("AWS_ACCESS_KEY_ID", AK)
        .env("AWS_SECRET_ACCESS_KEY", SK)
        .env("RUST_LOG", "warn");
    cmd
}

/// Runs [`hipobj_cmd`] with `args`.
fn hipobj_at(url: &str, home: &Path, args: &[&str]) -> Output {
    hipobj_cmd(url, home)
        .args(args)
        .output()
        .expect("run hipobj")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts success and returns stdout.
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

/// Deterministic, incompressible bytes.
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

/// `cmp A B`, the real command.
#[track_caller]
fn assert_cmp(a: &Path, b: &Path) {
    let out = Command::new("cmp").arg(a).arg(b).output().expect("run cmp");
    assert!(
        out.status.success(),
        "cmp {} {}: {}{}",
        a.display(),
        b.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn cp_a_100_mib_file_both_ways_by_rdma() {
    let server = test_server(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let src = home.join("big.bin");
    write_pattern(&src, 100 << 20, 1);
    let h = |args: &[&str]| hipobj_at(&server.url, home, args);
    ok(h(&["mb", "s3://cp-test"]));

    let s = src.to_str().unwrap();
    let up = ok(h(&[
        "cp",
        s,
        "s3://cp-test/big.bin",
        "--part-size",
        "32MiB",
        "--require-rdma",
    ]));
    assert!(up.contains("104857600 bytes"), "{up}");
    assert!(up.contains("4 parts"), "{up}");
    assert!(up.trim_end().ends_with("path: rdma"), "{up}");

    let back = home.join("back.bin");
    let b = back.to_str().unwrap();
    let down = ok(h(&[
        "cp",
        "s3://cp-test/big.bin",
        b,
        "--part-size",
        "32MiB",
        "--require-rdma",
    ]));
    assert!(down.contains("104857600 bytes"), "{down}");
    assert!(down.contains("4 parts"), "{down}");
    assert!(down.trim_end().ends_with("path: rdma"), "{down}");
    assert_cmp(&src, &back);

    // One buffer for the whole object, into a directory.
    let dir = home.join("dl");
    std::fs::create_dir(&dir).unwrap();
    let one = ok(h(&[
        "cp",
        "s3://cp-test/big.bin",
        dir.to_str().unwrap(),
        "--part-size",
        "128MiB",
        "--require-rdma",
    ]));
    assert!(one.contains("1 part,"), "{one}");
    assert!(one.trim_end().ends_with("path: rdma"), "{one}");
    assert_cmp(&src, &dir.join("big.bin"));
    // Nothing but the copies was left behind.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["big.bin"]);
}

/// The sum of the samples of `name` whose labels include `labels`, from
/// the server's unauthenticated `GET /metrics`.
fn server_metric(url: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            let got: Vec<&str> = rest.trim_end_matches('}').split(',').collect();
            let all = labels
                .iter()
                .all(|(k, v)| got.contains(&format!("{k}=\"{v}\"").as_str()));
            (n == name && all).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// `cp --nic soft0,soft1` against a server on two soft devices (127.0.0.2
/// and 127.0.0.3, as the client's): the parts go round robin, part i
/// through NIC i mod 2, each served by the server's device on its NIC's
/// address. Of 3 parts (5 MiB, 5 MiB, 2 MiB + 3), soft0 moves parts 1 and
/// 3 and soft1 part 2, both ways, exactly, and the copy is byte-exact.
#[test]
fn cp_spreads_the_parts_round_robin_over_two_nics() {
    const ADDRS: &str = "127.0.0.2,127.0.0.3";
    let mut cmd = Command::new(workspace_bin("hipobj-test-server"));
    cmd.args(["0", "--rdma-device", "soft0,soft1"])
        .env("HIPOBJ_SOFT_ADDRS", ADDRS);
    let server = ServerProc::start_announcing(cmd);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let src = home.join("rails.bin");
    let (mib, tail) = (1usize << 20, (2usize << 20) + 3);
    write_pattern(&src, 10 * mib + tail, 7);
    let cp = |protocol: &str, args: &[&str]| {
        let mut all = vec!["cp"];
        all.extend_from_slice(args);
        all.extend_from_slice(&[
            "--nic",
            "soft0,soft1",
            "--part-size",
            "5MiB",
            "--require-rdma",
            "--rdma-protocol",
            protocol,
        ]);
        let out = hipobj_cmd(&server.url, home)
            .args(&all)
            .env("HIPOBJ_SOFT_ADDRS", ADDRS)
            .output()
            .expect("run hipobj");
        ok(out)
    };
    // The metrics below are the handshake flow's (server READs and WRITEs
    // per device).
    let h = |args: &[&str]| cp("handshake", args);
    ok(hipobj_at(&server.url, home, &["mb", "s3://rails"]));
    let up = h(&[src.to_str().unwrap(), "s3://rails/f"]);
    assert!(
        up.contains("3 parts") && up.trim_end().ends_with("path: rdma"),
        "{up}"
    );
    let back = home.join("back.bin");
    let down = h(&["s3://rails/f", back.to_str().unwrap()]);
    assert!(
        down.contains("3 parts") && down.trim_end().ends_with("path: rdma"),
        "{down}"
    );
    assert_cmp(&src, &back);
    let bytes = |device: &str, direction: &str| {
        server_metric(
            &server.url,
            "hipobj_rdma_bytes_total",
            &[("device", device), ("direction", direction)],
        )
    };
    // Upload: READs from the client; download: WRITEs to it.
    assert_eq!(bytes("soft0", "read"), (5 * mib + tail) as f64);
    assert_eq!(bytes("soft1", "read"), (5 * mib) as f64);
    assert_eq!(bytes("soft0", "write"), (5 * mib + tail) as f64);
    assert_eq!(bytes("soft1", "write"), (5 * mib) as f64);

    // The same by hipobj-rc-v2: each part's control requests go from its
    // NIC's address (the server takes a token only from its GID's).
    let up = cp("v2", &[src.to_str().unwrap(), "s3://rails/g"]);
    assert!(
        up.contains("3 parts") && up.trim_end().ends_with("path: rdma"),
        "{up}"
    );
    let back2 = home.join("back2.bin");
    let down = cp("v2", &["s3://rails/g", back2.to_str().unwrap()]);
    assert!(down.trim_end().ends_with("path: rdma"), "{down}");
    assert_cmp(&src, &back2);
}

/// `cp --gpu 1` through CUDA device memory, without a GPU: the client
/// library loads the CUDA stub of the client's tests
/// (`client/tests/stubs/cuda_stub.c`, compiled here) as `libcuda`, with
/// no HIP library, so GPU 1 is the stub's second CUDA device. The stub's
/// "device memory" is host memory it reports as device memory, and it
/// logs every driver call to a file. Each part's buffer is allocated on
/// device 1 with `cuMemAlloc`; the software provider cannot reach device
/// memory (neither dma-buf nor a plain MR), so the library registers a
/// pinned staging buffer for each, as it would for a NIC without peer
/// memory. Up: the file goes to the device by host-to-device copies of
/// exactly its size, and from the device to staging by asynchronous
/// copies of exactly its size before the RDMA READs; down: staging to the
/// device by asynchronous copies, the device to the file by device-to-host
/// copies, each exactly the object's size; byte-exact, by RDMA both ways.
#[test]
fn cp_gpu_moves_the_parts_through_cuda_device_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let stub = home.join("libcuda-stub.so");
    let src_c = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../client/tests/stubs/cuda_stub.c");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&stub)
        .arg(&src_c)
        .status()
        .expect("a C compiler (cc) is needed for this test");
    assert!(cc.success());
    let log = home.join("cuda.log");
    let server = test_server(&[]);
    let (mib, len) = (1usize << 20, (12usize << 20) + 3);
    let src = home.join("gpu.bin");
    write_pattern(&src, len, 11);
    let h = |args: &[&str]| {
        let mut all = vec!["cp"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--gpu", "1", "--part-size", "5MiB", "--require-rdma"]);
        let out = hipobj_cmd(&server.url, home)
            .args(&all)
            .env("HIPOBJ_CUDA_LIBRARY", &stub)
            .env("HIPOBJ_HIP_LIBRARY", "/nonexistent/libamdhip64.so")
            .env("HIPOBJ_CUDA_STUB_LOG", &log)
            .output()
            .expect("run hipobj");
        ok(out)
    };
    ok(hipobj_at(&server.url, home, &["mb", "s3://gpu"]));
    // The bytes the driver copied by `call` (cuMemcpyHtoD, ...HtoDAsync, ...).
    let copied = |call: &str| -> usize {
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(call))
            .map(|l| {
                let n = l.split_whitespace().find_map(|w| w.strip_prefix("n="));
                n.expect("n= in the copy's log line")
                    .parse::<usize>()
                    .unwrap()
            })
            .sum()
    };

    let up = h(&[src.to_str().unwrap(), "s3://gpu/f"]);
    assert!(
        up.contains("3 parts") && up.trim_end().ends_with("path: rdma"),
        "{up}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let alloc = format!("cuMemAlloc size={} dev=1", 5 * mib);
    assert_eq!(calls.matches(&alloc).count(), 3, "{calls}");
    assert_eq!(calls.matches("cuMemHostAlloc").count(), 3, "{calls}");
    assert_eq!(copied("cuMemcpyHtoD"), len, "file to device: {calls}");
    assert_eq!(
        copied("cuMemcpyDtoHAsync"),
        len,
        "device to staging: {calls}"
    );
    assert_eq!(copied("cuMemcpyHtoDAsync"), 0, "{calls}");
    std::fs::remove_file(&log).unwrap();

    let back = home.join("back.bin");
    let down = h(&["s3://gpu/f", back.to_str().unwrap()]);
    assert!(
        down.contains("3 parts") && down.trim_end().ends_with("path: rdma"),
        "{down}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.matches(&alloc).count(), 3, "{calls}");
    assert_eq!(
        copied("cuMemcpyHtoDAsync"),
        len,
        "staging to device: {calls}"
    );
    assert_eq!(copied("cuMemcpyDtoH"), len, "device to file: {calls}");
    assert_eq!(copied("cuMemcpyHtoD"), 0, "{calls}");
    assert_cmp(&src, &back);
}

/// `--addressing-style virtual` against a server with a domain: the bucket
/// travels in the Host, and the objects still move by RDMA.
#[test]
fn cp_and_ls_with_virtual_hosted_addressing() {
    let server = test_server(&["--domain", "127.0.0.1"]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let src = home.join("v.bin");
    write_pattern(&src, 9 << 20, 4);
    let h = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--addressing-style", "virtual"]);
        hipobj_at(&server.url, home, &a)
    };
    ok(h(&["mb", "s3://vhost-test"]));
    let s = src.to_str().unwrap();
    let up = ok(h(&["cp", s, "s3://vhost-test/dir/v.bin", "--require-rdma"]));
    assert!(up.trim_end().ends_with("path: rdma"), "{up}");
    let listed = ok(h(&["ls", "s3://vhost-test/dir/"]));
    assert!(listed.contains("v.bin"), "{listed}");
    let back = home.join("back.bin");
    let down = ok(h(&[
        "cp",
        "s3://vhost-test/dir/v.bin",
        back.to_str().unwrap(),
        "--require-rdma",
    ]));
    assert!(down.trim_end().ends_with("path: rdma"), "{down}");
    assert_cmp(&src, &back);
    // Path-style requests reach the same objects.
    let path_style = ok(hipobj_at(
        &server.url,
        home,
        &["ls", "s3://vhost-test/dir/"],
    ));
    assert!(path_style.contains("v.bin"), "{path_style}");
}

/// A 100 MiB upload in 32 MiB parts, 4 at once, against a test server whose
/// staging pool (8 × 8 MiB) is smaller than the parts in flight.
///
/// Every part must arrive whole: a PUT waiting for a staging buffer must
/// deliver the READs it has in flight, never drop one to free its buffer
/// (which once stored short objects and answered 200).
#[test]
fn cp_with_a_contended_staging_pool() {
    let server = test_server(&["--staging-buffers", "8"]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let src = home.join("big.bin");
    write_pattern(&src, 100 << 20, 2);
    let h = |args: &[&str]| hipobj_at(&server.url, home, args);
    ok(h(&["mb", "s3://contended"]));
    ok(h(&[
        "cp",
        src.to_str().unwrap(),
        "s3://contended/big",
        "--part-size",
        "32MiB",
        "--require-rdma",
    ]));
    let back = home.join("back.bin");
    ok(h(&[
        "cp",
        "s3://contended/big",
        back.to_str().unwrap(),
        "--require-rdma",
    ]));
    assert_cmp(&src, &back);
}

#[test]
fn ls_rm_mb_and_the_aws_config_files() {
    let server = test_server(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let h = |args: &[&str]| hipobj_at(&server.url, home, args);
    let f = home.join("small.txt");
    std::fs::write(&f, b"hello").unwrap();
    let f = f.to_str().unwrap();

    assert_eq!(
        ok(h(&["mb", "s3://ls-test"])).trim(),
        "make_bucket: ls-test"
    );
    let again = h(&["mb", "s3://ls-test"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    ok(h(&["cp", f, "s3://ls-test/dir/a.txt"]));
    ok(h(&["cp", f, "s3://ls-test/dir/sub/b.txt"]));
    // A key ending in / takes the file's name.
    ok(h(&["cp", f, "s3://ls-test/"]));

    let buckets = ok(h(&["ls"]));
    assert!(
        buckets.lines().any(|l| l.ends_with(" ls-test")),
        "{buckets}"
    );
    let top = ok(h(&["ls", "s3://ls-test"]));
    let lines: Vec<_> = top
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .collect();
    assert_eq!(lines.len(), 2, "{top}");
    assert_eq!(lines[0], ["PRE", "dir/"], "{top}");
    assert_eq!(lines[1][1..], ["5", "small.txt"], "{top}");
    let dir = ok(h(&["ls", "s3://ls-test/dir/"]));
    assert!(
        dir.contains(" dir/a.txt") && dir.contains("PRE dir/sub/"),
        "{dir}"
    );
    let all = ok(h(&["ls", "--recursive", "s3://ls-test"]));
    let keys: Vec<_> = all
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(keys, ["dir/a.txt", "dir/sub/b.txt", "small.txt"], "{all}");

    assert_eq!(
        ok(h(&[
            "rm",
            "s3://ls-test/small.txt",
            "s3://ls-test/dir/a.txt"
        ]))
        .trim(),
        "delete: s3://ls-test/small.txt\ndelete: s3://ls-test/dir/a.txt"
    );
    let all = ok(h(&["ls", "-r", "s3://ls-test"]));
    let keys: Vec<_> = all
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(keys, ["dir/sub/b.txt"], "{all}");
    let bad = h(&["rm", "s3://ls-test"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    let bad = h(&["ls", "/not/s3"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));

    // Endpoint, credentials and region from ~/.aws, profile by --profile.
    let aws = home.join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        format!("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[t]\naws_access_key_id = {AK}\naws_secret_access_key = {SK}\n"),
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile t]\nregion = us-east-1\nendpoint_url = {}\n",
            server.url
        ),
    )
    .unwrap();
    let from_files = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hipobj"))
            .args(args)
            .env_clear()
            .env("HOME", home)
            .output()
            .unwrap()
    };
    let listed = ok(from_files(&["ls", "--profile", "t", "s3://ls-test", "-r"]));
    assert!(listed.contains("dir/sub/b.txt"), "{listed}");
    // The default profile's keys are wrong: the server refuses them.
    let refused = from_files(&["ls", "--endpoint", &server.url, "s3://ls-test"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("403"),
        "{}",
        text(&refused.stderr)
    );
    // No endpoint anywhere: a usage error.
    let none = Command::new(env!("CARGO_BIN_EXE_hipobj"))
        .args(["ls"])
        .env_clear()
        .env("HOME", tmp.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no endpoint"),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn require_rdma_without_rdma_exits_with_status_3() {
    let plain = PlainS3::start();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let h = |args: &[&str]| hipobj_at(&plain.url, home, args);
    let src = home.join("f.bin");
    write_pattern(&src, 3 << 20, 3);
    let s = src.to_str().unwrap();
    ok(h(&["mb", "s3://plain"]));

    let out = h(&["cp", s, "s3://plain/f", "--require-rdma"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("RDMA required"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    // Nothing was stored.
    assert!(ok(h(&["ls", "s3://plain"])).trim().is_empty());

    // Without it, the copy falls back to plain HTTP and says so.
    let up = ok(h(&["cp", s, "s3://plain/f"]));
    assert!(up.trim_end().ends_with("path: http"), "{up}");

    let dst = home.join("back.bin");
    let d = dst.to_str().unwrap();
    let out = h(&["cp", "s3://plain/f", d, "--require-rdma"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(!dst.exists());
    let leftovers: Vec<_> = std::fs::read_dir(home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let down = ok(h(&["cp", "s3://plain/f", d]));
    assert!(down.trim_end().ends_with("path: http"), "{down}");
    assert_cmp(&src, &dst);
}

#[test]
fn bench_prints_json_and_a_table() {
    let server = test_server(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let h = |args: &[&str]| hipobj_at(&server.url, tmp.path(), args);
    let pid = server.pid().to_string();
    let out = ok(h(&[
        "bench",
        "--endpoint",
        &server.url,
        "--sizes",
        "4KiB,64KiB",
        "--concurrency",
        "2",
        "--count",
        "4",
        "--json",
        "--server-pid",
        &pid,
    ]));
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["concurrency"], 2);
    assert_eq!(doc["count"], 4);
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "{out}");
    for size in [4096, 65536] {
        for op in ["put", "get"] {
            for path in ["rdma", "http"] {
                let r = rows
                    .iter()
                    .find(|r| r["size"] == size && r["op"] == op && r["path"] == path)
                    .unwrap_or_else(|| panic!("no row {size} {op} {path}: {out}"));
                assert_eq!(r["ops"], 4, "{r}");
                assert_eq!(r["errors"], 0, "{r}");
                assert_eq!(r["bytes"], 4 * size, "{r}");
                assert!(r["throughput_mib_s"].as_f64().unwrap() > 0.0, "{r}");
                assert!(r["p50_ms"].as_f64().unwrap() <= r["p99_ms"].as_f64().unwrap());
                // The CPU both processes used per operation (in clock
                // ticks: a short phase may read 0).
                for who in ["cpu_client_us_per_op", "cpu_server_us_per_op"] {
                    assert!(r[who].as_f64().is_some_and(|v| v >= 0.0), "{who}: {r}");
                }
            }
        }
    }

    // A table of one size: its lines.
    let table_with = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "bench",
            "--sizes",
            "4KiB",
            "--concurrency",
            "1",
            "--duration",
            "200ms",
        ];
        args.extend_from_slice(extra);
        ok(h(&args)).lines().map(str::to_owned).collect()
    };
    let put_then_get = |table: &[String], at: usize| {
        assert!(
            table[at].starts_with("4 KiB") && table[at].contains("PUT"),
            "{table:#?}"
        );
        assert!(
            table[at + 1].starts_with("4 KiB") && table[at + 1].contains("GET"),
            "{table:#?}"
        );
    };
    let lines = table_with(&[]);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines[0].contains("rdma MiB/s") && lines[0].contains("http MiB/s"),
        "{lines:#?}"
    );
    put_then_get(&lines, 1);

    // With the server's pid, a second part: CPU per operation.
    let lines = table_with(&["--server-pid", &pid]);
    assert_eq!(lines.len(), 7, "{lines:#?}");
    put_then_get(&lines, 1);
    assert!(lines[3].starts_with("CPU µs per operation"), "{lines:#?}");
    assert!(
        lines[4].contains("rdma client") && lines[4].contains("http client"),
        "{lines:#?}"
    );
    put_then_get(&lines, 5);

    // A pid that names no process is refused before anything runs.
    let out = h(&["bench", "--sizes", "4KiB", "--server-pid", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--server-pid 0: no such process"),
        "{}",
        text(&out.stderr)
    );
}

/// The README's first command, run as the README shows it (`cargo run` is
/// not usable inside a test: the same arguments go to the built binary).
#[test]
fn demo_as_the_readme_shows_it() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let first = readme
        .lines()
        .skip_while(|l| !l.starts_with("```sh"))
        .nth(1)
        .expect("a first command");
    let cmd = first.split('#').next().unwrap().trim();
    assert_eq!(cmd, "cargo run --release -p hipobj-cli -- demo");
    let args: Vec<&str> = cmd
        .split_once(" -- ")
        .unwrap()
        .1
        .split_whitespace()
        .collect();

    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hipobj"))
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", tmp.path())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let stdout = ok(out);
    for want in [
        "hipobj demo: test server on http://127.0.0.1:",
        "PUT s3://demo/object: 67108864 bytes (64 MiB) from a registered buffer by rdma",
        "GET s3://demo/object: 67108864 bytes into another registered buffer by rdma",
        "bytes match: 67108864 of 67108864",
        "rdma MiB/s",
        "http MiB/s",
        "demo: OK",
    ] {
        assert!(stdout.contains(want), "{want:?} missing from:\n{stdout}");
    }
    // The comparison table: 1 MiB and 64 MiB, PUT and GET, no errors.
    let rows: Vec<_> = stdout
        .lines()
        .filter(|l| l.contains(" PUT ") || l.contains(" GET "))
        .filter(|l| !l.starts_with("PUT") && !l.starts_with("GET"))
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(!stdout.contains("errors:"), "{stdout}");
    // The temporary store is gone.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// A server at its pair limit (`--max-pairs-per-key 1`, the one pair held
/// by another client): `cp` both ways falls back to HTTP and says so; with
/// `--require-rdma` it fails with status 3 and a message naming the
/// capacity refusal.
#[test]
fn cp_falls_back_when_the_server_is_at_capacity() {
    let server = test_server(&["--max-pairs-per-key", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    // The handshake flow's pairs are at their limit (hipobj-rc-v2 holds
    // none: it would move the bytes).
    let h = |args: &[&str]| {
        let mut all = args.to_vec();
        if args[0] == "cp" {
            all.extend_from_slice(&["--rdma-protocol", "handshake"]);
        }
        hipobj_at(&server.url, home, &all)
    };
    ok(h(&["mb", "s3://cap"]));
    // Another client takes the key's one pair and keeps it.
    let lib = hipobj_testkit::client();
    let s3 = hipobj_testkit::S3::new(&server.url);
    hipobj_testkit::handshake(&s3, &lib, "/cap/held");

    let src = home.join("f.bin");
    write_pattern(&src, 3 << 20, 5);
    let s = src.to_str().unwrap();
    let up = ok(h(&["cp", s, "s3://cap/f"]));
    assert!(up.trim_end().ends_with("path: http"), "{up}");
    let dst = home.join("back.bin");
    let d = dst.to_str().unwrap();
    let down = ok(h(&["cp", "s3://cap/f", d]));
    assert!(down.trim_end().ends_with("path: http"), "{down}");
    assert_cmp(&src, &dst);

    for args in [
        ["cp", s, "s3://cap/g", "--require-rdma"],
        ["cp", "s3://cap/f", d, "--require-rdma"],
    ] {
        let out = h(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains("RDMA required")
                && err.contains("refused the RDMA handshake for capacity"),
            "{err}"
        );
    }
    assert_cmp(&src, &dst);
    // The refused upload stored nothing.
    assert_eq!(s3.get_plain("/cap/g").status, 404);
    drop(lib);
}

/// Every worker's key is written before the GET phase, however the
/// operations fall to the workers: `--count` equal to `--concurrency` (and
/// one more) reads no key that was never written.
#[test]
fn bench_with_count_close_to_concurrency_has_no_errors() {
    let server = test_server(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let h = |args: &[&str]| hipobj_at(&server.url, tmp.path(), args);
    for count in ["6", "7"] {
        let out = ok(h(&[
            "bench",
            "--sizes",
            "4KiB",
            "--concurrency",
            "6",
            "--count",
            count,
            "--json",
        ]));
        let doc: Value = serde_json::from_str(&out).expect("one JSON document");
        let rows = doc["results"].as_array().unwrap();
        assert_eq!(rows.len(), 4, "{out}");
        for r in rows {
            assert_eq!(r["errors"], 0, "{r}");
            assert_eq!(r["ops"], count.parse::<u64>().unwrap(), "{r}");
        }
    }
}

/// The safety issue's finding 6, played: a shell loop of `cp
/// --require-rdma` against a server with `--max-pairs-per-key 2` (it was a
/// 503 from the third run on). Each `cp` says goodbye for its pairs before
/// it exits (`x-amz-rdma-goodbye`), so the server holds none between runs;
/// a client that exits without a word is the probe's (the gateway's
/// `a_handshake_at_the_limit_releases_pairs_of_gone_clients_only`).
#[test]
fn a_loop_of_cp_is_not_locked_out_by_the_pairs_of_exited_clients() {
    let server = test_server(&["--max-pairs-per-key", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    // Pairs and goodbyes are the handshake flow's.
    let h = |args: &[&str]| {
        let mut all = args.to_vec();
        if args[0] == "cp" {
            all.extend_from_slice(&["--rdma-protocol", "handshake"]);
        }
        hipobj_at(&server.url, home, &all)
    };
    ok(h(&["mb", "s3://loop"]));
    let src = home.join("f.bin");
    write_pattern(&src, 256 << 10, 9);
    let s = src.to_str().unwrap();
    let s3 = hipobj_testkit::S3::new(&server.url);
    for i in 0..6 {
        let key = format!("s3://loop/f{i}");
        let up = ok(h(&["cp", s, &key, "--require-rdma"]));
        assert!(up.trim_end().ends_with("path: rdma"), "run {i}: {up}");
        let dst = home.join(format!("back{i}.bin"));
        let down = ok(h(&["cp", &key, dst.to_str().unwrap(), "--require-rdma"]));
        assert!(down.trim_end().ends_with("path: rdma"), "run {i}: {down}");
        assert_cmp(&src, &dst);
        assert_eq!(
            s3.metric("hipobj_rdma_pairs", &[]),
            0.0,
            "run {i}: pairs left"
        );
    }
    assert!(s3.metric("hipobj_rdma_pairs_released_total", &[("reason", "goodbye")]) >= 12.0);
}
