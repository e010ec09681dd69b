//! `hipobj-bench`: benchmark harnesses that start real processes and
//! measure them.
//!
//! `hipobj-bench gateway` starts `s3s-fs` (the upstream store) and
//! `hipobj-gateway` in front of it on loopback, each as its own process,
//! and measures RDMA through the gateway against plain HTTP through the
//! gateway and plain HTTP straight to the store: throughput, latency,
//! concurrency, and the gateway's memory. Results go in
//! `docs/benchmarks.md`.

#![deny(unsafe_code)]

mod gateway;
mod machine;
mod memory;
mod size;

use clap::Parser;

/// Benchmarks of the RDMA S3 stack with real processes on loopback.
#[derive(Debug, Parser)]
#[command(name = "hipobj-bench", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// The gateway in front of a separately started s3s-fs: RDMA through
    /// the gateway, plain HTTP through the gateway, plain HTTP straight to
    /// the store.
    Gateway(gateway::Args),
}

fn main() -> anyhow::Result<()> {
    // Before any thread starts: the client library takes its provider and
    // pool size from the environment at init.
    if std::env::var_os("HIPOBJ_PROVIDER").is_none() {
        // Edition 2021, and no other thread exists yet.
        std::env::set_var("HIPOBJ_PROVIDER", "soft");
    }
    if std::env::var_os("HIPOBJ_MAX_TRANSFERS").is_none() {
        std::env::set_var("HIPOBJ_MAX_TRANSFERS", "64");
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Gateway(a) => gateway::run(a),
    }
}
