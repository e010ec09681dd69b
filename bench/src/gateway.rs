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

use crate::machine::{self, Machine};
use crate::memory::{Cpu, Sampler, Window};
use crate::procs::{self, Child};
use crate::size::{gib_s, human, parse_size};
use anyhow::{bail, Context};
use hipobj::{Config, Hipobj, Registered};
use hipobj_fabric::pattern;
use hipobj_s3::{ClientConfig, Path as S3Path, S3Client, Timeouts};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
            Way::Direct => "HTTP direct to s3s-fs",
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
    store_pid: u32,
    gateway_pid: u32,
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
        Cpu::now(self.store_pid, self.gateway_pid)
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
// Results.

#[derive(Debug)]
struct ThroughputRow {
    size: u64,
    /// Seconds per round, [way][put=0/get=1].
    secs: [[Vec<f64>; 2]; 3],
    /// CPU used over all rounds, [way][put=0/get=1].
    cpu: [[Cpu; 2]; 3],
    memory: Window,
}

#[derive(Debug)]
struct LatencyRow {
    way: Way,
    /// Milliseconds, sorted.
    ms: Vec<f64>,
}

#[derive(Debug)]
struct ConcurrencyRow {
    way: Way,
    put: bool,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
    secs: f64,
    bytes: u64,
    lat_ms: Vec<f64>,
    memory: Window,
    verified: usize,
}

#[derive(Debug)]
struct BigRow {
    size: u64,
    put_secs: f64,
    get_secs: f64,
    put_memory: Window,
    get_memory: Window,
}

#[derive(Debug)]
struct HugeRow {
    size: u64,
    part: u64,
    parts: usize,
    put_secs: f64,
    complete_secs: f64,
    get_secs: f64,
    wall_secs: f64,
    /// The gateway's sampled peak RSS during each part's and range's
    /// request, KiB.
    per_request_peak_kib: Vec<u64>,
    memory: Window,
}

#[derive(Debug, Default)]
struct Results {
    throughput: Vec<ThroughputRow>,
    latency: Vec<LatencyRow>,
    concurrency: Vec<ConcurrencyRow>,
    big: Option<BigRow>,
    huge: Option<HugeRow>,
}

// -------------------------------------------------------------------------
// Sections.

const SEED_TP: u64 = 0x7470;

fn throughput(env: &Env, size: u64, rounds: usize) -> anyhow::Result<ThroughputRow> {
    let len = size as usize;
    let mut src_mem = vec![0u8; len];
    pattern::fill(SEED_TP ^ size, 0, &mut src_mem);
    let dst_mem = vec![0u8; len];
    let src = env.lib.register_owned(src_mem)?;
    let dst = env.lib.register_owned(dst_mem)?;
    let mut secs: [[Vec<f64>; 2]; 3] = Default::default();
    let mut cpu: [[Cpu; 2]; 3] = Default::default();
    env.sampler.begin();
    for round in 0..rounds {
        for (i, way) in WAYS.iter().enumerate() {
            let key = format!("tp/{size}/{}", way.tag());
            let c0 = env.cpu();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(env.client(*way).put_object(BUCKET, &key, &src, 0, len))
                .with_context(|| format!("PUT {} on {}", human(size), way.label()))?;
            secs[i][0].push(t.elapsed().as_secs_f64());
            cpu[i][0].add_since(c0, env.cpu());
            check(&o, *way, size, "PUT")?;
        }
        for (i, way) in WAYS.iter().enumerate() {
            let key = format!("tp/{size}/{}", way.tag());
            poison(&dst, len)?;
            let c0 = env.cpu();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(env.client(*way).get_object(BUCKET, &key, &dst, 0, None))
                .with_context(|| format!("GET {} on {}", human(size), way.label()))?;
            secs[i][1].push(t.elapsed().as_secs_f64());
            cpu[i][1].add_since(c0, env.cpu());
            check(&o, *way, size, "GET")?;
            verify(&dst, SEED_TP ^ size, 0, len)
                .with_context(|| format!("GET {} on {}", human(size), way.label()))?;
            if !o.checksum_verified {
                bail!(
                    "GET {} on {}: the store sent no full-object CRC64NVME to check",
                    human(size),
                    way.label()
                );
            }
        }
        eprintln!(
            "  throughput {}: round {} of {rounds} done",
            human(size),
            round + 1
        );
    }
    let memory = env.sampler.window();
    for way in WAYS {
        env.delete(&format!("tp/{size}/{}", way.tag()));
    }
    Ok(ThroughputRow {
        size,
        secs,
        cpu,
        memory,
    })
}

