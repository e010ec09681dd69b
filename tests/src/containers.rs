//! Containers through the plain `docker` CLI: the images of `docker/` (made
//! by `scripts/container-images`, tagged `hipobj-NAME:local`), a bridge
//! network of the test's own with a subnet it picks, and containers with
//! fixed addresses on it, each removed (`docker rm -f`) when dropped.
//!
//! The CLI rather than testcontainers: the test needs containers that talk
//! to each other on a user-defined network at fixed addresses (the software
//! RDMA provider's devices are bound to them), health checks of the images'
//! own, and nothing published but one port on 127.0.0.1; and it must work
//! with an engine started with `--iptables=false --ip-masq=false` (no NAT:
//! nothing leaves the host, the containers reach each other directly).

use std::io::{Read as _, Write as _};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{docker_or_skip, REQUIRE_DOCKER};

/// What a finished `docker` command said.
#[derive(Debug)]
pub struct DockerOutput {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl DockerOutput {
    /// Both streams, for messages.
    pub fn both(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `docker ARGS` (the CLI on `PATH`, as `docker info` is asked),
/// given at most `limit`; Err when it cannot be run or runs past the limit
/// (it is killed).
pub fn docker_with_limit(args: &[&str], limit: Duration) -> Result<DockerOutput, String> {
    let mut child = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the docker CLI cannot be run: {e}"))?;
    // Read both streams while it runs (a full pipe would stall it).
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`docker {}` ran past {} s",
                    args.join(" "),
                    limit.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for `docker {}`: {e}", args.join(" "))),
        }
    };
    Ok(DockerOutput {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

/// `docker ARGS`, given at most two minutes, which must succeed: its
/// standard output, trimmed. Panics with what it said otherwise.
#[track_caller]
pub fn docker(args: &[&str]) -> String {
    match docker_with_limit(args, Duration::from_secs(120)) {
        Ok(o) if o.status.success() => o.stdout.trim().to_string(),
        Ok(o) => panic!(
            "`docker {}` failed ({}): {}",
            args.join(" "),
            o.status,
            o.both()
        ),
        Err(e) => panic!("{e}"),
    }
}

/// Whether the engine has `image` (`docker image inspect`).
pub fn has_image(image: &str) -> bool {
    docker_with_limit(&["image", "inspect", image], Duration::from_secs(30))
        .is_ok_and(|o| o.status.success())
}

/// True when a Docker engine answers and has every one of `images` (the
/// images of `docker/` that `scripts/container-images` makes); otherwise
/// prints why `test` is skipped and returns false, or panics when
/// `REQUIRE_DOCKER=1`.
pub fn images_or_skip(test: &str, images: &[&str]) -> bool {
    if !docker_or_skip(test) {
        return false;
    }
    let missing: Vec<&str> = images.iter().copied().filter(|i| !has_image(i)).collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "the Docker engine lacks {} (scripts/container-images makes them)",
        missing.join(", ")
    );
    if std::env::var(REQUIRE_DOCKER).is_ok_and(|v| v.trim() == "1") {
        panic!("{test}: {REQUIRE_DOCKER}=1 and {why}");
    }
    // One write: the tests of a binary run in parallel.
    let line = format!("{test}: skipped: {why}; {REQUIRE_DOCKER}=1 makes this a failure\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    false
}

/// A name no other run on this engine uses: `hipobj-e2e-PID-what`.
pub fn unique_name(what: &str) -> String {
    format!("hipobj-e2e-{}-{what}", std::process::id())
}

/// A bridge network of the test's own with a /24 subnet it chose (so that
/// containers can be given fixed addresses), removed when dropped.
#[derive(Debug)]
pub struct Network {
    /// Its name.
    pub name: String,
    /// The first three octets of its subnet (`172.28.N`).
    pub prefix: String,
}

impl Network {
    /// Creates `name` on the first free subnet among `172.28.N.0/24` for a
    /// few N (the engine refuses one that overlaps a network it has).
    pub fn create(name: &str) -> Network {
        let _ = docker_with_limit(&["network", "rm", name], Duration::from_secs(30));
        let start = (std::process::id() % 150) + 100;
        let mut last = String::new();
        for i in 0..24 {
            let prefix = format!("172.28.{}", 100 + (start + i * 7) % 150);
            let subnet = format!("{prefix}.0/24");
            match docker_with_limit(
                &[
                    "network", "create", "--driver", "bridge", "--subnet", &subnet, name,
                ],
                Duration::from_secs(60),
            ) {
                Ok(o) if o.status.success() => {
                    return Network {
                        name: name.to_string(),
                        prefix,
                    }
                }
                Ok(o) => last = o.both(),
                Err(e) => last = e,
            }
        }
        panic!("no subnet 172.28.N.0/24 was free for network {name}: {last}");
    }

    /// The address `.host` on this network's subnet.
    pub fn addr(&self, host: u8) -> String {
        format!("{}.{host}", self.prefix)
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let _ = docker_with_limit(&["network", "rm", &self.name], Duration::from_secs(60));
    }
}

/// A container started with `docker run -d`, removed (`docker rm -f`) when
/// dropped; its log is printed first when the test is failing.
#[derive(Debug)]
pub struct Container {
    /// Its name.
    pub name: String,
}

impl Container {
    /// `docker run -d --name NAME ARGS` (the image and its arguments last
    /// in `args`).
    #[track_caller]
    pub fn run(name: &str, args: &[&str]) -> Container {
        let _ = docker_with_limit(&["rm", "-f", name], Duration::from_secs(60));
        let mut all = vec!["run", "-d", "--name", name];
        all.extend_from_slice(args);
        docker(&all);
        Container {
            name: name.to_string(),
        }
    }

    /// Its log (`docker logs`, both streams), for messages.
    pub fn logs(&self) -> String {
        match docker_with_limit(&["logs", &self.name], Duration::from_secs(30)) {
            Ok(o) => o.both(),
            Err(e) => e,
        }
    }

    /// `docker inspect --format FORMAT` of it.
    pub fn inspect(&self, format: &str) -> String {
        docker(&["inspect", "--format", format, &self.name])
    }

    /// Waits until `ready` says so (asked every 250 ms, at most `limit`),
    /// failing at once with the log when the container stops.
    #[track_caller]
    pub fn wait_until(&self, what: &str, limit: Duration, ready: impl Fn(&Container) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if ready(self) {
                return;
            }
            let state = self.inspect("{{.State.Status}} {{.State.ExitCode}}");
            assert!(
                state.starts_with("running"),
                "{}: stopped ({state}) before {what}; its log:\n{}",
                self.name,
                self.logs()
            );
            assert!(
                Instant::now() < deadline,
                "{}: not {what} within {} s; its log:\n{}",
                self.name,
                limit.as_secs(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until its image's HEALTHCHECK command succeeds when run in it
    /// (`docker exec NAME CMD`: the engine's own health status is only
    /// checked every interval).
    #[track_caller]
    pub fn wait_healthy(&self, check: &[&str], limit: Duration) {
        self.wait_until("healthy", limit, |c| {
            let mut args = vec!["exec", c.name.as_str()];
            args.extend_from_slice(check);
            docker_with_limit(&args, Duration::from_secs(30)).is_ok_and(|o| o.status.success())
        });
    }

    /// The host port that its `port` (TCP) is published on.
    pub fn host_port(&self, port: u16) -> u16 {
        let out = docker(&["port", &self.name, &format!("{port}/tcp")]);
        out.lines()
            .filter_map(|l| l.rsplit_once(':'))
            .find_map(|(_, p)| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: port {port} is not published: {out}", self.name))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = format!(
                "---- log of container {} ----\n{}\n",
                self.name,
                self.logs()
            );
            let _ = std::io::stderr().write_all(log.as_bytes());
        }
        let _ = docker_with_limit(&["rm", "-f", &self.name], Duration::from_secs(60));
    }
}
