//! `hipobj-gateway`: the RDMA S3 front in front of MinIO or any S3 endpoint
//! (or, without `--upstream`, an embedded store so a new user can try it at
//! once).
//!
//! It runs on the system allocator (glibc's malloc). Registered memory is
//! not heap memory (each buffer is a mapping of its own), so the heap holds
//! only connections, frames and tables. Under 64 concurrent transfers, glibc
//! peaked 120 MiB below mimalloc, whose per-thread heaps the software
//! provider's threads multiply (docs/security.md, "Soak").

#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::Parser;
use hipobj_gateway::cli::{self, CommonArgs, UpstreamArgs};
use hipobj_gateway::config::EngineConfig;
use hipobj_gateway::engine::{self, Engine};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Serves S3 requests that carry `x-amz-rdma-token` by one-sided RDMA, and
/// proxies every other request to the store; every request is checked with
/// SigV4 on the way in and signed again on the way out.
#[derive(Debug, Parser)]
#[command(name = "hipobj-gateway", version, after_help = cli::AFTER_HELP)]
struct Args {
    /// Address to listen on (port 0 picks a free one; the first line printed
    /// says which).
    #[arg(long, env = "HIPOBJ_LISTEN", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// Directory of the embedded store (a temporary one if absent).
    #[arg(long, env = "HIPOBJ_DATA_DIR", conflicts_with = "upstream")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    cli::init_tracing(a.common.log_format);
    let options = a.upstream.options()?;
    let (upstream, _tmp) = match a.upstream.config()? {
        Some(upstream) => (upstream, None),
        None => engine::embedded(a.data_dir.clone())?,
    };
    let cfg = EngineConfig {
        listen: a.listen,
        region: a.common.region.clone(),
        credentials: a.common.credentials()?,
        max_skew: a.common.max_skew(),
        upstream,
        upstream_options: options,
        rdma: a.common.rdma(),
        server: a.common.server(),
    };
    let engine = Arc::new(Engine::new(&cfg).context("starting the engine")?);
    cli::reload_credentials_on_sighup(Arc::clone(&engine), a.common.clone())
        .context("installing the SIGHUP handler")?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let local = listener.local_addr()?;
    // The first line on stdout names the address, for scripts and tests (a
    // closed stdout is no reason to stop).
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "hipobj-gateway listening on http://{local}");
        let _ = out.flush();
    }
    tracing::info!(listen = %local, "hipobj-gateway: {}", engine.describe());
    tracing::debug!(rdma = ?cfg.rdma, max_skew = ?cfg.max_skew, upstream = ?cfg.upstream_options, server = ?cfg.server, "settings");
    engine::serve(listener, engine, cli::shutdown_signal()).await?;
    tracing::info!("hipobj-gateway stopped");
    Ok(())
}