fn latency(env: &Env, count: usize) -> anyhow::Result<Vec<LatencyRow>> {
    const SIZE: usize = 4096;
    const SEED: u64 = 0x4c4154;
    let mut src_mem = vec![0u8; SIZE];
    pattern::fill(SEED, 0, &mut src_mem);
    let dst_mem = vec![0u8; SIZE];
    let src = env.lib.register_owned(src_mem)?;
    let dst = env.lib.register_owned(dst_mem)?;
    let key = "lat/4k";
    env.rt
        .block_on(env.direct.put_object(BUCKET, key, &src, 0, SIZE))
        .context("PUT of the 4 KiB object")?;
    let mut rows = Vec::new();
    for way in WAYS {
        let c = env.client(way);
        for _ in 0..20.min(count) {
            env.rt.block_on(c.get_object(BUCKET, key, &dst, 0, None))?;
        }
        let mut ms = Vec::with_capacity(count);
        for i in 0..count {
            if i == 0 {
                poison(&dst, SIZE)?;
            }
            let t = Instant::now();
            let o = env
                .rt
                .block_on(c.get_object(BUCKET, key, &dst, 0, None))
                .with_context(|| format!("4 KiB GET on {}", way.label()))?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            check(&o, way, SIZE as u64, "GET")?;
            if i == 0 {
                verify(&dst, SEED, 0, SIZE)?;
            }
        }
        verify(&dst, SEED, 0, SIZE)?;
        ms.sort_by(f64::total_cmp);
        rows.push(LatencyRow { way, ms });
    }
    env.delete(key);
    Ok(rows)
}

fn concurrency(
    env: &Env,
    clients: usize,
    requests: usize,
    size: u64,
) -> anyhow::Result<Vec<ConcurrencyRow>> {
    let len = size as usize;
    let mems: Vec<Vec<u8>> = (0..clients)
        .map(|w| {
            let mut m = vec![0u8; len];
            pattern::fill(0xc0 + w as u64, 0, &mut m);
            m
        })
        .collect();
    let regs = mems
        .into_iter()
        .map(|m| env.lib.register_owned(m))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    for way in WAYS {
        for put in [true, false] {
            let c = env.client(way);
            let tickets = AtomicU64::new(0);
            let lat = Mutex::new(Vec::new());
            let errors = AtomicU64::new(0);
            let first_error: Mutex<Option<String>> = Mutex::new(None);
            env.sampler.begin();
            let start = Instant::now();
            std::thread::scope(|s| {
                for (w, reg) in regs.iter().enumerate() {
                    let (tickets, lat, errors, first_error) =
                        (&tickets, &lat, &errors, &first_error);
                    let handle = env.rt.handle().clone();
                    s.spawn(move || {
                        let key = format!("conc/{}/{w}", way.tag());
                        let mut mine = Vec::new();
                        while (tickets.fetch_add(1, Ordering::SeqCst) as usize) < requests {
                            let t = Instant::now();
                            let r = handle.block_on(async {
                                if put {
                                    c.put_object(BUCKET, &key, reg, 0, len).await
                                } else {
                                    c.get_object(BUCKET, &key, reg, 0, None).await
                                }
                            });
                            let r = r.map_err(anyhow::Error::from).and_then(|o| {
                                check(&o, way, size, if put { "PUT" } else { "GET" })
                            });
                            match r {
                                Ok(()) => mine.push(t.elapsed().as_secs_f64() * 1e3),
                                Err(e) => {
                                    errors.fetch_add(1, Ordering::SeqCst);
                                    first_error
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .get_or_insert(format!("{e:#}"));
                                }
                            }
                        }
                        lat.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
                    });
                }
            });
            let secs = start.elapsed().as_secs_f64();
            let memory = env.sampler.window();
            let mut lat_ms = lat.into_inner().unwrap_or_else(|p| p.into_inner());
            lat_ms.sort_by(f64::total_cmp);
            let ok = lat_ms.len() as u64;
            // After the GET phase: every client reads its object back into
            // a poisoned buffer and checks every byte.
            let mut verified = 0;
            if !put {
                for (w, reg) in regs.iter().enumerate() {
                    let key = format!("conc/{}/{w}", way.tag());
                    poison(reg, len)?;
                    let o = env.rt.block_on(c.get_object(BUCKET, &key, reg, 0, None))?;
                    check(&o, way, size, "GET")?;
                    verify(reg, 0xc0 + w as u64, 0, len)
                        .with_context(|| format!("client {w} on {}", way.label()))?;
                    verified += 1;
                }
            }
            eprintln!(
                "  concurrency {} {}: {ok} ok, {} errors in {secs:.1} s",
                way.label(),
                if put { "PUT" } else { "GET" },
                errors.load(Ordering::SeqCst)
            );
            rows.push(ConcurrencyRow {
                way,
                put,
                ok,
                errors: errors.load(Ordering::SeqCst),
                first_error: first_error.into_inner().unwrap_or_else(|p| p.into_inner()),
                secs,
                bytes: ok * size,
                lat_ms,
                memory,
                verified,
            });
        }
        for w in 0..clients {
            env.delete(&format!("conc/{}/{w}", way.tag()));
        }
    }
    Ok(rows)
}

