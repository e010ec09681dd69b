//! `hipobj bench`: PUT and GET by RDMA and over plain HTTP side by side,
//! for each size, through registered buffers; a table of throughput,
//! p50/p99 latency and errors, or a JSON document.
//!
//! For each size, each path (RDMA with `require_rdma`, so that a fallback
//! counts as an error; then plain HTTP into and out of the same kind of
//! registered buffers) runs a PUT phase and then a GET phase of the keys it
//! wrote, `--concurrency` workers at once, each with a registered buffer of
//! its own, for `--count` operations or for `--duration`.
//!
//! Each phase also reads the CPU time this process used (its workers and
//! the RDMA provider's threads) and, with `--server-pid`, that of server
//! processes on the same host, and reports both per operation: where RDMA
//! and HTTP are CPU-bound, their ratio of operations per second is the
//! inverse of the ratio of the CPU each operation costs, and these columns
//! show on which side it goes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hipobj::{Hipobj, Registered};
use hipobj_s3::{ClientConfig, S3Client};
use serde::Serialize;
use tokio::runtime::Handle;

use crate::aws::ConnArgs;
use crate::common::{self, NicArgs};
use crate::exit::{note, print_line, CliError};
use crate::size::{human, parse_duration, parse_size};

/// The default operations per size, path and direction.
pub const DEFAULT_COUNT: u64 = 16;

/// `hipobj bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub nic: NicArgs,
    /// Object sizes, comma-separated (4KiB, 1MiB, 64MiB, 1GiB, ...).
    #[arg(long, value_delimiter = ',', default_value = "4KiB,1MiB,64MiB", value_parser = parse_size)]
    pub sizes: Vec<u64>,
    /// Operations in flight at once, each with a registered buffer of its own.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Operations per size, path and direction [default: 16].
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Run each size, path and direction this long instead (10s, 500ms, 1m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// The bucket to write to (created when missing); the keys are removed
    /// afterwards.
    #[arg(long, default_value = "hipobj-bench")]
    pub bucket: String,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Server processes on this host (the test server, a gateway and its
    /// store, comma-separated) whose CPU time per operation is reported
    /// with this process's, in a second table and in the JSON.
    #[arg(long = "server-pid", value_delimiter = ',', value_name = "PID")]
    pub server_pids: Vec<u32>,
}

/// How much each phase runs.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    /// This many operations.
    Count(u64),
    /// This long.
    Duration(Duration),
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Object sizes.
    pub sizes: Vec<u64>,
    /// Workers at once.
    pub concurrency: usize,
    /// Operations or time per phase.
    pub amount: Amount,
    /// The bucket.
    pub bucket: String,
    /// Keys start with it.
    pub prefix: String,
    /// Whose CPU time to report per operation besides this process's:
    /// `None` reports none (a server in this process, as `hipobj demo`'s,
    /// would count twice).
    pub cpu: Option<Vec<u32>>,
}

/// One phase's results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Object size in bytes.
    pub size: u64,
    /// `put` or `get`.
    pub op: &'static str,
    /// `rdma` or `http`.
    pub path: &'static str,
    /// Operations that succeeded.
    pub ops: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Bytes moved by the operations that succeeded.
    pub bytes: u64,
    /// The phase's wall time.
    pub seconds: f64,
    /// `bytes` / `seconds`, in MiB/s.
    pub throughput_mib_s: f64,
    /// Operations per second.
    pub ops_per_s: f64,
    /// Median latency of the successful operations, in milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency, in milliseconds.
    pub p99_ms: Option<f64>,
    /// The first error, when there were any.
    pub first_error: Option<String>,
    /// CPU time this process used in the phase per successful operation,
    /// in microseconds.
    pub cpu_client_us_per_op: Option<f64>,
    /// The same for the `--server-pid` processes together.
    pub cpu_server_us_per_op: Option<f64>,
}

/// CPU time of this process and of the servers, at one moment.
#[derive(Clone, Copy)]
struct CpuNow {
    client: Option<Duration>,
    server: Option<Duration>,
}

impl CpuNow {
    fn read(servers: Option<&[u32]>) -> CpuNow {
        let Some(servers) = servers else {
            return CpuNow {
                client: None,
                server: None,
            };
        };
        let server = if servers.is_empty() {
            None
        } else {
            // A server that ended meanwhile has no time to add: none at all.
            servers
                .iter()
                .map(|p| hipobj_net::cpu::used(*p))
                .sum::<Option<Duration>>()
        };
        CpuNow {
            client: hipobj_net::cpu::used(std::process::id()),
            server,
        }
    }
}

