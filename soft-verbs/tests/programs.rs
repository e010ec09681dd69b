//! Programs nobody here wrote, unmodified, on soft-verbs: Debian's
//! `ibverbs-utils` (`ibv_devices`, `ibv_devinfo`, `ibv_rc_pingpong`) and
//! `perftest` (`ib_{write,read,send}_{bw,lat}`), as two processes on this
//! host talking over the soft provider. Each must complete; the checks are
//! on what it printed (bytes validated by pingpong, result tables, no
//! error), never on its speed.
//!
//! `.ci/run` installs the programs; a machine without them fails here with
//! the package to install.

use hipobj_soft_verbs::testing::library_dir;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The device soft-verbs lists first (HIPOBJ_SOFT_ADDRS unset: 127.0.0.1).
const DEVICE: &str = "hipobj_soft0";

/// Whether `name` (from Debian's `package`) is installed. Without it a
/// test prints that it was skipped, unless `REQUIRE_IBVERBS_PROGRAMS` is
/// set (`.ci/run` installs the programs and sets it).
fn installed(name: &str, package: &str) -> bool {
    if Path::new("/usr/bin").join(name).exists() {
        return true;
    }
    assert!(
        std::env::var_os("REQUIRE_IBVERBS_PROGRAMS").is_none_or(|v| v.is_empty()),
        "{name} is not installed (apt-get install {package}), and REQUIRE_IBVERBS_PROGRAMS is set"
    );
    println!(
        "SKIPPED: {name} is not installed (apt-get install {package}; \
         REQUIRE_IBVERBS_PROGRAMS=1 makes this a failure)"
    );
    false
}