fn big(env: &Env, size: u64) -> anyhow::Result<BigRow> {
    const SEED: u64 = 0xb16;
    let len = size as usize;
    let mut mem = vec![0u8; len];
    pattern::fill(SEED, 0, &mut mem);
    let reg = env.lib.register_owned(mem)?;
    let key = "big/object";
    env.sampler.begin();
    let t = Instant::now();
    let o = env
        .rt
        .block_on(env.rdma.put_object(BUCKET, key, &reg, 0, len))
        .with_context(|| format!("RDMA PUT of {}", human(size)))?;
    let put_secs = t.elapsed().as_secs_f64();
    check(&o, Way::Rdma, size, "PUT")?;
    if o.parts != 1 {
        bail!(
            "the {} PUT went in {} parts, not one request",
            human(size),
            o.parts
        );
    }
    let put_memory = env.sampler.window();
    poison(&reg, len)?;
    env.sampler.begin();
    let t = Instant::now();
    let o = env
        .rt
        .block_on(env.rdma.get_object(BUCKET, key, &reg, 0, None))
        .with_context(|| format!("RDMA GET of {}", human(size)))?;
    let get_secs = t.elapsed().as_secs_f64();
    let get_memory = env.sampler.window();
    check(&o, Way::Rdma, size, "GET")?;
    verify(&reg, SEED, 0, len)?;
    drop(reg);
    env.delete(key);
    Ok(BigRow {
        size,
        put_secs,
        get_secs,
        put_memory,
        get_memory,
    })
}

