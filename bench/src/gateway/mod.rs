//! `hipobj-bench gateway`: the gateway in front of a separately started
//! s3s-fs, on loopback, each its own process.
//!
//! Three paths move the same bytes between the same kind of registered
//! host buffers with the same client (`hipobj-s3`):
//!
//! - **RDMA via gateway**: `hipobj-s3` with the client library and
//!   `require_rdma` against the gateway; the gateway moves the bytes by
//!   one-sided RDMA (software provider over TCP) and streams them to and
//!   from s3s-fs over HTTP.
//! - **HTTP via gateway**: the same client without the library against the
//!   gateway: plain S3 bodies, proxied by the gateway to s3s-fs.
//! - **HTTP direct**: the same client without the library against s3s-fs.
//!
//! Every PUT carries `x-amz-checksum-crc64nvme` (the client computes it
//! over the buffer); every whole-object GET is checked by the client
//! against the store's CRC64NVME, and by this harness against the pattern
//! it wrote, byte for byte.

//!
//! The harness in parts: [`setup`] (the binaries, the processes, the
//! clients, the warm-up), [`sections`] (what each section measures, and the
//! rows it yields) and [`report`] (the markdown report); the parameters,
//! the three ways and what the sections share are here.

mod report;
mod sections;
mod setup;

use crate::machine;
use crate::memory::{Cpu, Sampler};
use crate::size::parse_size;
use anyhow::{bail, Context};
use hipobj::{Hipobj, Registered};
use hipobj_fabric::pattern;
use hipobj_s3::{Path as S3Path, S3Client};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use report::{render, Report};
use sections::{big, concurrency, huge, latency, throughput, Results};

const GW_KEY: &str = "hipobj-test-key";
const GW_SECRET: &str = "hipobj-test-secret";
const UP_KEY: &str = "hipobj-bench-upstream";
const UP_SECRET: &str = "hipobj-bench-upstream-secret";
const BUCKET: &str = "hipobj-bench";
/// Scratch chunk of pattern fills and checks.
const SCRATCH: usize = 1 << 20;
/// What "a small constant" above the staging pool is allowed to be.
const MEMORY_SLACK_MIB: u64 = 64;
/// A 4 KiB GET slower than this waited for a delayed ACK (40 ms on Linux).
const STALL_MS: f64 = 30.0;

/// A part of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Section {
    /// GET and PUT throughput of each size on the three paths.
    Throughput,
    /// 4 KiB GET latency on the three paths.
    Latency,
    /// One object as large as one registered buffer holds, by RDMA.
    Big,
    /// An object larger than any buffer, by RDMA in parts and ranges.
    Huge,
    /// Concurrent clients for a fixed count of requests (last: the plain
    /// proxy's connection buffers stay resident in the gateway after it).
    Concurrency,
}

/// `hipobj-bench gateway`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A smoke run: small sizes, one round, few requests (checks that
    /// everything works, measures nothing worth reporting).
    #[arg(long)]
    quick: bool,
    /// Sections to run, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    sections: Vec<Section>,
    /// Object sizes of the throughput section [default: 64MiB,1GiB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Rounds of the throughput section (the best is reported) [default: 3].
    #[arg(long)]
    rounds: Option<usize>,
    /// 4 KiB GETs per path in the latency section [default: 1000].
    #[arg(long)]
    latency_count: Option<usize>,
    /// Concurrent clients [default: 32].
    #[arg(long)]
    clients: Option<usize>,
    /// Requests per path and direction in the concurrency section
    /// [default: 256].
    #[arg(long)]
    requests: Option<usize>,
    /// Object size in the concurrency section [default: 16MiB].
    #[arg(long, value_parser = parse_size)]
    concurrent_size: Option<u64>,
    /// The single-buffer RDMA object [default: 4GiB, the most one
    /// registered buffer holds].
    #[arg(long, value_parser = parse_size)]
    big_size: Option<u64>,
    /// The object moved in parts and ranges [default: 10GiB].
    #[arg(long, value_parser = parse_size)]
    huge_size: Option<u64>,
    /// Its part and range size, one reused registered buffer [default: 1GiB].
    #[arg(long, value_parser = parse_size)]
    huge_part: Option<u64>,
    /// The gateway's staging buffer size in MiB (`--chunk-mib`).
    #[arg(long, default_value_t = 8)]
    chunk_mib: usize,
    /// The gateway's staging buffers (`--staging-buffers`).
    #[arg(long, default_value_t = 32)]
    staging_buffers: usize,
    /// Also write the markdown report to this file.
    #[arg(long)]
    output: Option<PathBuf>,
    /// The s3s-fs 0.14.1 binary [default: $HIPOBJ_S3S_FS_BIN,
    /// target/tools/bin/s3s-fs, PATH].
    #[arg(long)]
    s3s_fs: Option<PathBuf>,
    /// The hipobj-gateway binary [default: $HIPOBJ_GATEWAY_BIN, next to this
    /// executable].
    #[arg(long)]
    gateway_bin: Option<PathBuf>,
    /// Where the temporary store directory is made [default: the system's
    /// temporary directory]; it is removed at the end.
    #[arg(long)]
    tmp_dir: Option<PathBuf>,
    /// A store already running (e.g. Ceph RGW: scripts/ceph-rgw) instead
    /// of starting s3s-fs: its endpoint.
    #[arg(long, requires_all = ["store_access_key", "store_secret_key"])]
    store_endpoint: Option<String>,
    /// Its access key.
    #[arg(long)]
    store_access_key: Option<String>,
    /// Its secret key.
    #[arg(long, env = "HIPOBJ_BENCH_STORE_SECRET_KEY")]
    store_secret_key: Option<String>,
    /// Its processes, whose CPU time is the store's column (radosgw,
    /// ceph-osd, ceph-mon for RGW), comma-separated PIDs.
    #[arg(long, value_delimiter = ',')]
    store_pids: Vec<u32>,
    /// Its name in the report [default: s3s-fs, or "store"].
    #[arg(long)]
    store_name: Option<String>,
    /// RUST_LOG of the two servers.
    #[arg(long, default_value = "warn")]
    server_log: String,
}

