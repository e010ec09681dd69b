//! `hipobj-gateway`: the RDMA S3 front in front of MinIO or any S3 endpoint
//! (or, without `--upstream`, an embedded store so a new user can try it at
//! once).

use anyhow::Context as _;
use clap::Parser;
use hipobj_gateway::cli::{self, CommonArgs};
use hipobj_gateway::config::{EngineConfig, KeyPair, UpstreamConfig};
use hipobj_gateway::engine::{self, Engine};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Serves S3 requests that carry `x-amz-rdma-token` by one-sided RDMA, and
/// proxies every other request to the store; every request is checked with
/// SigV4 on the way in and signed again on the way out.
#[derive(Debug, Parser)]
#[command(name = "hipobj-gateway", version, after_help = cli::AFTER_HELP)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "HIPOBJ_LISTEN", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The S3 endpoint in front of which to serve (http://host:port), or
    /// several endpoints of one store separated by commas (the first healthy
    /// one in order serves, with failover). Without it, the embedded store
    /// serves the objects (in --data-dir).
    #[arg(long, env = "HIPOBJ_UPSTREAM")]
    upstream: Option<String>,
    /// Access key for the upstream.
    #[arg(long, env = "HIPOBJ_UPSTREAM_ACCESS_KEY", requires = "upstream")]
    upstream_access_key: Option<String>,
    /// Secret key for the upstream.
    #[arg(
        long,
        env = "HIPOBJ_UPSTREAM_SECRET_KEY",
        requires = "upstream",
        hide_env_values = true
    )]
    upstream_secret_key: Option<String>,
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
    let (upstream, _tmp) = match &a.upstream {
        Some(endpoint) => {
            let credentials = KeyPair {
                access_key: a
                    .upstream_access_key
                    .clone()
                    .context("--upstream-access-key is required with --upstream")?,
                secret_key: a
                    .upstream_secret_key
                    .clone()
                    .context("--upstream-secret-key is required with --upstream")?,
            };
            let endpoints: Vec<String> = endpoint
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect();
            let upstream = if endpoints.len() > 1 {
                UpstreamConfig::Cluster {
                    endpoints,
                    credentials,
                }
            } else {
                UpstreamConfig::Remote {
                    endpoint: endpoints.into_iter().next().unwrap_or_default(),
                    credentials,
                }
            };
            (upstream, None)
        }
        None => engine::embedded(a.data_dir.clone())?,
    };
    let cfg = EngineConfig {
        listen: a.listen,
        region: a.common.region.clone(),
        credentials: a.common.credentials(),
        max_skew: Duration::from_secs(15 * 60),
        upstream,
        rdma: a.common.rdma(),
    };
    let engine = Arc::new(Engine::new(&cfg).context("starting the engine")?);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    tracing::info!(listen = %listener.local_addr()?, "hipobj-gateway: {}", engine.describe());
    engine::serve(listener, engine, cli::shutdown_signal()).await?;
    tracing::info!("hipobj-gateway stopped");
    Ok(())
}
