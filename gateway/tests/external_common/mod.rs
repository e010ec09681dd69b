//! What only the tests against a separately started S3 store need: the
//! store (the one `.ci/run` names in `HIPOBJ_TEST_S3_*`, else an `s3s-fs`
//! process started here from `target/tools/bin` or `PATH`) and whether to
//! skip without one. The gateway, the S3 client and the RDMA side are
//! `hipobj-testkit`'s.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use hipobj_testkit::{free_port, Ready, ServerProc};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the gateway crate sits in the workspace")
        .to_path_buf()
}

/// A random suffix, so that runs against a lasting store do not collide.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{:x}-{:x}",
        std::process::id(),
        nanos & 0xffff_ffff
    )
}

/// An S3 store reached over the network: its endpoint and keys.
#[derive(Clone)]
pub struct Store {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("endpoint", &self.endpoint)
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A client straight to the store.
    pub fn s3(&self) -> hipobj_testkit::S3 {
        hipobj_testkit::S3::with_keys(&self.endpoint, &self.access_key, &self.secret_key)
    }

    /// The gateway's flags for this store (the secret goes in the
    /// environment: see [`Store::gateway_env`]).
    pub fn gateway_args(&self) -> Vec<String> {
        vec![
            "--upstream".into(),
            self.endpoint.clone(),
            "--upstream-access-key".into(),
            self.access_key.clone(),
        ]
    }

    /// The gateway's environment for this store.
    pub fn gateway_env(&self) -> Vec<(&'static str, String)> {
        vec![("HIPOBJ_UPSTREAM_SECRET_KEY", self.secret_key.clone())]
    }
}

/// An `s3s-fs` process on a free loopback port with a data directory of its
/// own: stopped (SIGTERM) on drop, then the directory removed.
#[derive(Debug)]
pub struct S3sFs {
    // Declared first: the process stops before its data goes.
    _proc: ServerProc,
    pub store: Store,
    _data: tempfile::TempDir,
}

/// The `s3s-fs` binary: `target/tools/bin/s3s-fs` (where `.ci/run`
/// installs it), else on `PATH`.
pub fn s3s_fs_binary() -> Option<PathBuf> {
    let local = workspace_root().join("target/tools/bin/s3s-fs");
    if local.is_file() {
        return Some(local);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("s3s-fs"))
        .find(|p| p.is_file())
}

impl S3sFs {
    /// Starts `binary` and waits until it accepts connections; three tries,
    /// as the free port it is given may be taken meanwhile.
    pub fn start(binary: &Path) -> S3sFs {
        let access_key = "S3SFSTESTKEY";
        let secret_key = "s3s-fs-test-secret-0123456789";
        let mut last = None;
        for _ in 0..3 {
            let data = tempfile::tempdir().expect("a directory for s3s-fs's data");
            let port = free_port();
            let mut cmd = Command::new(binary);
            cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", access_key, "--secret-key", secret_key])
                .arg(data.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            match ServerProc::try_start(cmd, Ready::Listening(port)) {
                Ok(proc) => {
                    let store = Store {
                        endpoint: proc.url.clone(),
                        access_key: access_key.into(),
                        secret_key: secret_key.into(),
                    };
                    return S3sFs {
                        _proc: proc,
                        store,
                        _data: data,
                    };
                }
                Err(e) => last = Some(e),
            }
        }
        panic!("s3s-fs did not start: {}", last.unwrap());
    }
}

/// An `s3s-fs` of the test's own, whatever store `HIPOBJ_TEST_S3_*` names:
/// for the tests of what s3s-fs does and Ceph RGW 16 (CI's store) does not
/// (a checksum in an aws-chunked trailer, RFC 2047-encoded metadata). `None`
/// after saying why without the binary (a failure with `REQUIRE_S3S_FS=1`).
pub fn own_s3s_fs(test: &str) -> Option<(Store, Option<S3sFs>)> {
    start_s3s_fs(test, "s3s-fs is")
}

/// An `s3s-fs` started from its binary, else `None` after saying why
/// (`missing` opens the reason; a failure with `REQUIRE_S3S_FS=1`).
fn start_s3s_fs(test: &str, missing: &str) -> Option<(Store, Option<S3sFs>)> {
    if let Some(binary) = s3s_fs_binary() {
        let fs = S3sFs::start(&binary);
        return Some((fs.store.clone(), Some(fs)));
    }
    let why = format!(
        "{missing} neither in target/tools/bin nor on PATH (install it with `cargo \
         install s3s-fs --version 0.14.1 --features binary --locked --root target/tools`)"
    );
    if std::env::var("REQUIRE_S3S_FS").is_ok_and(|v| v == "1") {
        panic!("{test}: {why}, and REQUIRE_S3S_FS=1");
    }
    eprintln!("{test}: skipped: {why}");
    None
}

/// The external store of a test: the one `HIPOBJ_TEST_S3_ENDPOINT`,
/// `HIPOBJ_TEST_S3_ACCESS_KEY` and `HIPOBJ_TEST_S3_SECRET_KEY` name (as
/// `.ci/run` sets them), else an `s3s-fs` started here, else `None` after
/// saying why (a failure with `REQUIRE_S3S_FS=1`).
pub fn external_store(test: &str) -> Option<(Store, Option<S3sFs>)> {
    if let Ok(endpoint) = std::env::var("HIPOBJ_TEST_S3_ENDPOINT") {
        let key = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("{name} must be set with HIPOBJ_TEST_S3_ENDPOINT"))
        };
        let store = Store {
            endpoint,
            access_key: key("HIPOBJ_TEST_S3_ACCESS_KEY"),
            secret_key: key("HIPOBJ_TEST_S3_SECRET_KEY"),
        };
        return Some((store, None));
    }
    start_s3s_fs(
        test,
        "no external S3 store: HIPOBJ_TEST_S3_ENDPOINT is not set and s3s-fs is",
    )
}
