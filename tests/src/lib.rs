//! End-to-end tests in containers: `hipobj-gateway` in front of a real MinIO
//! started with testcontainers, and the images of `docker/` (gateway, Ceph
//! RGW, the `hipobj` command) on a network of their own ([`containers`]).
//! This library is their harness: whether a Docker engine answers (and the
//! skip when none does), MinIO, and the gateway binary as a process in
//! front of it; the signing S3 client, the client library's callbacks over
//! real S3 requests and the rest are `hipobj-testkit`'s, re-exported here.
//!
//! Where `docker info` fails, every test prints that it was skipped and
//! passes; with `REQUIRE_DOCKER=1` the skip is a failure. The MinIO tests
//! also skip where the engine has no MinIO image and cannot pull one (no
//! registry), `REQUIRE_DOCKER=1` or not: that image is not made here.

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use http::{Method, StatusCode};

pub mod containers;

pub use hipobj_testkit::{
    assert_object, client, free_port, pattern, xml_field, Answer, RdmaOps, ServerProc, AK, REGION,
    S3, SK,
};

pub use testcontainers_modules;

/// MinIO's root user in the tests, and the gateway's upstream key.
pub const MINIO_USER: &str = "hipobj-minio-user";
/// MinIO's root password in the tests, and the gateway's upstream secret.
pub const MINIO_PASSWORD: &str = "hipobj-minio-password-0123";
/// Set to 1 to make a missing Docker engine a failure instead of a skip.
pub const REQUIRE_DOCKER: &str = "REQUIRE_DOCKER";

// ---------------------------------------------------------------------------
// Docker, or the skip.

/// Whether a Docker engine answers `docker info` (asked once per process,
/// given at most 30 seconds), or why not.
fn docker_engine() -> &'static Result<(), String> {
    static ANSWER: OnceLock<Result<(), String>> = OnceLock::new();
    ANSWER.get_or_init(|| {
        let mut child = match Command::new("docker")
            .args(["info", "--format", "{{.ServerVersion}}"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return Err(format!("the docker CLI cannot be run: {e}")),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut err);
                    }
                    let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    return Err(format!("`docker info` failed ({status}): {}", first.trim()));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("`docker info` did not answer within 30 s".into());
                }
                Err(e) => return Err(format!("waiting for `docker info`: {e}")),
            }
        }
    })
}

/// True when a Docker engine answers and `test` should run. When none
/// does, prints `test` was skipped (straight to stderr, past the test
/// harness's capture) and returns false, or panics when `REQUIRE_DOCKER=1`.
pub fn docker_or_skip(test: &str) -> bool {
    match docker_engine() {
        Ok(()) => true,
        Err(why) => {
            if std::env::var(REQUIRE_DOCKER).is_ok_and(|v| v.trim() == "1") {
                panic!("{test}: {REQUIRE_DOCKER}=1 and no Docker engine answers: {why}");
            }
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped: no Docker engine answers ({why}); {REQUIRE_DOCKER}=1 makes this a failure"
            );
            false
        }
    }
}

// ---------------------------------------------------------------------------
// MinIO.

/// Set to `http://host:port` of an S3 server that is already running to
/// run the tests against it instead of a MinIO container (no Docker then).
pub const S3_URL_ENV: &str = "HIPOBJ_E2E_S3_URL";
/// Its access key (default: the tests' MinIO user).
pub const S3_ACCESS_KEY_ENV: &str = "HIPOBJ_E2E_S3_ACCESS_KEY";
/// Its secret key (default: the tests' MinIO password).
pub const S3_SECRET_KEY_ENV: &str = "HIPOBJ_E2E_S3_SECRET_KEY";

type MinioContainer =
    testcontainers_modules::testcontainers::Container<testcontainers_modules::minio::MinIO>;

/// The store behind the gateway: a MinIO container (the testcontainers
/// module's image) with the test credentials, removed when dropped; or the
/// server `HIPOBJ_E2E_S3_URL` names.
#[derive(Debug)]
pub struct Minio {
    _container: Option<MinioContainer>,
    /// `http://host:port` of its S3 API, reachable from this machine.
    pub url: String,
    /// Its access key (the gateway's upstream key).
    pub access_key: String,
    /// Its secret key.
    pub secret_key: String,
}

/// The store for `test`: the server `HIPOBJ_E2E_S3_URL` names, else a
/// fresh MinIO container; `None` (the test is skipped) when that needs
/// Docker and no engine answers, a failure with `REQUIRE_DOCKER=1`.
pub fn minio_or_skip(test: &str) -> Option<Minio> {
    if let Some(url) = std::env::var(S3_URL_ENV).ok().filter(|u| !u.is_empty()) {
        let key = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.into());
        let minio = Minio {
            _container: None,
            url: url.trim_end_matches('/').to_string(),
            access_key: key(S3_ACCESS_KEY_ENV, MINIO_USER),
            secret_key: key(S3_SECRET_KEY_ENV, MINIO_PASSWORD),
        };
        minio.wait_ready();
        return Some(minio);
    }
    (docker_or_skip(test) && minio_image_or_skip(test)).then(Minio::start)
}

