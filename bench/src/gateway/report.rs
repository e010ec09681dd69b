//! The markdown report of a run.

use std::fmt::Write as _;
use std::process::Command;

use super::args::Plan;
use super::common::{mib, quantile, Way, MEMORY_SLACK_MIB, STALL_MS, WAYS};
use super::sections::{BigRow, ConcurrencyRow, HugeRow, LatencyRow, Results, ThroughputRow};
use crate::machine::Machine;
use crate::size::{gib_s, human};

pub(super) struct Report<'a> {
    pub(super) plan: &'a Plan,
    pub(super) machine: &'a Machine,
    pub(super) load_start: String,
    pub(super) load_end: String,
    pub(super) results: &'a Results,
    pub(super) idle_rss_kib: u64,
    pub(super) final_hwm_kib: u64,
    pub(super) samples: u64,
    pub(super) total_secs: f64,
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    quantile(&s, 0.5)
}

/// The markdown report: the run and the machine, then one section per
/// part that ran.
pub(super) fn render(r: &Report<'_>) -> String {
    let p = r.plan;
    let pool_mib = (p.chunk_mib * p.staging_buffers) as u64;
    let mut o = String::new();
    header(&mut o, r, pool_mib);
    let res = r.results;
    if !res.throughput.is_empty() {
        throughput(&mut o, p, &res.throughput, pool_mib);
    }
    if !res.latency.is_empty() {
        latency(&mut o, p, &res.latency);
    }
    if !res.small.is_empty() {
        small(&mut o, p, &res.small);
    }
    if !res.concurrency.is_empty() {
        concurrency(&mut o, p, &res.concurrency, pool_mib);
    }
    if let Some(b) = &res.big {
        big(&mut o, b, pool_mib);
    }
    if let Some(h) = &res.huge {
        huge(&mut o, h, pool_mib);
    }
    o
}

/// The title, the machine, the load and the gateway's pool and memory.
fn header(o: &mut String, r: &Report<'_>, pool_mib: u64) {
    let (p, m) = (r.plan, r.machine);
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
         idle resident memory {:.0} MiB (the software provider's registration does not pin pages: the pool becomes resident as transfers first touch it, where a NIC's registration pins it at start); \
         peak resident (VmHWM) over the whole run {:.0} MiB, {:+.0} MiB over the pool \
         (VmRSS sampled every 50 ms from /proc/<pid>/status, {} samples).",
        p.staging_buffers,
        p.chunk_mib,
        mib(r.idle_rss_kib),
        mib(r.final_hwm_kib),
        mib(r.final_hwm_kib) - pool_mib as f64,
        r.samples
    );
}

