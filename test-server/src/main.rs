//! `hipobj-test-server [PORT]`: the reference RDMA S3 server. The gateway's
//! engine with the embedded store in a temporary directory (removed on
//! exit), test credentials, and `GET /health`.

use anyhow::Context as _;
use clap::Parser;
use hipobj_gateway::config::{EngineConfig, KeyPair, RdmaConfig};
use hipobj_gateway::engine::{self, Engine};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The reference RDMA S3 server for tests and for other implementations.
#[derive(Debug, Parser)]
#[command(name = "hipobj-test-server", version)]
struct Args {
    /// Port to listen on (0 picks a free one; the first line printed says which).
    #[arg(default_value_t = 9000, env = "HIPOBJ_TEST_SERVER_PORT")]
    port: u16,
    /// Address to listen on.
    #[arg(long, env = "HIPOBJ_LISTEN_ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    addr: IpAddr,
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
    /// RDMA device (default: the first hardware device, else soft0).
    #[arg(long, env = "HIPOBJ_RDMA_DEVICE")]
    rdma_device: Option<String>,
    /// Staging buffers of 8 MiB.
    #[arg(long, env = "HIPOBJ_STAGING_BUFFERS", default_value_t = 32)]
    staging_buffers: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    let (upstream, tmp) = engine::embedded(None)?;
    let cfg = EngineConfig {
        listen: SocketAddr::new(a.addr, a.port),
        region: a.region.clone(),
        credentials: vec![KeyPair {
            access_key: a.access_key.clone(),
            secret_key: a.secret_key.clone(),
        }],
        max_skew: Duration::from_secs(15 * 60),
        upstream,
        rdma: RdmaConfig {
            device: a.rdma_device.clone(),
            buffers: a.staging_buffers.max(1),
            ..RdmaConfig::default()
        },
    };
    let engine = Arc::new(Engine::new(&cfg).context("starting the engine")?);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let local = listener.local_addr()?;
    // The first line on stdout names the address, for scripts and tests.
    println!("hipobj-test-server listening on http://{local}");
    tracing::info!(listen = %local, "hipobj-test-server: {}", engine.describe());
    engine::serve(listener, engine, shutdown_signal()).await?;
    drop(tmp);
    Ok(())
}

/// Ctrl-C or SIGTERM: stop accepting, finish what is in flight, then remove
/// the store's directory.
async fn shutdown_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