/// Microseconds of CPU per operation between two readings.
fn per_op(before: Option<Duration>, after: Option<Duration>, ops: u64) -> Option<f64> {
    let used = after?.checked_sub(before?)?;
    (ops > 0).then(|| used.as_secs_f64() * 1e6 / ops as f64)
}

/// The `q`-quantile (nearest rank) of sorted values.
fn quantile(sorted: &[Duration], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1].as_secs_f64() * 1e3)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Put,
    Get,
}

/// One phase: `plan.concurrency` workers over their buffers.
#[allow(clippy::too_many_arguments)]
fn phase(
    rt: &Handle,
    s3: &S3Client,
    regs: &[Registered<'static, 'static>],
    written: &[AtomicBool],
    plan: &Plan,
    size: u64,
    op: Op,
    path: &'static str,
) -> Row {
    let tickets = AtomicU64::new(0);
    let lat: Mutex<Vec<Duration>> = Mutex::new(Vec::new());
    let errors = AtomicU64::new(0);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let cpu_before = CpuNow::read(plan.cpu.as_deref());
    let start = Instant::now();
    let deadline = match plan.amount {
        Amount::Duration(d) => Some(start + d),
        Amount::Count(_) => None,
    };
    std::thread::scope(|s| {
        for (w, reg) in regs.iter().enumerate() {
            let (tickets, lat, errors, first_error) = (&tickets, &lat, &errors, &first_error);
            let wrote = &written[w];
            s.spawn(move || {
                let fail = |e: String| {
                    errors.fetch_add(1, Ordering::SeqCst);
                    first_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                };
                let key = bench_key(plan, size, path, w);
                let mut mine = Vec::new();
                loop {
                    match (plan.amount, deadline) {
                        (_, Some(d)) if Instant::now() >= d => break,
                        (Amount::Count(n), _) if tickets.fetch_add(1, Ordering::SeqCst) >= n => {
                            break
                        }
                        _ => {}
                    }
                    let t = Instant::now();
                    let r = rt.block_on(async {
                        match op {
                            Op::Put => {
                                s3.put_object(&plan.bucket, &key, reg, 0, size as usize)
                                    .await
                            }
                            Op::Get => s3.get_object(&plan.bucket, &key, reg, 0, None).await,
                        }
                    });
                    match r {
                        Ok(o) if o.bytes == size => {
                            if op == Op::Put {
                                wrote.store(true, Ordering::SeqCst);
                            }
                            mine.push(t.elapsed())
                        }
                        Ok(o) => fail(format!("moved {} bytes, not {size}", o.bytes)),
                        Err(e) => fail(e.to_string()),
                    }
                }
                lat.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = CpuNow::read(plan.cpu.as_deref());
    let mut lat = lat.into_inner().unwrap_or_else(|p| p.into_inner());
    lat.sort();
    let ops = lat.len() as u64;
    let bytes = ops * size;
    Row {
        size,
        op: match op {
            Op::Put => "put",
            Op::Get => "get",
        },
        path,
        ops,
        errors: errors.into_inner(),
        bytes,
        seconds,
        throughput_mib_s: crate::size::mib_per_s(bytes, seconds),
        ops_per_s: if seconds > 0.0 {
            ops as f64 / seconds
        } else {
            0.0
        },
        p50_ms: quantile(&lat, 0.50),
        p99_ms: quantile(&lat, 0.99),
        first_error: first_error.into_inner().unwrap_or_else(|p| p.into_inner()),
        cpu_client_us_per_op: per_op(cpu_before.client, cpu_after.client, ops),
        cpu_server_us_per_op: per_op(cpu_before.server, cpu_after.server, ops),
    }
}

/// Runs the plan: for each size, RDMA then HTTP, PUT then GET. `cfg` is the
/// endpoint's configuration (without a library); the keys written are
/// deleted afterwards.
pub fn run_plan(
    rt: &Handle,
    cfg: &ClientConfig,
    lib: &Arc<Hipobj>,
    plan: &Plan,
) -> anyhow::Result<Vec<Row>> {
    let largest = plan.sizes.iter().copied().max().unwrap_or(0);
    let mut base = cfg.clone();
    // Every PUT in one request: parts of the largest size.
    base.part_size = (largest as usize).clamp(hipobj_s3::MIN_PART_SIZE, 5 << 30);
    base.rdma_memory = None;
    base.require_rdma = false;
    let http = common::client(base.clone())?;
    let mut rdma_cfg = base.with_rdma(lib.clone());
    rdma_cfg.require_rdma = true;
    let rdma = common::client(rdma_cfg)?;

    match rt.block_on(http.create_bucket(&plan.bucket)) {
        Ok(()) => {}
        Err(e) if e.status() == Some(409) => {}
        Err(e) => return Err(e).with_context(|| format!("creating the bucket {}", plan.bucket)),
    }
    let mut rows = Vec::new();
    for &size in &plan.sizes {
        let regs = (0..plan.concurrency)
            .map(|w| {
                let v: Vec<u8> = (0..size as usize)
                    .map(|i| (i as u8).wrapping_mul(31).wrapping_add(w as u8))
                    .collect();
                // Page-aligned, as `hipobj demo`'s (docs/benchmarks.md).
                let r = lib.alloc_host(size as usize)?;
                r.write(0, &v)?;
                Ok::<_, hipobj::Error>(r)
            })
            .collect::<Result<Vec<_>, _>>()
            .context("registering the buffers")?;
        for (path, s3) in [("rdma", &rdma), ("http", &http)] {
            let written: Vec<AtomicBool> = (0..plan.concurrency)
                .map(|_| AtomicBool::new(false))
                .collect();
            rows.push(phase(rt, s3, &regs, &written, plan, size, Op::Put, path));
            // A worker may have had no PUT of its own (the count ran out
            // before it started, or the time before its first PUT ended):
            // its key is written now, unmeasured, so that every GET reads a
            // key that exists.
            for (w, reg) in regs.iter().enumerate() {
                if written[w].load(Ordering::SeqCst) {
                    continue;
                }
                let key = bench_key(plan, size, path, w);
                rt.block_on(http.put_object(&plan.bucket, &key, reg, 0, size as usize))
                    .with_context(|| format!("writing {key} before the GET phase"))?;
            }
            rows.push(phase(rt, s3, &regs, &written, plan, size, Op::Get, path));
        }
    }
    // Best effort: the keys written.
    for &size in &plan.sizes {
        for path in ["rdma", "http"] {
            for w in 0..plan.concurrency {
                let key = bench_key(plan, size, path, w);
                let _ = rt.block_on(http.delete_object(&plan.bucket, &key));
            }
        }
    }
    Ok(rows)
}

/// The key worker `w` writes and reads.
fn bench_key(plan: &Plan, size: u64, path: &str, w: usize) -> String {
    format!("{}/{size}/{path}-{w}", plan.prefix)
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// Each RDMA row with the HTTP row of its size and direction.
fn side_by_side(rows: &[Row]) -> impl Iterator<Item = (&Row, &Row)> {
    rows.iter().filter(|r| r.path == "rdma").filter_map(|r| {
        rows.iter()
            .find(|h| h.path == "http" && h.size == r.size && h.op == r.op)
            .map(|h| (r, h))
    })
}

/// The table: one line per size and direction, RDMA and HTTP side by side.
pub fn table(rows: &[Row]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<9} {:<3} | {:>10} {:>9} {:>9} {:>6} | {:>10} {:>9} {:>9} {:>6} | {:>9}",
        "size",
        "op",
        "rdma MiB/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "http MiB/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "rdma/http"
    )];
    let mut errors = Vec::new();
    for (r, h) in side_by_side(rows) {
        let ratio = if r.ops > 0 && h.throughput_mib_s > 0.0 {
            format!("{:.2}x", r.throughput_mib_s / h.throughput_mib_s)
        } else {
            "-".into()
        };
        out.push(format!(
            "{:<9} {:<3} | {:>10.1} {:>9} {:>9} {:>6} | {:>10.1} {:>9} {:>9} {:>6} | {:>9}",
            human(r.size),
            r.op.to_uppercase(),
            r.throughput_mib_s,
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            r.errors,
            h.throughput_mib_s,
            fmt_ms(h.p50_ms),
            fmt_ms(h.p99_ms),
            h.errors,
            ratio
        ));
        for x in [r, h] {
            if let Some(e) = &x.first_error {
                errors.push(format!(
                    "  {} {} {}: {} error(s), first: {e}",
                    human(x.size),
                    x.op.to_uppercase(),
                    x.path,
                    x.errors
                ));
            }
        }
    }
    out.extend(cpu_table(rows));
    if !errors.is_empty() {
        out.push("errors:".into());
        out.extend(errors);
    }
    out
}

fn fmt_us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

/// CPU µs per operation of this process and the servers, RDMA and HTTP
/// side by side: only where the servers' was measured (`--server-pid`).
fn cpu_table(rows: &[Row]) -> Vec<String> {
    if rows.iter().all(|r| r.cpu_server_us_per_op.is_none()) {
        return Vec::new();
    }
    let mut out = vec![
        "CPU µs per operation (this process; the --server-pid processes):".to_string(),
        format!(
            "{:<9} {:<3} | {:>11} {:>11} {:>8} | {:>11} {:>11} {:>8} | {:>9}",
            "size",
            "op",
            "rdma client",
            "server",
            "all",
            "http client",
            "server",
            "all",
            "http/rdma"
        ),
    ];
    let all = |r: &Row| Some(r.cpu_client_us_per_op? + r.cpu_server_us_per_op?);
    for (r, h) in side_by_side(rows) {
        let ratio = match (all(r), all(h)) {
            (Some(a), Some(b)) if a > 0.0 => format!("{:.2}x", b / a),
            _ => "-".into(),
        };
        out.push(format!(
            "{:<9} {:<3} | {:>11} {:>11} {:>8} | {:>11} {:>11} {:>8} | {:>9}",
            human(r.size),
            r.op.to_uppercase(),
            fmt_us(r.cpu_client_us_per_op),
            fmt_us(r.cpu_server_us_per_op),
            fmt_us(all(r)),
            fmt_us(h.cpu_client_us_per_op),
            fmt_us(h.cpu_server_us_per_op),
            fmt_us(all(h)),
            ratio
        ));
    }
    out
}

#[derive(Serialize)]
struct Doc<'a> {
    endpoint: &'a str,
    bucket: &'a str,
    concurrency: usize,
    count: Option<u64>,
    duration_s: Option<f64>,
    results: &'a [Row],
}

/// Runs `hipobj bench`.
pub fn run(args: BenchArgs, rt: &Handle) -> Result<(), CliError> {
    if args.sizes.is_empty() || args.sizes.contains(&0) {
        return Err(CliError::Invalid(anyhow::anyhow!(
            "--sizes needs sizes of at least one byte"
        )));
    }
    if args.sizes.iter().any(|&s| s > 5 << 30) {
        return Err(CliError::Invalid(anyhow::anyhow!(
            "sizes are at most 5GiB (one PUT)"
        )));
    }
    let mut cfg = common::client_config(&args.conn).map_err(CliError::Invalid)?;
    cfg.rdma_protocol = args.nic.protocol().map_err(CliError::Invalid)?;
    if let Some(p) = args
        .server_pids
        .iter()
        .find(|p| hipobj_net::cpu::used(**p).is_none())
    {
        return Err(CliError::Invalid(anyhow::anyhow!(
            "--server-pid {p}: no such process on this host"
        )));
    }
    let lib = common::library(&args.nic.name())?;
    let amount = match args.duration {
        Some(d) => Amount::Duration(d),
        None => Amount::Count(args.count.unwrap_or(DEFAULT_COUNT)),
    };
    let plan = Plan {
        sizes: args.sizes.clone(),
        concurrency: args.concurrency.into(),
        amount,
        bucket: args.bucket.clone(),
        prefix: format!("hipobj-bench-{}", std::process::id()),
        cpu: Some(args.server_pids.clone()),
    };
    if !args.json {
        note(&format!(
            "hipobj bench: {} on {}, concurrency {}, {}",
            cfg.endpoint,
            args.nic.name(),
            plan.concurrency,
            match amount {
                Amount::Count(n) => format!("{n} operations per cell"),
                Amount::Duration(d) => format!("{:.1} s per cell", d.as_secs_f64()),
            }
        ));
    }
    let rows = run_plan(rt, &cfg, &lib, &plan)?;
    if args.json {
        let doc = Doc {
            endpoint: &cfg.endpoint,
            bucket: &plan.bucket,
            concurrency: plan.concurrency,
            count: match amount {
                Amount::Count(n) => Some(n),
                Amount::Duration(_) => None,
            },
            duration_s: match amount {
                Amount::Duration(d) => Some(d.as_secs_f64()),
                Amount::Count(_) => None,
            },
            results: &rows,
        };
        let text = serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?;
        print_line(&text)
    } else {
        for line in table(&rows) {
            print_line(&line)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v[..1], 0.99), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