fn huge(env: &Env, size: u64, part: u64) -> anyhow::Result<HugeRow> {
    const SEED: u64 = 0x40e;
    let parts = size.div_ceil(part) as usize;
    let reg = env.lib.register_owned(vec![0u8; part as usize])?;
    let key = "huge/object";
    let wall = Instant::now();
    env.sampler.begin();
    let base = env.sampler.window();
    let upload_id = env
        .rt
        .block_on(env.rdma.create_multipart_upload(BUCKET, key))?;
    let mut per_request_peak_kib = Vec::new();
    let mut completed = Vec::new();
    let mut put_secs = 0.0;
    let result: anyhow::Result<()> = (|| {
        for i in 0..parts {
            let off = i as u64 * part;
            let n = (size - off).min(part) as usize;
            fill(&reg, SEED, off, n)?;
            let before = env.sampler.window().peak_kib;
            env.sampler.begin();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(
                    env.rdma
                        .upload_part(BUCKET, key, &upload_id, (i + 1) as u32, &reg, 0, n),
                )
                .with_context(|| format!("RDMA UploadPart {}", i + 1))?;
            put_secs += t.elapsed().as_secs_f64();
            let w = env.sampler.window();
            per_request_peak_kib.push(w.peak_kib);
            // Keep the section's window: restart it at the larger peak.
            let _ = before;
            check(&o, Way::Rdma, n as u64, "UploadPart")?;
            completed.push(hipobj_s3::CompletedPart {
                part_number: (i + 1) as u32,
                etag: o
                    .etag
                    .clone()
                    .context("UploadPart answered without an ETag")?,
            });
            eprintln!("  {}: part {} of {parts} sent", human(size), i + 1);
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = env
            .rt
            .block_on(env.rdma.abort_multipart_upload(BUCKET, key, &upload_id));
        return Err(e);
    }
    // Through the gateway like every other request: s3s-fs joins the parts
    // before it answers (36 s for 10 GiB), within the gateway's
    // --upstream-long-op-timeout; no object bytes move in this request.
    let t = Instant::now();
    env.rt
        .block_on(
            env.rdma
                .complete_multipart_upload(BUCKET, key, &upload_id, &completed),
        )
        .context("CompleteMultipartUpload")?;
    let complete_secs = t.elapsed().as_secs_f64();
    let mut get_secs = 0.0;
    for i in 0..parts {
        let off = i as u64 * part;
        let n = (size - off).min(part);
        env.sampler.begin();
        let t = Instant::now();
        let o = env
            .rt
            .block_on(
                env.rdma
                    .get_object(BUCKET, key, &reg, 0, Some((off, off + n - 1))),
            )
            .with_context(|| format!("RDMA range GET {}", i + 1))?;
        get_secs += t.elapsed().as_secs_f64();
        per_request_peak_kib.push(env.sampler.window().peak_kib);
        check(&o, Way::Rdma, n, "range GET")?;
        verify(&reg, SEED, off, n as usize)?;
        eprintln!(
            "  {}: range {} of {parts} read and checked",
            human(size),
            i + 1
        );
    }
    let wall_secs = wall.elapsed().as_secs_f64();
    drop(reg);
    env.delete(key);
    let peak = per_request_peak_kib.iter().copied().max().unwrap_or(0);
    let end = env.sampler.window();
    Ok(HugeRow {
        size,
        part,
        parts,
        put_secs,
        complete_secs,
        get_secs,
        wall_secs,
        per_request_peak_kib,
        memory: Window {
            start_kib: base.start_kib,
            peak_kib: peak.max(end.peak_kib),
            end_kib: end.end_kib,
            hwm_kib: end.hwm_kib,
            ..end
        },
    })
}

// -------------------------------------------------------------------------
// The run.

/// Runs the benchmark and prints (and writes) the markdown report.
pub fn run(a: Args) -> anyhow::Result<()> {
    let plan = Plan::from(&a)?;
    let gateway_bin = procs::locate_gateway(a.gateway_bin.as_deref())?;
    let s3s_fs_bin = procs::locate_s3s_fs(a.s3s_fs.as_deref())?;
    let machine = machine::describe();
    let load_start = machine::loadavg();
    let started = Instant::now();

    let mut builder = tempfile::Builder::new();
    builder.prefix("hipobj-bench-");
    let tmp = match &a.tmp_dir {
        Some(d) => builder.tempdir_in(d),
        None => builder.tempdir(),
    }
    .context("creating the temporary directory")?;
    let data = tmp.path().join("data");
    std::fs::create_dir(&data)?;

    let up_port = procs::free_port()?;
    let up_addr = SocketAddr::from(([127, 0, 0, 1], up_port));
    let mut cmd = Command::new(&s3s_fs_bin);
    cmd.args(["--host", "127.0.0.1", "--port", &up_port.to_string()])
        .args(["--access-key", UP_KEY, "--secret-key", UP_SECRET])
        .arg(&data)
        .env("RUST_LOG", &a.server_log);
    let mut upstream = Child::spawn("s3s-fs", cmd, tmp.path().join("s3s-fs.log"))?;
    upstream.wait_listening(up_addr, Duration::from_secs(30))?;

    let gw_port = procs::free_port()?;
    let gw_addr = SocketAddr::from(([127, 0, 0, 1], gw_port));
    let mut cmd = Command::new(&gateway_bin);
    cmd.args(["--listen", &gw_addr.to_string()])
        .args(["--upstream", &format!("http://{up_addr}")])
        .args(["--upstream-access-key", UP_KEY])
        .args(["--upstream-secret-key", UP_SECRET])
        .args(["--access-key", GW_KEY, "--secret-key", GW_SECRET])
        .args(["--rdma-device", "soft0"])
        .args(["--chunk-mib", &plan.chunk_mib.to_string()])
        .args(["--staging-buffers", &plan.staging_buffers.to_string()])
        .env("RUST_LOG", &a.server_log)
        .env_remove("HIPOBJ_PROVIDER");
    let mut gateway = Child::spawn("hipobj-gateway", cmd, tmp.path().join("gateway.log"))?;
    gateway.wait_listening(gw_addr, Duration::from_secs(30))?;
    eprintln!(
        "hipobj-bench gateway: s3s-fs {} on {up_addr}, hipobj-gateway {} on {gw_addr}, store in {}",
        s3s_fs_bin.display(),
        gateway_bin.display(),
        data.display()
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
        }
        S3Client::new(c)
    };
    let gw_url = format!("http://{gw_addr}");
    let env = Env {
        rdma: mk(gw_url.clone(), GW_KEY, GW_SECRET, true)?,
        gw_http: mk(gw_url, GW_KEY, GW_SECRET, false)?,
        direct: mk(format!("http://{up_addr}"), UP_KEY, UP_SECRET, false)?,
        idle_rss_kib: sampler.rss_kib(),
        sampler,
        store_pid: upstream.pid(),
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
    let gateway_alive = gateway.running();
    gateway.stop();
    upstream.stop();
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
    drop(tmp);
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

// -------------------------------------------------------------------------
// The report.

struct Report<'a> {
    plan: &'a Plan,
    machine: &'a Machine,
    load_start: String,
    load_end: String,
    results: &'a Results,
    idle_rss_kib: u64,
    final_hwm_kib: u64,
    samples: u64,
    total_secs: f64,
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    quantile(&s, 0.5)
}

fn render(r: &Report<'_>) -> String {
    let p = r.plan;
    let m = r.machine;
    let pool_mib = (p.chunk_mib * p.staging_buffers) as u64;
    let mut o = String::new();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "### hipobj-bench gateway{}",
        if p.quick { " --quick" } else { "" }
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Run {date}, {:.0} s. Machine: {} CPUs ({}), {:.1} GiB memory, Linux {}, {}. \
         Load average (1, 5, 15 min) {} at the start, {} at the end.",
        r.total_secs, m.cpus, m.cpu_model, m.mem_gib, m.kernel, m.rustc, r.load_start, r.load_end
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Gateway: staging pool {} × {} MiB = {pool_mib} MiB, software RDMA provider (soft0) on 127.0.0.1; \
         idle resident memory {:.0} MiB (the pool is registered, so resident, from the start); \
         peak resident (VmHWM) over the whole run {:.0} MiB, {:+.0} MiB over the pool \
         (VmRSS sampled every 50 ms from /proc/<pid>/status, {} samples).",
        p.staging_buffers,
        p.chunk_mib,
        mib(r.idle_rss_kib),
        mib(r.final_hwm_kib),
        mib(r.final_hwm_kib) - pool_mib as f64,
        r.samples
    );
    let res = r.results;
    if !res.throughput.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "#### Throughput (GiB/s, best of {} rounds; median in parentheses)",
            p.rounds
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| size | op | RDMA via gateway | HTTP via gateway | HTTP direct | RDMA gw / direct | RDMA gw / HTTP gw |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|");
        for row in &res.throughput {
            for (k, op) in ["PUT", "GET"].iter().enumerate() {
                let rate = |w: usize| gib_s(row.size, best(&row.secs[w][k]));
                let med = |w: usize| gib_s(row.size, median(&row.secs[w][k]));
                let _ = writeln!(
                    o,
                    "| {} | {op} | {:.3} ({:.3}) | {:.3} ({:.3}) | {:.3} ({:.3}) | {:.2} | {:.2} |",
                    human(row.size),
                    rate(0),
                    med(0),
                    rate(1),
                    med(1),
                    rate(2),
                    med(2),
                    rate(0) / rate(2),
                    rate(0) / rate(1)
                );
            }
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "Seconds per round:");
        let _ = writeln!(o);
        let _ = writeln!(o, "| size | op | path | seconds |");
        let _ = writeln!(o, "|---|---|---|---|");
        for row in &res.throughput {
            for (k, op) in ["PUT", "GET"].iter().enumerate() {
                for (w, way) in WAYS.iter().enumerate() {
                    let s: Vec<String> = row.secs[w][k].iter().map(|s| format!("{s:.3}")).collect();
                    let _ = writeln!(
                        o,
                        "| {} | {op} | {} | {} |",
                        human(row.size),
                        way.label(),
                        s.join(", ")
                    );
                }
            }
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "CPU seconds per GiB moved, by process (/proc/<pid>/stat, all rounds):"
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| size | op | path | s3s-fs | gateway | client | total | wall s/GiB (best) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
        for row in &res.throughput {
            let gib = (row.size as f64 / (1u64 << 30) as f64) * p.rounds as f64;
            for (k, op) in ["PUT", "GET"].iter().enumerate() {
                for (w, way) in WAYS.iter().enumerate() {
                    let c = row.cpu[w][k];
                    let _ = writeln!(
                        o,
                        "| {} | {op} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                        human(row.size),
                        way.label(),
                        c.store / gib,
                        c.gateway / gib,
                        c.client / gib,
                        (c.store + c.gateway + c.client) / gib,
                        best(&row.secs[w][k]) / (row.size as f64 / (1u64 << 30) as f64)
                    );
                }
            }
        }
        let _ = writeln!(o);
        for row in &res.throughput {
            let _ = writeln!(
                o,
                "Gateway resident memory during the {} rounds: {:.0} MiB at the start, {:.0} MiB at the peak ({:+.0} MiB over the {pool_mib} MiB pool).",
                human(row.size),
                mib(row.memory.start_kib),
                mib(row.memory.peak_kib),
                mib(row.memory.peak_kib) - pool_mib as f64
            );
        }
    }
    if !res.latency.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "#### 4 KiB GET latency ({} sequential GETs per path after 20 of warm-up)",
            p.latency_count
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| path | p50 (ms) | p99 (ms) | mean (ms) | GETs over {STALL_MS} ms | p50 of the rest (ms) | p99 of the rest (ms) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|");
        for row in &res.latency {
            let mean = row.ms.iter().sum::<f64>() / row.ms.len().max(1) as f64;
            let fast: Vec<f64> = row.ms.iter().copied().filter(|m| *m < STALL_MS).collect();
            let _ = writeln!(
                o,
                "| {} | {:.3} | {:.3} | {:.3} | {:.0}% | {:.3} | {:.3} |",
                row.way.label(),
                quantile(&row.ms, 0.5),
                quantile(&row.ms, 0.99),
                mean,
                100.0 * (row.ms.len() - fast.len()) as f64 / row.ms.len().max(1) as f64,
                quantile(&fast, 0.5),
                quantile(&fast, 0.99)
            );
        }
    }
    if !res.concurrency.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "#### {} concurrent clients, {} requests of {} per path and direction",
            p.clients,
            p.requests,
            human(p.concurrent_size)
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| path | op | ok | errors | seconds | GiB/s | p50 (ms) | p99 (ms) | gateway peak RSS (MiB) | peak − pool (MiB) | peak within pool + {MEMORY_SLACK_MIB} MiB | gateway threads, peak (own + soft provider's) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for row in &res.concurrency {
            let over = mib(row.memory.peak_kib) - pool_mib as f64;
            let within = match row.way {
                Way::Rdma if over <= MEMORY_SLACK_MIB as f64 => "yes",
                Way::Rdma => "**no**",
                // The plain proxy's memory is its connections' buffers,
                // not the pool; the direct path does not use the gateway.
                _ => "n/a",
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {:.2} | {:.3} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} |",
                row.way.label(),
                if row.put { "PUT" } else { "GET" },
                row.ok,
                row.errors,
                row.secs,
                gib_s(row.bytes, row.secs),
                quantile(&row.lat_ms, 0.5),
                quantile(&row.lat_ms, 0.99),
                mib(row.memory.peak_kib),
                over,
                within,
                match row.way {
                    Way::Direct => "n/a".to_string(),
                    _ => format!("{} + {}", row.memory.threads_own, row.memory.threads_soft),
                }
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "The gateway's memory is sampled per phase; it does not shrink between phases (the allocator keeps what it had), so a phase's peak is at least the previous one's. RDMA runs first. Threads are sampled with the memory: the gateway's own (its runtime's workers, blocking pool, sweeper, metrics) and the software provider's (`soft-*`: per QP an engine and a receiver, per incoming connection a responder; a NIC has none)."
        );
        let verified: usize = res.concurrency.iter().map(|r| r.verified).sum();
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "After each GET phase every client read its object back into a poisoned buffer and checked every byte ({verified} objects checked)."
        );
        for row in &res.concurrency {
            if let Some(e) = &row.first_error {
                let _ = writeln!(
                    o,
                    "First error ({} {}): {e}",
                    row.way.label(),
                    if row.put { "PUT" } else { "GET" }
                );
            }
        }
    }
    if let Some(b) = &res.big {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "#### {} in one registered buffer, by RDMA",
            human(b.size)
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| op | seconds | GiB/s | gateway RSS start (MiB) | peak (MiB) | end (MiB) | peak − pool (MiB) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|");
        for (op, secs, w) in [
            ("PUT (one request)", b.put_secs, b.put_memory),
            ("GET (one request)", b.get_secs, b.get_memory),
        ] {
            let _ = writeln!(
                o,
                "| {op} | {secs:.2} | {:.3} | {:.0} | {:.0} | {:.0} | {:.0} |",
                gib_s(b.size, secs),
                mib(w.start_kib),
                mib(w.peak_kib),
                mib(w.end_kib),
                mib(w.peak_kib) - pool_mib as f64
            );
        }
    }
    if let Some(h) = &res.huge {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "#### {} by RDMA: {} parts of {} from one reused registered buffer, then {} range GETs into it",
            human(h.size),
            h.parts,
            human(h.part),
            h.parts
        );
        let _ = writeln!(o);
        let min = h.per_request_peak_kib.iter().copied().min().unwrap_or(0);
        let max = h.per_request_peak_kib.iter().copied().max().unwrap_or(0);
        let _ = writeln!(o, "| step | seconds | GiB/s |");
        let _ = writeln!(o, "|---|---|---|");
        let _ = writeln!(
            o,
            "| UploadPart × {} (requests only) | {:.2} | {:.3} |",
            h.parts,
            h.put_secs,
            gib_s(h.size, h.put_secs)
        );
        let _ = writeln!(
            o,
            "| CompleteMultipartUpload, through the gateway (s3s-fs joins the parts before answering) | {:.2} | |",
            h.complete_secs
        );
        let _ = writeln!(
            o,
            "| range GET × {} (requests only) | {:.2} | {:.3} |",
            h.parts,
            h.get_secs,
            gib_s(h.size, h.get_secs)
        );
        let _ = writeln!(
            o,
            "| whole section, with pattern fills and checks | {:.2} | |",
            h.wall_secs
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Gateway resident memory: {:.0} MiB before, per-request peaks {:.0} to {:.0} MiB over the {} requests (flat within {:.0} MiB), {:.0} MiB after; the peak is {:+.0} MiB over the {pool_mib} MiB pool. Every byte read back matched.",
            mib(h.memory.start_kib),
            mib(min),
            mib(max),
            h.per_request_peak_kib.len(),
            mib(max - min),
            mib(h.memory.end_kib),
            mib(max) - pool_mib as f64
        );
    }
    o
}
