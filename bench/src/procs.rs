//! The processes a benchmark starts: finding their binaries, starting them
//! with their output in files, waiting until they listen, and stopping
//! them (SIGTERM, then SIGKILL after a grace period).

use anyhow::{bail, Context};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The command that installs the upstream store where it is looked for.
pub const S3S_FS_INSTALL: &str =
    "cargo install s3s-fs --version 0.14.1 --features binary --locked --root target/tools";
/// The command that builds what `hipobj-bench gateway` runs.
pub const BUILD: &str = "cargo build --release -p hipobj-gateway -p hipobj-bench";

/// The workspace root this binary was built from.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// `hipobj-gateway`: the flag, `$HIPOBJ_GATEWAY_BIN`, or next to this
/// executable (the same `target/<profile>/`).
pub fn locate_gateway(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("HIPOBJ_GATEWAY_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("finding this executable")?;
    let candidate = exe
        .parent()
        .map(|d| d.join("hipobj-gateway"))
        .filter(|c| c.is_file());
    match candidate {
        Some(c) => Ok(c),
        None => bail!(
            "hipobj-gateway is not next to {} (build it with `{BUILD}`, or name it with --gateway-bin or HIPOBJ_GATEWAY_BIN)",
            exe.display()
        ),
    }
}

/// `s3s-fs`: the flag, `$HIPOBJ_S3S_FS_BIN`, `target/tools/bin/s3s-fs` of
/// the workspace, or `PATH`.
pub fn locate_s3s_fs(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("HIPOBJ_S3S_FS_BIN") {
        return Ok(PathBuf::from(p));
    }
    let mut candidates = vec![workspace_root().join("target/tools/bin/s3s-fs")];
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/hipobj-bench -> target/tools/bin/s3s-fs
        if let Some(target) = exe.parent().and_then(Path::parent) {
            candidates.push(target.join("tools/bin/s3s-fs"));
        }
    }
    if let Some(c) = candidates.into_iter().find(|c| c.is_file()) {
        return Ok(c);
    }
    if let Some(c) = on_path("s3s-fs") {
        return Ok(c);
    }
    bail!(
        "s3s-fs 0.14.1 was not found (--s3s-fs, HIPOBJ_S3S_FS_BIN, target/tools/bin, PATH); install it with `{S3S_FS_INSTALL}` in the workspace root"
    )
}

/// A free TCP port on 127.0.0.1 (free when asked; the child binds it).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// A started child process, stopped on drop.
#[derive(Debug)]
pub struct Child {
    name: &'static str,
    child: std::process::Child,
    log: PathBuf,
    stopped: bool,
}

impl Child {
    /// Starts `cmd` with stdout and stderr into `log`. The child is killed
    /// if this process dies first.
    #[allow(unsafe_code)] // pre_exec(prctl)
    pub fn spawn(name: &'static str, mut cmd: Command, log: PathBuf) -> anyhow::Result<Child> {
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        // SAFETY: the closure runs in the child between fork and exec and
        // only calls prctl(2), which is async-signal-safe; it allocates
        // nothing and takes no lock.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        Ok(Child {
            name,
            child,
            log,
            stopped: false,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of its output.
    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Waits until `addr` accepts connections, failing if the child exits.
    pub fn wait_listening(&mut self, addr: SocketAddr, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before listening on {addr}:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} did not listen on {addr} within {limit:?}:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits (SIGKILL after 10 s).
    #[allow(unsafe_code)] // kill(2)
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.running() {
            if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
                // SAFETY: kill(2) on our own child's pid, which is not yet
                // reaped (try_wait said it runs), so it names that child.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.running() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.running() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}
