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
//! The harness in parts: [`args`] (the parameters), [`common`] (the three
//! ways, the clients and processes, the pattern checks: what the other
//! parts share), [`setup`] (the binaries, the processes, the clients, the
//! warm-up), [`sections`] (what each section measures, and the rows it
//! yields) and [`report`] (the markdown report); the run is here.

mod args;
mod common;
mod report;
mod sections;
mod setup;

use std::time::Instant;

use anyhow::{bail, Context};

use crate::machine;
use args::Plan;
pub use args::{Args, Section};
use common::BUCKET;
use report::{render, Report};
use sections::{big, concurrency, huge, latency, throughput, Results};

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
                Section::Small => {
                    for size in &plan.small_sizes {
                        let rows =
                            concurrency(&env, plan.small_clients, plan.small_requests, *size)?;
                        results.small.push((*size, rows));
                    }
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
    let errors: u64 = results
        .small
        .iter()
        .flat_map(|(_, rows)| rows)
        .map(|r| r.errors)
        .sum();
    if errors > 0 {
        bail!("{errors} requests failed in the small-objects section");
    }
    Ok(())
}
