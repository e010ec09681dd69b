//! Setting a run up: finding the binaries, s3s-fs and the gateway started
//! as processes (testkit's [`ServerProc`]: output in a log, ready once
//! they listen, SIGTERM then SIGKILL when stopped), the three clients, the
//! bucket, and a warm-up of every path.

use anyhow::{anyhow, bail, Context};
use hipobj::{Config, Hipobj};
use hipobj_fabric::pattern;
use hipobj_s3::{ClientConfig, S3Client, Timeouts};
use hipobj_testkit::{free_port, Ready, ServerProc};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use super::args::{Args, Plan};
use super::common::{check, Env, BUCKET, GW_KEY, GW_SECRET, UP_KEY, UP_SECRET, WAYS};
use crate::memory::Sampler;

/// The command that installs the upstream store where it is looked for.
const S3S_FS_INSTALL: &str =
    "cargo install s3s-fs --version 0.14.1 --features binary --locked --root target/tools";
/// The command that builds what `hipobj-bench gateway` runs.
const BUILD: &str = "cargo build --release -p hipobj-gateway -p hipobj-bench";

/// The binaries a run starts.
#[derive(Debug)]
pub(super) struct Bins {
    gateway: PathBuf,
    /// None: the store is already running (`--store-endpoint`).
    s3s_fs: Option<PathBuf>,
}

