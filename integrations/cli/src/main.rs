//! `hipobj`: S3 over RDMA from the command line.
//!
//! Exit status: 0 on success, 2 for invalid arguments or input (as clap
//! uses for usage errors), 3 when `--require-rdma` is set and a transfer
//! would have fallen back to plain HTTP, 1 when a command fails otherwise.
//! `hipobj conformance` exits 1 when a check failed and 3 when the server
//! has no RDMA at all (docs/conformance.md).

#![forbid(unsafe_code)]

mod aws;
mod bench;
mod bounds;
mod common;
mod conformance;
mod cp;
mod demo;
mod exit;
mod json;
mod numbers;
mod ops;
mod reply_cmd;
mod size;
mod token_cmd;

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::exit::CliError;

/// S3 over RDMA: copies, listings and benchmarks through registered buffers
/// (hipObject and cuObject wire formats), a self-contained demo, and token
/// and reply tools.
#[derive(Debug, Parser)]
#[command(name = "hipobj", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Copy a local file to s3://bucket/key or back, by RDMA through
    /// registered buffers (plain HTTP as the fallback), with a summary.
    Cp(cp::CpArgs),
    /// List the buckets, or the objects under s3://bucket[/prefix].
    Ls(ops::LsArgs),
    /// Delete objects.
    Rm(ops::RmArgs),
    /// Make a bucket.
    Mb(ops::MbArgs),
    /// Measure GET and PUT by RDMA and over plain HTTP side by side.
    Bench(bench::BenchArgs),
    /// Start the test server in-process on the software RDMA provider, move
    /// an object by RDMA both ways, check the bytes, compare with plain HTTP.
    Demo(demo::DemoArgs),
    /// Check an RDMA S3 server against the protocol (docs/conformance.md):
    /// one line per check, PASS / FAIL / SKIP; exit 0 only if nothing
    /// failed, 3 if the server has no RDMA at all.
    Conformance(Box<conformance::ConformanceArgs>),
    /// Decode or encode an x-amz-rdma-token value.
    #[command(subcommand)]
    Token(token_cmd::TokenCmd),
    /// Parse an x-amz-rdma-reply value.
    #[command(subcommand)]
    Reply(reply_cmd::ReplyCmd),
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs `f` with a runtime for the S3 commands.
fn with_runtime(
    f: impl FnOnce(&tokio::runtime::Handle) -> Result<(), CliError>,
) -> Result<(), CliError> {
    init_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let r = f(rt.handle());
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    r
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Demo(_)) {
        demo::prefer_soft_provider();
    }
    let result = match cli.command {
        Command::Token(cmd) => token_cmd::run(cmd),
        Command::Reply(cmd) => reply_cmd::run(cmd),
        Command::Cp(a) => with_runtime(|rt| cp::run(a, rt)),
        Command::Ls(a) => with_runtime(|rt| ops::ls(a, rt)),
        Command::Rm(a) => with_runtime(|rt| ops::rm(a, rt)),
        Command::Mb(a) => with_runtime(|rt| ops::mb(a, rt)),
        Command::Bench(a) => with_runtime(|rt| bench::run(a, rt)),
        Command::Demo(a) => with_runtime(|rt| demo::run(a, rt)),
        Command::Conformance(a) => with_runtime(|rt| conformance::run(*a, rt)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}
