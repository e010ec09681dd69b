//! `hipobj demo`: the whole stack in one process, with nothing to configure.
//!
//! Starts the test server's engine (the gateway engine with an embedded store
//! in a temporary directory) on 127.0.0.1 with a free port and the software
//! RDMA provider, writes an object by RDMA from a registered buffer, reads it
//! back by RDMA into another, checks every byte, and prints a small
//! comparison of RDMA and plain HTTP (the `hipobj bench` table).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hipobj_gateway::config::{EngineConfig, KeyPair, RdmaConfig, RdmaProvider};
use hipobj_gateway::engine::{self, Engine};
use hipobj_s3::{ClientConfig, Path};
use tokio::runtime::Handle;

use crate::bench::{self, Amount, Plan};
use crate::bounds;
use crate::common;
use crate::exit::{print_line, CliError};
use crate::size::{human, mib_per_s, parse_size};

const ACCESS_KEY: &str = "hipobj-test-key";
const SECRET_KEY: &str = "hipobj-test-secret";
const REGION: &str = "us-east-1";

/// `hipobj demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The object's size.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub size: u64,
    /// Operations per cell of the comparison table.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
}

/// Selects the software RDMA provider for this process's client library,
/// unless `HIPOBJ_PROVIDER` already says otherwise. Call before any thread
/// is started.
pub fn prefer_soft_provider() {
    if std::env::var_os("HIPOBJ_PROVIDER").is_none() {
        // Edition 2021: safe; main calls this before starting any thread.
        std::env::set_var("HIPOBJ_PROVIDER", "soft");
    }
}

/// The embedded server's RDMA side: the soft provider's soft0, or with
/// `HIPOBJ_PROVIDER=verbs` the first libibverbs device (the client then
/// uses libibverbs too: a NIC, or soft-verbs).
fn demo_rdma() -> RdmaConfig {
    let verbs = std::env::var("HIPOBJ_PROVIDER").is_ok_and(|p| p.trim() == "verbs");
    if verbs {
        RdmaConfig {
            provider: RdmaProvider::Verbs,
            ..RdmaConfig::default()
        }
    } else {
        RdmaConfig {
            device: Some("soft0".into()),
            provider: RdmaProvider::Soft,
            ..RdmaConfig::default()
        }
    }
}

/// The embedded test server, stopped on drop.
struct Server {
    url: String,
    /// The RDMA device it serves on (the client uses the same one).
    device: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    rt: Handle,
    _store: Option<tempfile::TempDir>,
}

impl Server {
    fn start(rt: &Handle) -> anyhow::Result<Server> {
        let (upstream, store) = engine::embedded(None).context("creating the temporary store")?;
        let cfg = EngineConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            region: REGION.into(),
            credentials: vec![KeyPair {
                access_key: ACCESS_KEY.into(),
                secret_key: SECRET_KEY.into(),
            }
            .into()],
            max_skew: Duration::from_secs(15 * 60),
            upstream,
            upstream_options: Default::default(),
            rdma: demo_rdma(),
            server: Default::default(),
        };
        let _guard = rt.enter();
        let engine = Arc::new(Engine::new(&cfg).context("starting the test server's engine")?);
        let device = engine
            .rdma
            .rails
            .first()
            .map(|r| r.name.clone())
            .unwrap_or_else(|| "soft0".into());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(cfg.listen))
            .context("listening on 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(engine::serve(listener, engine, async move {
            let _ = rx.await;
        }));
        Ok(Server {
            url: format!("http://{addr}"),
            device,
            stop: Some(tx),
            task: Some(task),
            rt: rt.clone(),
            _store: store,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
        }
    }
}