fn program(name: &str, package: &str) -> Command {
    let path = Path::new("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{name} is not installed: apt-get install {package} (.ci/run does)"
    );
    let mut c = Command::new(path);
    c.env("LD_LIBRARY_PATH", library_dir())
        .env_remove("HIPOBJ_SOFT_ADDRS")
        .env("HIPOBJ_SOFT_TIMEOUT_SCALE", "4")
        .stdin(Stdio::null());
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits for `child` to exit (killing it after `within`).
fn wait(mut child: Child, within: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("timed out after {within:?}:\n{}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a server/client pair: the server with `server_args`, then the
/// client with the same and the server's address, retried while the
/// server is not yet listening. Both must exit 0; returns their outputs.
fn pair(name: &str, package: &str, args: &[&str], port_flag: &str) -> (String, String) {
    pair_env(name, package, args, port_flag, &[], &[])
}

/// As [`pair`], with `server_env` and `client_env` set in each side's
/// environment.
fn pair_env(
    name: &str,
    package: &str,
    args: &[&str],
    port_flag: &str,
    server_env: &[(&str, &str)],
    client_env: &[(&str, &str)],
) -> (String, String) {
    let port = free_port().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([port_flag, &port]);
    let server = program(name, package)
        .envs(server_env.iter().copied())
        .args(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let start = Instant::now();
    let client = loop {
        let c = program(name, package)
            .envs(client_env.iter().copied())
            .args(&all)
            .arg("127.0.0.1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the client");
        let o = wait(c, Duration::from_secs(60));
        let t = text(&o);
        let refused = !o.status.success()
            && (t.contains("Couldn't connect") || t.contains("Unable to open file descriptor"));
        if refused && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        break o;
    };
    let server = wait(server, Duration::from_secs(60));
    let (s, c) = (text(&server), text(&client));
    assert!(
        server.status.success() && client.status.success(),
        "{name} {args:?} failed\n--- server ({:?}):\n{s}\n--- client ({:?}):\n{c}",
        server.status,
        client.status
    );
    for out in [&s, &c] {
        for bad in ["Failed", "failed", "Couldn't", "error", "Error"] {
            assert!(
                !out.contains(bad),
                "{name} {args:?} printed {bad:?}:\n{out}"
            );
        }
    }
    (s, c)
}

#[test]
fn ibv_devices_lists_the_soft_device() {
    if !installed("ibv_devices", "ibverbs-utils") {
        return;
    }
    let o = program("ibv_devices", "ibverbs-utils").output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let line = t
        .lines()
        .find(|l| l.contains(DEVICE))
        .unwrap_or_else(|| panic!("{DEVICE} not listed:\n{t}"));
    // node GUID 02:00:<a>:ff:fe:<b>:<c>:<d> of 127.0.0.1
    assert!(line.contains("02007ffffe000001"), "{line}");
}

#[test]
fn ibv_devinfo_shows_an_active_roce_v2_port() {
    if !installed("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let o = program("ibv_devinfo", "ibverbs-utils")
        .args(["-v", "-d", DEVICE])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "hca_id:\thipobj_soft0",
        "fw_ver:\t\t\t\thipobj-soft 1.0",
        "state:\t\t\tPORT_ACTIVE (4)",
        "active_mtu:\t\t4096 (5)",
        "link_layer:\t\tEthernet",
        "max_qp_rd_atom:\t\t\t16",
        "atomic_cap:\t\t\tATOMIC_NONE (0)",
        "GID[  0]:\t\t::ffff:127.0.0.1, RoCE v2",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    // A device that is not there is an error, not a crash.
    let o = program("ibv_devinfo", "ibverbs-utils")
        .args(["-d", "mlx5_0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("IB device 'mlx5_0' wasn't found"),
        "{}",
        text(&o)
    );
}

fn pingpong(extra: &[&str]) {
    if !installed("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    let mut args = vec!["-d", DEVICE, "-g", "0", "-n", "200", "-s", "4096", "-c"];
    args.extend_from_slice(extra);
    let (s, c) = pair("ibv_rc_pingpong", "ibverbs-utils", &args, "-p");
    for out in [&s, &c] {
        assert!(out.contains("1638400 bytes in"), "{out}");
        assert!(out.contains("200 iters in"), "{out}");
        assert!(out.contains("GID ::ffff:127.0.0.1"), "{out}");
    }
}

/// `-c` makes each side check every byte it receives.
#[test]
fn ibv_rc_pingpong_validates_every_buffer() {
    pingpong(&[]);
}

/// `-e` sleeps on the completion channel (`ibv_req_notify_cq`,
/// `ibv_get_cq_event`, `ibv_ack_cq_events`) instead of polling.
#[test]
fn ibv_rc_pingpong_with_completion_events() {
    pingpong(&["-e"]);
}

/// `-P` posts in the old way, `-t` (ibv_rc_pingpong's depth) with a deep
/// receive queue, 1 byte messages.
#[test]
fn ibv_rc_pingpong_small_messages_deep_queue() {
    if !installed("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    let args = [
        "-d", DEVICE, "-g", "0", "-n", "500", "-s", "1", "-r", "64", "-c",
    ];
    let (s, c) = pair("ibv_rc_pingpong", "ibverbs-utils", &args, "-p");
    for out in [&s, &c] {
        assert!(out.contains("500 iters in"), "{out}");
    }
}

/// Two devices on two addresses, one per process (as two hosts would
/// be): each side's GID is its own address, and the bytes still check.
#[test]
fn ibv_rc_pingpong_between_two_addresses() {
    if !installed("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    let args = ["-d", DEVICE, "-g", "0", "-n", "100", "-s", "65536", "-c"];
    let (s, c) = pair_env(
        "ibv_rc_pingpong",
        "ibverbs-utils",
        &args,
        "-p",
        &[("HIPOBJ_SOFT_ADDRS", "127.0.0.2")],
        &[("HIPOBJ_SOFT_ADDRS", "127.0.0.1")],
    );
    assert!(
        s.contains("local address:  LID 0x0000") && s.contains("GID ::ffff:127.0.0.2"),
        "{s}"
    );
    assert!(s.contains("GID ::ffff:127.0.0.1"), "{s}");
    assert!(c.contains("100 iters in"), "{c}");
}

/// A perftest result row for `size`: its first column is the size.
fn result_row(out: &str, size: &str) -> bool {
    out.lines()
        .any(|l| l.split_whitespace().next() == Some(size))
}

fn perftest(name: &str, extra: &[&str], size: &str) {
    if !installed(name, "perftest") {
        return;
    }
    let mut args = vec!["-d", DEVICE, "-x", "0", "-s", size];
    args.extend_from_slice(extra);
    let (s, c) = pair(name, "perftest", &args, "-p");
    assert!(
        result_row(&c, size),
        "{name}: no result row for {size}:\n{c}"
    );
    for out in [&s, &c] {
        assert!(out.contains("Link type       : Ethernet"), "{out}");
        assert!(out.contains("Connection type : RC"), "{out}");
    }
}

#[test]
fn ib_write_bw_1mib() {
    perftest("ib_write_bw", &["-n", "200"], "1048576");
}

#[test]
fn ib_read_bw_1mib() {
    perftest("ib_read_bw", &["-n", "100"], "1048576");
}

#[test]
fn ib_send_bw_1mib() {
    perftest("ib_send_bw", &["-n", "100"], "1048576");
}

#[test]
fn ib_write_lat_8b_inline() {
    perftest("ib_write_lat", &["-n", "500"], "8");
}

#[test]
fn ib_read_lat_4k() {
    perftest("ib_read_lat", &["-n", "300"], "4096");
}

#[test]
fn ib_send_lat_8b_inline() {
    perftest("ib_send_lat", &["-n", "500"], "8");
}

/// `HIPOBJ_SOFT_VERBS_CALLS` makes a program append, at exit, each entry
/// it called and how often: inline entries (the context's tables) too.
#[test]
fn a_program_records_the_verbs_it_called() {
    if !installed("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("soft-verbs-calls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("calls");
    let o = program("ibv_devinfo", "ibverbs-utils")
        .env("HIPOBJ_SOFT_VERBS_CALLS", &file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let calls = std::fs::read_to_string(&file).unwrap();
    for want in [
        "ibv_get_device_list 1\n",
        "ibv_open_device 1\n",
        "verbs_context.query_port 1\n",
        "ibv_close_device 1\n",
    ] {
        assert!(calls.contains(want), "missing {want:?} in:\n{calls}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
