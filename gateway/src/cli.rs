//! What the two binaries share: the flags for credentials, region and the
//! RDMA side (each with its environment variable), logging, and the
//! shutdown signal.

use crate::config::{KeyPair, RdmaConfig};

/// The `--help` epilogue of both binaries: the unauthenticated endpoints
/// and logging.
pub const AFTER_HELP: &str = "\
Unauthenticated endpoints (GET without Authorization and without a query; signed, \
these paths are S3 requests):
  /health/live    200 while the process serves
  /health/ready   200 when the store answers and the RDMA port is active, else 503 (also /health)
  /metrics        Prometheus metrics

Logs go to stderr, filtered by RUST_LOG (default info, e.g. RUST_LOG=hipobj_gateway=debug).
See docs/configuration.md.";

/// Flags common to `hipobj-gateway` and `hipobj-test-server`.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Access key clients sign with.
    #[arg(long, env = "HIPOBJ_ACCESS_KEY", default_value = "hipobj-test-key")]
    pub access_key: String,
    /// Secret key clients sign with.
    #[arg(
        long,
        env = "HIPOBJ_SECRET_KEY",
        default_value = "hipobj-test-secret",
        hide_env_values = true
    )]
    pub secret_key: String,
    /// Region requests are signed for.
    #[arg(long, env = "HIPOBJ_REGION", default_value = "us-east-1")]
    pub region: String,
    /// RDMA device (soft0, soft:<ipv4>, mlx5_0, bnxt_re0, ...); default: the
    /// first hardware device, else the software provider's soft0.
    #[arg(long, env = "HIPOBJ_RDMA_DEVICE")]
    pub rdma_device: Option<String>,
    /// Bytes per staging buffer, in MiB (one RDMA WRITE or READ each).
    #[arg(long, env = "HIPOBJ_CHUNK_MIB", default_value_t = 8)]
    pub chunk_mib: usize,
    /// Staging buffers in the shared pool (chunk × buffers is the RDMA
    /// memory: 256 MiB by default).
    #[arg(long, env = "HIPOBJ_STAGING_BUFFERS", default_value_t = 32)]
    pub staging_buffers: usize,
    /// Log format on stderr (the filter is RUST_LOG, default `info`).
    #[arg(long, env = "HIPOBJ_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl CommonArgs {
    /// The client credentials.
    pub fn credentials(&self) -> Vec<KeyPair> {
        vec![KeyPair {
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
        }]
    }

    /// The RDMA settings.
    pub fn rdma(&self) -> RdmaConfig {
        RdmaConfig {
            device: self.rdma_device.clone(),
            chunk_size: self.chunk_mib.clamp(1, 1024) << 20,
            buffers: self.staging_buffers.max(1),
            ..RdmaConfig::default()
        }
    }
}

/// Logs to stderr in `format`, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing(format: LogFormat) {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
}

/// Ctrl-C or SIGTERM: stop accepting, and finish what is in flight.
pub async fn shutdown_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