/// Runs `hipobj demo`; fails unless the bytes read back are the bytes
/// written.
pub fn run(args: DemoArgs, rt: &Handle) -> Result<(), CliError> {
    let size = args.size;
    if size == 0 || size > 4 << 30 {
        return Err(CliError::Invalid(anyhow::anyhow!(
            "--size must be between 1 byte and 4GiB"
        )));
    }
    let server = Server::start(rt)?;
    print_line(&format!(
        "hipobj demo: test server on {} (embedded store in a temporary directory, {})",
        server.url,
        if server.device.starts_with("soft") {
            format!("software RDMA on {}", server.device)
        } else {
            format!("RDMA through libibverbs on {}", server.device)
        }
    ))?;
    let lib = common::library(&server.device)?;
    let mut cfg = ClientConfig::new(&server.url, ACCESS_KEY, SECRET_KEY).with_rdma(lib.clone());
    cfg.require_rdma = true;
    cfg.part_size = (size as usize).max(hipobj_s3::DEFAULT_PART_SIZE);
    let s3 = common::client(cfg.clone())?;
    let (bucket, key) = ("demo", "object");
    rt.block_on(s3.create_bucket(bucket))
        .context("creating the bucket")?;

    let len = size as usize;
    let expected: Vec<u8> = (0..len)
        .map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()[7])
        .collect();
    // Page-aligned registered memory, as GPU memory and pinned host
    // buffers are: a heap vector's 16-byte skew against the store's
    // page-aligned file halves the same-host copy (docs/benchmarks.md).
    let src = lib.alloc_host(len).context("registering")?;
    src.write(0, &expected).context("filling the buffer")?;
    let t = Instant::now();
    let put = rt
        .block_on(s3.put_object(bucket, key, &src, 0, len))
        .context("PUT by RDMA")?;
    let put_s = t.elapsed().as_secs_f64();
    print_line(&format!(
        "PUT s3://{bucket}/{key}: {size} bytes ({}) from a registered buffer by {} in {put_s:.3} s ({:.1} MiB/s)",
        human(size),
        put.path,
        mib_per_s(size, put_s)
    ))?;

    let dst = lib.alloc_host(len).context("registering")?;
    let t = Instant::now();
    let got = rt
        .block_on(s3.get_object(bucket, key, &dst, 0, None))
        .context("GET by RDMA")?;
    let get_s = t.elapsed().as_secs_f64();
    print_line(&format!(
        "GET s3://{bucket}/{key}: {} bytes into another registered buffer by {} in {get_s:.3} s ({:.1} MiB/s)",
        got.bytes,
        got.path,
        mib_per_s(got.bytes, get_s)
    ))?;
    let mut back = vec![0u8; len];
    dst.read(0, &mut back).context("reading the buffer")?;
    drop(dst);
    drop(src);
    let same = got.bytes == size && back == expected;
    if !same || put.path != Path::Rdma || got.path != Path::Rdma {
        let at = back.iter().zip(&expected).position(|(a, b)| a != b);
        return Err(CliError::Failed(anyhow::anyhow!(
            "the bytes read back differ from the bytes written ({} bytes read, first difference at {at:?})",
            got.bytes
        )));
    }
    print_line(&format!(
        "bytes match: {size} of {size}{}",
        if got.checksum_verified {
            ", CRC64NVME verified"
        } else {
            ""
        }
    ))?;
    drop((back, expected));

    let mut sizes = vec![1 << 20];
    if size != 1 << 20 {
        sizes.push(size);
    }
    let plan = Plan {
        sizes,
        concurrency: 2,
        amount: Amount::Count(args.count),
        bucket: bucket.into(),
        prefix: "bench".into(),
        // The server runs in this process: its CPU is the client's.
        cpu: None,
    };
    print_line("")?;
    print_line(&format!(
        "RDMA vs plain HTTP through the same server ({} operations per cell, 2 at once):",
        args.count
    ))?;
    let mut plain = cfg;
    plain.rdma_memory = None;
    let rows = bench::run_plan(rt, &plain, &lib, &plan)?;
    for line in bench::table(&rows) {
        print_line(&line)?;
    }
    if rows.iter().any(|r| r.errors > 0) {
        return Err(CliError::Failed(anyhow::anyhow!(
            "some benchmark operations failed (see above)"
        )));
    }
    print_line("")?;
    let b = bounds::measure(len);
    let rdma = |op: &str| {
        rows.iter()
            .find(|r| r.size == size && r.op == op && r.path == "rdma")
            .map_or(0.0, |r| r.throughput_mib_s)
    };
    print_line(&format!(
        "PUT bound, measured now: one core's MD5 of {} (the store's ETag; both paths pay it) {:.0} MiB/s; RDMA PUT {:.0} MiB/s = {:.2}x of it",
        human(size),
        b.md5_mib_s,
        rdma("put"),
        rdma("put") / b.md5_mib_s
    ))?;
    print_line(&format!(
        "GET bound, measured now: one thread's memcpy of {} {:.0} MiB/s; RDMA GET {:.0} MiB/s = {:.2}x of it",
        human(size),
        b.memcpy_mib_s,
        rdma("get"),
        rdma("get") / b.memcpy_mib_s
    ))?;
    print_line("")?;
    print_line("demo: OK")?;
    drop(server);
    Ok(())
}