/// Throughput: rates, seconds per round, CPU per GiB, memory.
fn throughput(o: &mut String, p: &Plan, rows: &[ThroughputRow], pool_mib: u64) {
    heading(
        o,
        format_args!(
            "Throughput (GiB/s, best of {} rounds; median in parentheses)",
            p.rounds
        ),
    );
    table(o, "| size | op | RDMA via gateway | HTTP via gateway | HTTP direct | RDMA gw / direct | RDMA gw / HTTP gw |");
    for row in rows {
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
    table(o, "| size | op | path | seconds |");
    for row in rows {
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
    table(
        o,
        &format!(
            "| size | op | path | {} | gateway | client | total | wall s/GiB (best) |",
            p.store_name
        ),
    );
    for row in rows {
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
    for row in rows {
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

/// 4 KiB GET latency.
fn latency(o: &mut String, p: &Plan, rows: &[LatencyRow]) {
    heading(
        o,
        format_args!(
            "4 KiB GET latency ({} sequential GETs per path after 20 of warm-up)",
            p.latency_count
        ),
    );
    table(o, &format!("| path | p50 (ms) | p99 (ms) | mean (ms) | GETs over {STALL_MS} ms | p50 of the rest (ms) | p99 of the rest (ms) |"));
    for row in rows {
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

/// Concurrent clients: rates, latency, memory and threads, errors.
fn concurrency(o: &mut String, p: &Plan, rows: &[ConcurrencyRow], pool_mib: u64) {
    heading(
        o,
        format_args!(
            "{} concurrent clients, {} requests of {} per path and direction",
            p.clients,
            p.requests,
            human(p.concurrent_size)
        ),
    );
    table(o, &format!("| path | op | ok | errors | seconds | GiB/s | p50 (ms) | p99 (ms) | gateway peak RSS (MiB) | peak − pool (MiB) | peak within pool + {MEMORY_SLACK_MIB} MiB | gateway threads, peak (own + soft provider's) |"));
    for row in rows {
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
    let verified: usize = rows.iter().map(|r| r.verified).sum();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "After each GET phase every client read its object back into a poisoned buffer and checked every byte ({verified} objects checked)."
    );
    for row in rows {
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

/// Small objects from several clients at once: operations per second and
/// latency per path, each against plain HTTP through the gateway.
fn small(o: &mut String, p: &Plan, sizes: &[(u64, Vec<ConcurrencyRow>)]) {
    heading(
        o,
        format_args!(
            "Small objects: {} concurrent clients, {} requests per size, path and direction (RDMA protocol: {})",
            p.small_clients, p.small_requests, p.rdma_protocol
        ),
    );
    table(
        o,
        "| size | op | path | ok | errors | ops/s | p50 (ms) | p99 (ms) | ops/s ÷ HTTP via gateway | p50 ÷ HTTP via gateway | CPU µs per op: clients | gateway | store | all |",
    );
    for (size, rows) in sizes {
        for put in [true, false] {
            let http = rows
                .iter()
                .find(|r| r.put == put && matches!(r.way, Way::GatewayHttp));
            for row in rows.iter().filter(|r| r.put == put) {
                let ops = row.ok as f64 / row.secs.max(f64::MIN_POSITIVE);
                let p50 = quantile(&row.lat_ms, 0.5);
                let (rate, lat) = match http {
                    Some(h) => {
                        let h_ops = h.ok as f64 / h.secs.max(f64::MIN_POSITIVE);
                        let h_p50 = quantile(&h.lat_ms, 0.5);
                        (
                            format!("{:.2}x", ops / h_ops.max(f64::MIN_POSITIVE)),
                            format!("{:.2}x", p50 / h_p50.max(f64::MIN_POSITIVE)),
                        )
                    }
                    None => ("n/a".to_string(), "n/a".to_string()),
                };
                let per_op = |secs: f64| secs * 1e6 / (row.ok.max(1) as f64);
                let c = row.cpu;
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {rate} | {lat} | {:.0} | {:.0} | {:.0} | {:.0} |",
                    human(*size),
                    if put { "PUT" } else { "GET" },
                    row.way.label(),
                    row.ok,
                    row.errors,
                    ops,
                    p50,
                    quantile(&row.lat_ms, 0.99),
                    per_op(c.client),
                    per_op(c.gateway),
                    per_op(c.store),
                    per_op(c.client + c.gateway + c.store),
                );
            }
        }
    }
    let _ = writeln!(o);
    let verified: usize = sizes.iter().flat_map(|(_, r)| r).map(|r| r.verified).sum();
    let _ = writeln!(
        o,
        "After each GET phase every client read its object back into a poisoned buffer and checked every byte ({verified} objects checked)."
    );
    for (size, rows) in sizes {
        for row in rows {
            if let Some(e) = &row.first_error {
                let _ = writeln!(
                    o,
                    "First error ({} {} {}): {e}",
                    human(*size),
                    row.way.label(),
                    if row.put { "PUT" } else { "GET" }
                );
            }
        }
    }
}

/// One object in one registered buffer.
fn big(o: &mut String, b: &BigRow, pool_mib: u64) {
    heading(
        o,
        format_args!("{} in one registered buffer, by RDMA", human(b.size)),
    );
    table(o, "| op | seconds | GiB/s | gateway RSS start (MiB) | peak (MiB) | end (MiB) | peak − pool (MiB) |");
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

/// An object larger than any buffer, in parts and ranges.
fn huge(o: &mut String, h: &HugeRow, pool_mib: u64) {
    heading(o, format_args!("{} by RDMA: {} parts of {} from one reused registered buffer, then {} range GETs into it", human(h.size), h.parts, human(h.part), h.parts));
    let min = h.per_request_peak_kib.iter().copied().min().unwrap_or(0);
    let max = h.per_request_peak_kib.iter().copied().max().unwrap_or(0);
    table(o, "| step | seconds | GiB/s |");
    let _ = writeln!(
        o,
        "| UploadPart × {} (requests only) | {:.2} | {:.3} |",
        h.parts,
        h.put_secs,
        gib_s(h.size, h.put_secs)
    );
    let _ = writeln!(
        o,
        "| CompleteMultipartUpload, through the gateway (the store joins the parts before answering) | {:.2} | |",
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

/// A section's heading, between blank lines.
fn heading(o: &mut String, title: std::fmt::Arguments<'_>) {
    let _ = writeln!(o);
    let _ = writeln!(o, "#### {title}");
    let _ = writeln!(o);
}

/// A table's header row (`| a | b |`) and the separator under it.
fn table(o: &mut String, header: &str) {
    let _ = writeln!(o, "{header}");
    let columns = header.matches('|').count().saturating_sub(1);
    let _ = writeln!(o, "{}|", "|---".repeat(columns));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_and_tables() {
        let mut o = String::new();
        heading(&mut o, format_args!("{} in one buffer", "4 GiB"));
        table(&mut o, "| op | seconds | GiB/s |");
        assert_eq!(
            o,
            "\n#### 4 GiB in one buffer\n\n| op | seconds | GiB/s |\n|---|---|---|\n"
        );
    }
}