/// The processes of a run and its temporary directory (the store's data).
#[derive(Debug)]
pub(super) struct Servers {
    /// s3s-fs, when the run started it.
    pub(super) upstream: Option<ServerProc>,
    pub(super) gateway: ServerProc,
    /// Removed (with the store) when the servers are dropped.
    _tmp: tempfile::TempDir,
}

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
fn locate_gateway(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
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
fn locate_s3s_fs(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
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

/// The gateway and s3s-fs binaries the arguments name or the defaults.
pub(super) fn locate(a: &Args) -> anyhow::Result<Bins> {
    Ok(Bins {
        gateway: locate_gateway(a.gateway_bin.as_deref())?,
        s3s_fs: match a.store_endpoint {
            Some(_) => None,
            None => Some(locate_s3s_fs(a.s3s_fs.as_deref())?),
        },
    })
}

/// Has the child get SIGTERM if this process dies first.
#[allow(unsafe_code)] // pre_exec(prctl)
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl(2), which is async-signal-safe; it allocates nothing and
    // takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Starts `cmd` (`name` in messages) with its output in a log, dying with
/// this process, once it listens on `127.0.0.1:port`.
fn serve(name: &str, mut cmd: Command, port: u16) -> anyhow::Result<ServerProc> {
    cmd.stdin(Stdio::null());
    die_with_parent(&mut cmd);
    ServerProc::try_start_logging_all(cmd, Ready::Listening(port))
        .map_err(|e| anyhow!("{name} did not start: {e}"))
}

/// Starts s3s-fs and the gateway in front of it, makes the clients and
/// the bucket, and warms every path up.
pub(super) fn start(a: &Args, plan: &Plan, bins: &Bins) -> anyhow::Result<(Servers, Env)> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("hipobj-bench-");
    let tmp = match &a.tmp_dir {
        Some(d) => builder.tempdir_in(d),
        None => builder.tempdir(),
    }
    .context("creating the temporary directory")?;
    let data = tmp.path().join("data");
    std::fs::create_dir(&data)?;

    // The store: one already running, or s3s-fs started here.
    let (upstream, up_url, up_key, up_secret, store_pids) = match &a.store_endpoint {
        Some(endpoint) => (
            None,
            endpoint.trim_end_matches('/').to_string(),
            a.store_access_key.clone().unwrap_or_default(),
            a.store_secret_key.clone().unwrap_or_default(),
            a.store_pids.clone(),
        ),
        None => {
            let up_port = free_port();
            let up_addr = SocketAddr::from(([127, 0, 0, 1], up_port));
            let s3s_fs = bins
                .s3s_fs
                .as_ref()
                .ok_or_else(|| anyhow!("no s3s-fs binary"))?;
            let mut cmd = Command::new(s3s_fs);
            cmd.args(["--host", "127.0.0.1", "--port", &up_port.to_string()])
                .args(["--access-key", UP_KEY, "--secret-key", UP_SECRET])
                .arg(&data)
                .env("RUST_LOG", &a.server_log);
            let p = serve("s3s-fs", cmd, up_port)?;
            let pid = p.pid();
            (
                Some(p),
                format!("http://{up_addr}"),
                UP_KEY.to_string(),
                UP_SECRET.to_string(),
                vec![pid],
            )
        }
    };

    let gw_port = free_port();
    let gw_addr = SocketAddr::from(([127, 0, 0, 1], gw_port));
    let mut cmd = Command::new(&bins.gateway);
    cmd.args(["--listen", &gw_addr.to_string()])
        .args(["--upstream", &up_url])
        .args(["--upstream-access-key", &up_key])
        .args(["--upstream-secret-key", &up_secret])
        .args(["--access-key", GW_KEY, "--secret-key", GW_SECRET])
        .args(["--rdma-device", "soft0"])
        .args(["--chunk-mib", &plan.chunk_mib.to_string()])
        .args(["--staging-buffers", &plan.staging_buffers.to_string()])
        .env("RUST_LOG", &a.server_log)
        .env_remove("HIPOBJ_PROVIDER");
    // The same-host path as a gateway running as its own user takes it: a
    // gateway run as root (as on the benchmark machines) needs leave for it
    // (docs/soft-provider.md), unless the caller says otherwise.
    if std::env::var_os("HIPOBJ_SOFT_CMA").is_none() {
        cmd.env("HIPOBJ_SOFT_CMA", "privileged");
    }
    let gateway = serve("hipobj-gateway", cmd, gw_port)?;
    eprintln!(
        "hipobj-bench gateway: {} at {up_url}, hipobj-gateway {} on {gw_addr}",
        plan.store_name,
        bins.gateway.display(),
    );

    let sampler = Sampler::start(gateway.pid(), Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(300));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let lib = Arc::new(
        Hipobj::new(&Config::with_nic("soft0")).context("starting the client library on soft0")?,
    );
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_secs(300),
        per_gib: Duration::from_secs(60),
    };
    let mk = |endpoint: String, key: &str, secret: &str, rdma: bool| {
        let mut c = ClientConfig::new(endpoint, key, secret);
        c.part_size = 5 << 30;
        c.timeouts = timeouts;
        c.attempts = 1;
        if rdma {
            c.rdma_memory = Some(lib.clone());
            c.require_rdma = true;
            c.rdma_protocol = a.rdma_protocol;
        }
        S3Client::new(c)
    };
    let gw_url = format!("http://{gw_addr}");
    let env = Env {
        rdma: mk(gw_url.clone(), GW_KEY, GW_SECRET, true)?,
        gw_http: mk(gw_url, GW_KEY, GW_SECRET, false)?,
        direct: mk(up_url.clone(), &up_key, &up_secret, false)?,
        idle_rss_kib: sampler.rss_kib(),
        sampler,
        store_pids,
        store_checksums: a.store_endpoint.is_none(),
        gateway_pid: gateway.pid(),
        lib,
        rt,
    };
    env.rt
        .block_on(env.direct.create_bucket(BUCKET))
        .context("creating the bucket")?;
    // Warm every path: connections, and the RDMA pair.
    {
        let mut m = vec![0u8; 1 << 20];
        pattern::fill(1, 0, &mut m);
        let reg = env.lib.register_owned(m)?;
        for way in WAYS {
            let c = env.client(way);
            let key = format!("warm/{}", way.tag());
            let o = env
                .rt
                .block_on(c.put_object(BUCKET, &key, &reg, 0, 1 << 20))?;
            check(&o, way, 1 << 20, "warm-up PUT")?;
            let o = env.rt.block_on(c.get_object(BUCKET, &key, &reg, 0, None))?;
            check(&o, way, 1 << 20, "warm-up GET")?;
            env.delete(&key);
        }
    }
    let servers = Servers {
        upstream,
        gateway,
        _tmp: tmp,
    };
    Ok((servers, env))
}