/// The run's parameters, resolved.
#[derive(Debug, Clone)]
struct Plan {
    sections: Vec<Section>,
    sizes: Vec<u64>,
    rounds: usize,
    latency_count: usize,
    clients: usize,
    requests: usize,
    concurrent_size: u64,
    big_size: u64,
    huge_size: u64,
    huge_part: u64,
    chunk_mib: usize,
    staging_buffers: usize,
    quick: bool,
    /// The store's name in the report.
    store_name: String,
}

impl Plan {
    fn from(a: &Args) -> anyhow::Result<Plan> {
        let q = a.quick;
        let mut sections = if a.sections.is_empty() {
            vec![
                Section::Throughput,
                Section::Latency,
                Section::Big,
                Section::Huge,
                Section::Concurrency,
            ]
        } else {
            a.sections.clone()
        };
        sections.sort();
        sections.dedup();
        let sizes = if a.sizes.is_empty() {
            if q {
                vec![4 << 20, 16 << 20]
            } else {
                vec![64 << 20, 1 << 30]
            }
        } else {
            a.sizes.clone()
        };
        let p = Plan {
            sections,
            sizes,
            rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }).max(1),
            latency_count: a.latency_count.unwrap_or(if q { 50 } else { 1000 }).max(1),
            clients: a.clients.unwrap_or(32).max(1),
            requests: a.requests.unwrap_or(if q { 64 } else { 256 }).max(1),
            concurrent_size: a
                .concurrent_size
                .unwrap_or(if q { 1 << 20 } else { 16 << 20 }),
            big_size: a.big_size.unwrap_or(if q { 256 << 20 } else { 4 << 30 }),
            huge_size: a.huge_size.unwrap_or(if q { 1 << 30 } else { 10 << 30 }),
            huge_part: a.huge_part.unwrap_or(if q { 256 << 20 } else { 1 << 30 }),
            chunk_mib: a.chunk_mib.clamp(1, 1024),
            staging_buffers: a.staging_buffers.max(1),
            quick: q,
            store_name: a.store_name.clone().unwrap_or_else(|| {
                if a.store_endpoint.is_some() {
                    "store".into()
                } else {
                    "s3s-fs".into()
                }
            }),
        };
        if p.sizes.iter().any(|s| *s == 0 || *s > 4 << 30) {
            bail!("--sizes must be between 1 byte and 4GiB (one registered buffer)");
        }
        if p.big_size == 0 || p.big_size > 4 << 30 {
            bail!("--big-size must be between 1 byte and 4GiB (one registered buffer)");
        }
        if p.concurrent_size == 0 || p.concurrent_size > 1 << 30 {
            bail!("--concurrent-size must be between 1 byte and 1GiB");
        }
        if p.huge_part < 5 << 20 || p.huge_part > 4 << 30 {
            bail!("--huge-part must be between 5MiB (S3's smallest part) and 4GiB");
        }
        if p.huge_size == 0 || p.huge_size.div_ceil(p.huge_part) > 10_000 {
            bail!("--huge-size must be non-zero and at most 10000 parts of --huge-part");
        }
        Ok(p)
    }
}

/// The three ways the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Rdma,
    GatewayHttp,
    Direct,
}

const WAYS: [Way; 3] = [Way::Rdma, Way::GatewayHttp, Way::Direct];

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Rdma => "RDMA via gateway",
            Way::GatewayHttp => "HTTP via gateway",
            Way::Direct => "HTTP direct to the store",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Way::Rdma => "rdma",
            Way::GatewayHttp => "gwhttp",
            Way::Direct => "direct",
        }
    }

    fn path(self) -> S3Path {
        match self {
            Way::Rdma => S3Path::Rdma,
            _ => S3Path::Http,
        }
    }
}

