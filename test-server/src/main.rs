//! `hipobj-test-server [PORT]`: the reference RDMA S3 server. The gateway's
//! engine with the embedded store in a temporary directory (removed on
//! exit), test credentials, and `GET /health`.

#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::Parser;
use hipobj_gateway::cli::{self, CommonArgs};
use hipobj_gateway::config::EngineConfig;
use hipobj_gateway::engine::{self, Engine};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// The reference RDMA S3 server for tests and for other implementations.
#[derive(Debug, Parser)]
#[command(name = "hipobj-test-server", version, after_help = cli::AFTER_HELP)]
struct Args {
    /// Port to listen on (0 picks a free one; the first line printed says which).
    #[arg(default_value_t = 9000, env = "HIPOBJ_TEST_SERVER_PORT")]
    port: u16,
    /// Address to listen on.
    #[arg(long, env = "HIPOBJ_LISTEN_ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    addr: IpAddr,
    #[command(flatten)]
    common: CommonArgs,
}

/// The RDMA settings: the gateway's, except that the DC key is cuObject's
/// public one unless `--dc-key` says otherwise. This is the reference
/// server for tests and other implementations, whose DC clients (cuObject
/// among them) use that key; the engine logs the choice as a warning.
fn rdma_settings(common: &CommonArgs) -> hipobj_gateway::config::RdmaConfig {
    let mut rdma = common.rdma();
    rdma.dc_key = rdma.dc_key.or(Some(hipobj_gateway::rdma::DEFAULT_DC_KEY));
    rdma
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    cli::init_tracing(a.common.log_format);
    let (upstream, tmp) = engine::embedded(None)?;
    let cfg = EngineConfig {
        listen: SocketAddr::new(a.addr, a.port),
        region: a.common.region.clone(),
        credentials: a.common.credentials()?,
        max_skew: a.common.max_skew(),
        upstream,
        upstream_options: Default::default(),
        rdma: rdma_settings(&a.common),
        server: a.common.server(),
    };
    let engine = Arc::new(Engine::new(&cfg).context("starting the engine")?);
    cli::reload_credentials_on_sighup(Arc::clone(&engine), a.common.clone())
        .context("installing the SIGHUP handler")?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let local = listener.local_addr()?;
    // The first line on stdout names the address, for scripts and tests.
    println!("hipobj-test-server listening on http://{local}");
    tracing::info!(listen = %local, "hipobj-test-server: {}", engine.describe());
    engine::serve(listener, engine, cli::shutdown_signal()).await?;
    drop(tmp);
    Ok(())
}
