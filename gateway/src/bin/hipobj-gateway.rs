//! `hipobj-gateway`: the RDMA S3 front in front of MinIO or any S3 endpoint
//! (or, without `--upstream`, an embedded store so a new user can try it at
//! once).

use anyhow::Context as _;
use clap::Parser;
use hipobj_gateway::config::{EngineConfig, KeyPair, RdmaConfig, UpstreamConfig};
use hipobj_gateway::engine::{self, Engine};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Serves S3 requests that carry `x-amz-rdma-token` by one-sided RDMA, and
/// proxies every other request to the store; every request is checked with
/// SigV4 on the way in and signed again on the way out.
#[derive(Debug, Parser)]
#[command(name = "hipobj-gateway", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "HIPOBJ_LISTEN", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The S3 endpoint in front of which to serve (http://host:port). Without
    /// it, the embedded store serves the objects (in --data-dir).
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
    /// Access key clients sign with.
    #[arg(long, env = "HIPOBJ_ACCESS_KEY", default_value = "hipobj-test-key")]
    access_key: String,
    /// Secret key clients sign with.
    #[arg(
        long,
        env = "HIPOBJ_SECRET_KEY",
        default_value = "hipobj-test-secret",
        hide_env_values = true
    )]
    secret_key: String,
    /// Region requests are signed for.
    #[arg(long, env = "HIPOBJ_REGION", default_value = "us-east-1")]
    region: String,
    /// Directory of the embedded store (a temporary one if absent).
    #[arg(long, env = "HIPOBJ_DATA_DIR", conflicts_with = "upstream")]
    data_dir: Option<PathBuf>,
    /// RDMA device (soft0, soft:<ipv4>, mlx5_0, bnxt_re0, ...); default: the
    /// first hardware device, else the software provider.
    #[arg(long, env = "HIPOBJ_RDMA_DEVICE")]
    rdma_device: Option<String>,
    /// Bytes per staging buffer (MiB).
    #[arg(long, env = "HIPOBJ_CHUNK_MIB", default_value_t = 8)]
    chunk_mib: usize,
    /// Staging buffers (chunk × buffers is the RDMA memory; default 256 MiB).
    #[arg(long, env = "HIPOBJ_STAGING_BUFFERS", default_value_t = 32)]
    staging_buffers: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
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
            (
                UpstreamConfig::Remote {
                    endpoint: endpoint.clone(),
                    credentials,
                },
                None,
            )
        }
        None => engine::embedded(a.data_dir.clone())?,
    };
    let cfg = EngineConfig {
        listen: a.listen,
        region: a.region.clone(),
        credentials: vec![KeyPair {
            access_key: a.access_key.clone(),
            secret_key: a.secret_key.clone(),
        }],
        max_skew: Duration::from_secs(15 * 60),
        upstream,
        rdma: RdmaConfig {
            device: a.rdma_device.clone(),
            chunk_size: a.chunk_mib.clamp(1, 1024) << 20,
            buffers: a.staging_buffers.max(1),
            ..RdmaConfig::default()
        },
    };
    let engine = Arc::new(Engine::new(&cfg).context("starting the engine")?);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    tracing::info!(listen = %listener.local_addr()?, "hipobj-gateway: {}", engine.describe());
    engine::serve(listener, engine, shutdown_signal()).await?;
    tracing::info!("hipobj-gateway stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}