/// What the sections share.
struct Env {
    rt: tokio::runtime::Runtime,
    lib: Arc<Hipobj>,
    rdma: S3Client,
    gw_http: S3Client,
    direct: S3Client,
    sampler: Sampler,
    idle_rss_kib: u64,
    store_pids: Vec<u32>,
    gateway_pid: u32,
    /// Whether the store returns the CRC64NVME a PUT declared (s3s-fs
    /// does; a store of `--store-endpoint` may not: RGW 16).
    store_checksums: bool,
}

impl Env {
    fn client(&self, w: Way) -> &S3Client {
        match w {
            Way::Rdma => &self.rdma,
            Way::GatewayHttp => &self.gw_http,
            Way::Direct => &self.direct,
        }
    }

    fn cpu(&self) -> Cpu {
        Cpu::now(&self.store_pids, self.gateway_pid)
    }

    fn delete(&self, key: &str) {
        if let Err(e) = self.rt.block_on(self.direct.delete_object(BUCKET, key)) {
            tracing::warn!("deleting {key}: {e}");
        }
    }
}

fn fill(reg: &Registered<'_, '_>, seed: u64, stream_off: u64, len: usize) -> anyhow::Result<()> {
    let mut chunk = vec![0u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        pattern::fill(seed, stream_off + done as u64, &mut chunk[..n]);
        reg.write(done, &chunk[..n])?;
        done += n;
    }
    Ok(())
}

fn poison(reg: &Registered<'_, '_>, len: usize) -> anyhow::Result<()> {
    let chunk = vec![0xa5u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        reg.write(done, &chunk[..n])?;
        done += n;
    }
    Ok(())
}

fn verify(reg: &Registered<'_, '_>, seed: u64, stream_off: u64, len: usize) -> anyhow::Result<()> {
    let mut want = vec![0u8; SCRATCH.min(len)];
    let mut got = vec![0u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        pattern::fill(seed, stream_off + done as u64, &mut want[..n]);
        reg.read(done, &mut got[..n])?;
        if want[..n] != got[..n] {
            let i = want[..n]
                .iter()
                .zip(&got[..n])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            bail!(
                "byte {} of the object differs from what was written",
                stream_off + (done + i) as u64
            );
        }
        done += n;
    }
    Ok(())
}

fn check(o: &hipobj_s3::Outcome, way: Way, bytes: u64, what: &str) -> anyhow::Result<()> {
    if o.path != way.path() {
        bail!(
            "{what} on {} went by {} ({:?})",
            way.label(),
            o.path,
            o.fallback_reason
        );
    }
    if o.bytes != bytes {
        bail!(
            "{what} on {} moved {} bytes, not {bytes}",
            way.label(),
            o.bytes
        );
    }
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// -------------------------------------------------------------------------
// The run.

/// Runs the benchmark and prints (and writes) the markdown report.
pub fn run(a: Args) -> anyhow::Result<()> {
    let plan = Plan::from(&a)?;
    let bins = setup::locate(&a)?;
    let machine = machine::describe();
    let load_start = machine::loadavg();
    let started = Instant::now();
    let (mut servers, env) = setup::start(&a, &plan, &bins)?;

    let mut results = Results::default();
    let outcome: anyhow::Result<()> = (|| {
        for s in &plan.sections {
            eprintln!("section {s:?}");
            match s {
                Section::Throughput => {
                    for size in &plan.sizes {
                        results
                            .throughput
                            .push(throughput(&env, *size, plan.rounds)?);
                    }
                }
                Section::Latency => results.latency = latency(&env, plan.latency_count)?,
                Section::Concurrency => {
                    results.concurrency =
                        concurrency(&env, plan.clients, plan.requests, plan.concurrent_size)?
                }
                Section::Big => results.big = Some(big(&env, plan.big_size)?),
                Section::Huge => results.huge = Some(huge(&env, plan.huge_size, plan.huge_part)?),
            }
        }
        Ok(())
    })();
    let final_hwm = env.sampler.window().hwm_kib;
    let samples = env.sampler.samples();
    let idle = env.idle_rss_kib;
    let _ = env.rt.block_on(env.direct.delete_bucket(BUCKET));
    drop(env);
    let gateway_alive = servers.gateway.alive();
    servers.gateway.stop();
    if let Some(u) = servers.upstream.as_mut() {
        u.stop();
    }
    let load_end = machine::loadavg();
    let report = render(&Report {
        plan: &plan,
        machine: &machine,
        load_start,
        load_end,
        results: &results,
        idle_rss_kib: idle,
        final_hwm_kib: final_hwm,
        samples,
        total_secs: started.elapsed().as_secs_f64(),
    });
    drop(servers);
    print!("{report}");
    if let Some(p) = &a.output {
        std::fs::write(p, &report).with_context(|| format!("writing {}", p.display()))?;
    }
    outcome?;
    if !gateway_alive {
        bail!("the gateway exited during the run");
    }
    let errors: u64 = results.concurrency.iter().map(|r| r.errors).sum();
    if errors > 0 {
        bail!("{errors} requests failed in the concurrency section");
    }
    Ok(())
}