/// True when the engine has the MinIO image testcontainers' module runs
/// (`minio/minio` at the tag it pins), or pulls it now (asked once per
/// process). When it has none and cannot pull one (no registry reachable),
/// prints that `test` is skipped and returns false, with `REQUIRE_DOCKER=1`
/// too: MinIO's image is never made or retagged here, and the container
/// test against Ceph RGW (`tests/containers.rs`) is what runs without it.
pub fn minio_image_or_skip(test: &str) -> bool {
    static ANSWER: OnceLock<Result<(), String>> = OnceLock::new();
    let answer = ANSWER.get_or_init(|| {
        use testcontainers_modules::testcontainers::Image as _;
        let module = testcontainers_modules::minio::MinIO::default();
        let image = format!("{}:{}", module.name(), module.tag());
        if containers::has_image(&image) {
            return Ok(());
        }
        match containers::docker_with_limit(&["pull", &image], Duration::from_secs(600)) {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => {
                let said = o.both();
                let first = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                Err(format!(
                    "MinIO's image {image} is not on this Docker engine and cannot be pulled ({})",
                    first.trim()
                ))
            }
            Err(e) => Err(format!(
                "MinIO's image {image} is not on this Docker engine and cannot be pulled ({e})"
            )),
        }
    });
    match answer {
        Ok(()) => true,
        Err(why) => {
            // One write: the tests of a binary run in parallel.
            let line = format!(
                "{test}: skipped: {why}; these tests run where MinIO's image can be had \
                 (tests/containers.rs runs the gateway in front of Ceph RGW in containers instead)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            false
        }
    }
}

impl Minio {
    /// Starts MinIO and waits until its S3 API answers.
    pub fn start() -> Minio {
        use testcontainers_modules::testcontainers::runners::SyncRunner as _;
        use testcontainers_modules::testcontainers::ImageExt as _;
        let container = testcontainers_modules::minio::MinIO::default()
            .with_env_var("MINIO_ROOT_USER", MINIO_USER)
            .with_env_var("MINIO_ROOT_PASSWORD", MINIO_PASSWORD)
            .start()
            .expect("start the MinIO container");
        let host = container.get_host().expect("MinIO's host").to_string();
        let port = container
            .get_host_port_ipv4(9000)
            .expect("MinIO's mapped port 9000");
        // The gateway runs on this machine and reaches MinIO where Docker
        // maps its port (localhost as a rule; IPv4, as it is mapped).
        let host = if host == "localhost" {
            "127.0.0.1".to_string()
        } else {
            host
        };
        let minio = Minio {
            _container: Some(container),
            url: format!("http://{host}:{port}"),
            access_key: MINIO_USER.into(),
            secret_key: MINIO_PASSWORD.into(),
        };
        minio.wait_ready();
        minio
    }

    /// A client signing with MinIO's own credentials, straight to MinIO.
    pub fn direct(&self) -> S3 {
        S3::with_keys(&self.url, &self.access_key, &self.secret_key)
    }

    /// Until a signed ListBuckets answers 200 (MinIO logs "API:" a moment
    /// before it serves).
    fn wait_ready(&self) {
        let s3 = self.direct();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match s3.try_send(Method::GET, "/", &[], Vec::new(), false) {
                Ok(a) if a.status == StatusCode::OK => return,
                // Wrong keys do not get better by waiting.
                Ok(a) if a.status == StatusCode::FORBIDDEN => panic!(
                    "the S3 server at {} refuses the tests' keys: {}",
                    self.url,
                    a.text()
                ),
                other if Instant::now() > deadline => panic!(
                    "the S3 server at {} is not ready: {:?}",
                    self.url,
                    other.map(|a| (a.status, a.text()))
                ),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

/// A bucket name no earlier run used: `prefix` and a unique suffix (the
/// tests may run against a long-lived server).
pub fn bucket_name(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{prefix}-{:x}-{:x}-{n}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    )
}

// ---------------------------------------------------------------------------
// The gateway.

/// The gateway binary the workspace built: `HIPOBJ_GATEWAY_BIN`, else
/// `hipobj-gateway` in the profile directory of this test executable
/// ([`hipobj_testkit::workspace_bin`]).
pub fn gateway_bin() -> PathBuf {
    match std::env::var_os("HIPOBJ_GATEWAY_BIN") {
        Some(p) => PathBuf::from(p),
        None => hipobj_testkit::workspace_bin("hipobj-gateway"),
    }
}

/// `hipobj-gateway` as a process in front of a store, on loopback, with
/// the software RDMA provider (a [`ServerProc`]: stopped on drop).
#[derive(Debug)]
pub struct Gateway(ServerProc);

impl Gateway {
    /// Starts the gateway in front of `store` (signing for it with its
    /// keys) and waits until its `/health` answers 200.
    pub fn start(store: &Minio) -> Gateway {
        Gateway(hipobj_testkit::gateway(
            &gateway_bin(),
            &store.url,
            &store.access_key,
            &store.secret_key,
        ))
    }

    /// A client signing with the gateway's client credentials.
    pub fn client(&self) -> S3 {
        S3::new(&self.url)
    }
}

impl Deref for Gateway {
    type Target = ServerProc;

    fn deref(&self) -> &ServerProc {
        &self.0
    }
}

/// The separately started S3 store of `.ci/run` (`HIPOBJ_TEST_S3_ENDPOINT`,
/// `_ACCESS_KEY`, `_SECRET_KEY`), when it names one: (endpoint, access key,
/// secret key). Panics when `REQUIRE_S3S_FS=1` and it names none.
pub fn external_store() -> Option<(String, String, String)> {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        get("HIPOBJ_TEST_S3_ENDPOINT"),
        get("HIPOBJ_TEST_S3_ACCESS_KEY"),
        get("HIPOBJ_TEST_S3_SECRET_KEY"),
    ) {
        (Some(e), Some(a), Some(s)) => Some((e, a, s)),
        _ => {
            assert!(
                std::env::var("REQUIRE_S3S_FS").as_deref() != Ok("1"),
                "REQUIRE_S3S_FS=1 but HIPOBJ_TEST_S3_ENDPOINT, _ACCESS_KEY or _SECRET_KEY is not set"
            );
            None
        }
    }
}
