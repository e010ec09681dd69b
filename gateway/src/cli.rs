//! What the two binaries share: the flags for credentials, region and the
//! RDMA side (each with its environment variable), logging, and the
//! shutdown signal; and the gateway's flags for a remote store.
//!
//! Durations are written the human way (`30s`, `500ms`, `10m`, `1h 30m`:
//! the `humantime` crate's syntax).

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{KeyPair, RdmaConfig, ServerConfig, Tenant, UpstreamConfig, UpstreamOptions};
use crate::credentials_file::{self, CredentialsFileError};
use crate::upstream::{CaCerts, CaFileError};

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
    /// A file of more key pairs clients sign with, one `ACCESS_KEY
    /// SECRET_KEY` per line (`#` comments and blank lines ignored), accepted
    /// besides --access-key/--secret-key; read at start.
    #[arg(long, env = "HIPOBJ_CREDENTIALS_FILE", value_name = "PATH")]
    pub credentials_file: Option<PathBuf>,
    /// Region requests are signed for.
    #[arg(long, env = "HIPOBJ_REGION", default_value = "us-east-1")]
    pub region: String,
    // `<ipv4>` is help text (clap prints the doc comment), not HTML.
    /// RDMA devices to serve on: one (soft0, soft:<ipv4>, mlx5_0,
    /// bnxt_re0, ...), several separated by commas (mlx5_0,mlx5_1), or
    /// `all` (every device whose port is active); each client is answered
    /// from the device in its subnet. Default: the first hardware device,
    /// else the software provider's soft0.
    #[arg(long, env = "HIPOBJ_RDMA_DEVICE", value_parser = device_list)]
    #[allow(rustdoc::invalid_html_tags)]
    pub rdma_device: Option<String>,
    /// Which RDMA provider opens the devices: `auto` (names starting soft
    /// are the software provider's, the others libibverbs'), `soft`, or
    /// `verbs` (libibverbs for every name: a NIC, rxe, or soft-verbs).
    #[arg(long, env = "HIPOBJ_PROVIDER", value_enum, default_value = "auto")]
    pub rdma_provider: crate::config::RdmaProvider,
    /// A second header name clients may send the token under (e.g.
    /// x-rdma-info, as Dell ObjectScale's clients do). It must be signed; a
    /// request carrying both names is refused.
    #[arg(long, env = "HIPOBJ_RDMA_TOKEN_ALIAS", value_parser = token_alias, value_name = "HEADER")]
    pub rdma_token_alias: Option<String>,
    /// Bytes per staging buffer, in MiB (one RDMA WRITE or READ each).
    #[arg(long, env = "HIPOBJ_CHUNK_MIB", default_value_t = 8)]
    pub chunk_mib: usize,
    /// Staging buffers in all (chunk × buffers is the RDMA memory: 256 MiB
    /// by default), divided evenly among the RDMA devices.
    #[arg(long, env = "HIPOBJ_STAGING_BUFFERS", default_value_t = 32)]
    pub staging_buffers: usize,
    /// Chunks in flight per RDMA transfer (each holds a staging buffer, so
    /// no more than --staging-buffers are in flight).
    #[arg(long, env = "HIPOBJ_TRANSFER_DEPTH", default_value = "4", value_parser = at_least_one, value_name = "N")]
    pub transfer_depth: usize,
    /// How long a transfer waits for a free staging buffer before it fails
    /// with 503 SlowDown.
    #[arg(long, env = "HIPOBJ_STAGING_TIMEOUT", default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub staging_timeout: Duration,
    /// Connected RDMA QP pairs allowed per access key (a handshake beyond
    /// it is answered 503).
    #[arg(long, env = "HIPOBJ_MAX_PAIRS_PER_KEY", default_value = "256", value_parser = at_least_one, value_name = "N")]
    pub max_pairs_per_key: usize,
    /// Connected RDMA QP pairs allowed in all (whatever the per-key limit).
    #[arg(long, env = "HIPOBJ_MAX_PAIRS", default_value = "1024", value_parser = at_least_one, value_name = "N")]
    pub max_pairs: usize,
    /// Idle time after which a connected QP pair is dropped (its client
    /// reconnects on its next request).
    #[arg(long, env = "HIPOBJ_PAIR_IDLE_TIMEOUT", default_value = "10m", value_parser = positive_duration, value_name = "DURATION")]
    pub pair_idle_timeout: Duration,
    /// How long a connected QP pair may sit idle before the gateway checks
    /// that its client is still there (a zero-length RDMA WRITE); pairs of
    /// clients that are gone are released.
    #[arg(long, env = "HIPOBJ_PAIR_PROBE_INTERVAL", default_value = "15s", value_parser = positive_duration, value_name = "DURATION")]
    pub pair_probe_interval: Duration,
    /// How long an RDMA transfer may go without a work request completing
    /// before it is failed (its QP is moved to ERR and its buffers flushed).
    #[arg(long, env = "HIPOBJ_RDMA_PROGRESS_TIMEOUT", default_value = "15s", value_parser = positive_duration, value_name = "DURATION")]
    pub rdma_progress_timeout: Duration,
    /// Read objects of the embedded store into staging buffers for RDMA
    /// GETs instead of sending them from the object's file, mapped and
    /// registered (one copy fewer; the default for objects of 1 MiB and
    /// more). For NICs whose driver should not pin page-cache memory.
    #[arg(long, env = "HIPOBJ_NO_STORE_MAPPING")]
    pub no_store_mapping: bool,
    /// MiB of mapped object ranges kept per RDMA device for the next GET of
    /// the same range (each until 30 s unused; default: the staging pool's
    /// size; 0 keeps none). On a NIC their pages stay pinned meanwhile.
    #[arg(long, env = "HIPOBJ_STORE_MAPPING_CACHE_MIB", value_name = "MIB")]
    pub store_mapping_cache_mib: Option<u64>,
    /// Staging buffers one access key may hold at a time (default: the
    /// whole pool with one access key, half of it with several).
    #[arg(long, env = "HIPOBJ_MAX_STAGING_PER_KEY", value_parser = at_least_one, value_name = "N")]
    pub max_staging_per_key: Option<usize>,
    /// DC initiators in all; a DC request beyond waits up to
    /// --staging-timeout, then gets 503 SlowDown.
    #[arg(long, env = "HIPOBJ_MAX_DC_INITIATORS", default_value = "64", value_parser = at_least_one, value_name = "N")]
    pub max_dc_initiators: usize,
    /// DC initiators one access key may hold at a time.
    #[arg(long, env = "HIPOBJ_MAX_DC_PER_KEY", default_value = "16", value_parser = at_least_one, value_name = "N")]
    pub max_dc_per_key: usize,
    /// The DC access key presented to clients' DC targets: a number
    /// (`0x...` or decimal), or `cuobject` for cuObject's public default
    /// 0xffeeddcc (needed to serve cuObject clients; logged as a warning:
    /// anyone who knows it can reach those targets). Without it DC tokens
    /// are declined (501); hipobj-test-server uses `cuobject` unless set.
    #[arg(long, env = "HIPOBJ_DC_KEY", value_parser = dc_key, value_name = "KEY|cuobject")]
    pub dc_key: Option<u64>,
    /// Networks (CIDR, comma-separated) whose addresses a client's RDMA GID
    /// may name besides its HTTP connection's own address: clients behind
    /// a proxy or load balancer, or with RDMA on another interface than
    /// HTTP. IPv4 networks match IPv4-mapped GIDs; IPv6 ones match the GID
    /// as an IPv6 address (an InfiniBand subnet prefix, e.g. fe80::/64).
    #[arg(
        long,
        env = "HIPOBJ_RDMA_ALLOW_PEERS",
        value_delimiter = ',',
        value_name = "CIDR,..."
    )]
    pub rdma_allow_peers: Vec<ipnet::IpNet>,
    /// Turn hipobj-rc-v2 off: its control requests (`POST /.hipobj-rc/...`)
    /// are then answered 501 with `x-amz-rdma-protocol-status: unsupported`,
    /// and v2 clients fall back to the handshake flow.
    #[arg(long, env = "HIPOBJ_NO_RC_V2")]
    pub no_rc_v2: bool,
    /// How long a prepared hipobj-rc-v2 session waits for its READY before
    /// the reaper frees its QP and staging.
    #[arg(long, env = "HIPOBJ_RC_V2_PREPARE_TIMEOUT", default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub rc_v2_prepare_timeout: Duration,
    /// How long a hipobj-rc-v2 READY (data phase and store write) may take
    /// in all; beyond it the transfer fails with 502.
    #[arg(long, env = "HIPOBJ_RC_V2_EXEC_TIMEOUT", default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub rc_v2_exec_timeout: Duration,
    /// hipobj-rc-v2 sessions in all (a PREPARE beyond is answered 503).
    #[arg(long, env = "HIPOBJ_RC_V2_SESSIONS", default_value = "1024", value_parser = at_least_one, value_name = "N")]
    pub rc_v2_sessions: usize,
    /// hipobj-rc-v2 sessions one access key may hold.
    #[arg(long, env = "HIPOBJ_RC_V2_SESSIONS_PER_KEY", default_value = "64", value_parser = at_least_one, value_name = "N")]
    pub rc_v2_sessions_per_key: usize,
    /// hipobj-rc-v2 data phases under way at once; a READY beyond is
    /// answered 409 (busy: retry the READY).
    #[arg(long, env = "HIPOBJ_RC_V2_READY_SLOTS", default_value = "64", value_parser = at_least_one, value_name = "N")]
    pub rc_v2_ready_slots: usize,
    /// MiB of hipobj-rc-v2 PUT staging regions in all (default: the
    /// staging pool's size).
    #[arg(long, env = "HIPOBJ_RC_V2_PUT_MIB", value_parser = at_least_one, value_name = "MIB")]
    pub rc_v2_put_mib: Option<usize>,
    /// MiB of hipobj-rc-v2 PUT staging one access key may hold, and so the
    /// largest single v2 PUT (default: the key's share of the staging
    /// pool); a larger PUT is answered 413 with `x-amz-rdma-max-size`.
    #[arg(long, env = "HIPOBJ_RC_V2_PUT_MIB_PER_KEY", value_parser = at_least_one, value_name = "MIB")]
    pub rc_v2_put_mib_per_key: Option<usize>,
    /// Domains of virtual-hosted-style requests (repeatable or
    /// comma-separated, as MinIO's MINIO_DOMAIN): `Host: bucket.DOMAIN[:port]`
    /// with path `/key` is served as `/bucket/key` (RDMA, signatures and
    /// metrics alike). Without it, requests are path-style.
    #[arg(
        long,
        env = "HIPOBJ_DOMAIN",
        value_delimiter = ',',
        value_name = "DOMAIN,..."
    )]
    pub domain: Vec<String>,
    /// Clock skew allowed between a signed request's date and the
    /// gateway's clock (beyond it: 403 RequestTimeTooSkewed; a presigned
    /// URL dated that far ahead: 403 AccessDenied "Request is not valid
    /// yet").
    #[arg(long, env = "HIPOBJ_MAX_CLOCK_SKEW", default_value = "15m", value_parser = positive_duration, value_name = "DURATION")]
    pub max_clock_skew: Duration,
    /// How long a request head may take to arrive, from its first byte (or
    /// from the connection's accept); beyond it the connection is closed.
    #[arg(long, env = "HIPOBJ_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection with no request in flight is kept
    /// open waiting for the next request.
    #[arg(long, env = "HIPOBJ_IDLE_TIMEOUT", default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub idle_timeout: Duration,
    /// How long a request body may stall (no byte arriving while the
    /// server waits for one) before the request fails; the same bound
    /// closes a connection whose client stops reading its answer.
    #[arg(long, env = "HIPOBJ_BODY_READ_TIMEOUT", default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub body_read_timeout: Duration,
    /// Client connections served at once (lowered at start to fit under the
    /// open-file limit with a reserve). At it, a new connection closes the
    /// one that has waited longest for a request (head or keep-alive);
    /// when every one is serving a request, it is answered 503 SlowDown.
    #[arg(long, env = "HIPOBJ_MAX_CONNECTIONS", default_value = "4096", value_parser = at_least_one, value_name = "N")]
    pub max_connections: usize,
    /// Directory where form uploads (POST Object) larger than 1 MiB wait
    /// for the store, in unnamed files (default: $TMPDIR).
    #[arg(long, env = "HIPOBJ_POST_SPOOL_DIR", value_name = "PATH")]
    pub post_spool_dir: Option<PathBuf>,
    /// MiB all form uploads together may hold in the spool directory;
    /// beyond it a form upload fails with 503 SlowDown.
    #[arg(long, env = "HIPOBJ_POST_SPOOL_MIB", default_value = "4096", value_parser = at_least_one, value_name = "MIB")]
    pub post_spool_mib: usize,
    /// How long one form upload may take in all, from its first byte to
    /// the store's answer (beyond it: 400 RequestTimeout).
    #[arg(long, env = "HIPOBJ_POST_UPLOAD_TIMEOUT", default_value = "15m", value_parser = positive_duration, value_name = "DURATION")]
    pub post_upload_timeout: Duration,
    /// MiB of aws-chunked data the gateway may hold in all while chunk
    /// signatures are checked (a chunk declares up to 16 MiB); a chunk
    /// beyond it ends its upload with 503 SlowDown.
    #[arg(long, env = "HIPOBJ_CHUNK_BUFFER_MIB", default_value = "256", value_parser = at_least_one, value_name = "MIB")]
    pub chunk_buffer_mib: usize,
    /// The share of --chunk-buffer-mib one access key may hold.
    #[arg(long, env = "HIPOBJ_CHUNK_BUFFER_PER_KEY_MIB", default_value = "64", value_parser = at_least_one, value_name = "MIB")]
    pub chunk_buffer_per_key_mib: usize,
    /// Refuse requests that carry no authentication (403) instead of
    /// passing them to the store unsigned, where its ACLs and policies
    /// decide (public-read objects, CORS preflights).
    #[arg(long, env = "HIPOBJ_REFUSE_ANONYMOUS")]
    pub refuse_anonymous: bool,
    /// Connections one client address may hold (default: half of
    /// --max-connections); at it, its own connection that has waited
    /// longest for a request is closed to make room, or the new one is
    /// refused with 503 SlowDown.
    #[arg(long, env = "HIPOBJ_MAX_CONNECTIONS_PER_SOURCE", value_parser = at_least_one, value_name = "N")]
    pub max_connections_per_source: Option<usize>,
    /// Log format on stderr (the filter is RUST_LOG, default `info`).
    #[arg(long, env = "HIPOBJ_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The gateway's flags for the store behind it.
#[derive(Debug, Clone, clap::Args)]
pub struct UpstreamArgs {
    /// The S3 endpoint in front of which to serve (http://host:port or
    /// https://host:port), or several endpoints of one store separated by
    /// commas (the first healthy one in order serves, with failover).
    /// Without it, the embedded store serves the objects (in --data-dir).
    #[arg(long, env = "HIPOBJ_UPSTREAM", value_name = "URL")]
    pub upstream: Option<String>,
    /// Access key for the upstream.
    #[arg(long, env = "HIPOBJ_UPSTREAM_ACCESS_KEY", requires = "upstream")]
    pub upstream_access_key: Option<String>,
    /// Secret key for the upstream.
    #[arg(
        long,
        env = "HIPOBJ_UPSTREAM_SECRET_KEY",
        requires = "upstream",
        hide_env_values = true
    )]
    pub upstream_secret_key: Option<String>,
    /// A PEM file of CA certificates trusted for an https:// upstream, besides
    /// the system's roots (for a store whose certificate a private CA signed).
    #[arg(
        long,
        env = "HIPOBJ_UPSTREAM_CA_FILE",
        requires = "upstream",
        value_name = "PEM"
    )]
    pub upstream_ca_file: Option<PathBuf>,
    /// How long a TCP connect to the upstream may take.
    #[arg(long, env = "HIPOBJ_UPSTREAM_CONNECT_TIMEOUT", default_value = "5s", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_connect_timeout: Duration,
    /// How long the upstream may take to send a response head, counted from
    /// the moment the request body has been sent completely (neither body is
    /// bounded by it); a request that times out is not retried.
    #[arg(long, env = "HIPOBJ_UPSTREAM_RESPONSE_TIMEOUT", default_value = "30s", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_response_timeout: Duration,
    /// As --upstream-response-timeout, for the operations the upstream carries
    /// out before it answers, whose duration grows with the object:
    /// CompleteMultipartUpload, CopyObject and UploadPartCopy.
    #[arg(long, env = "HIPOBJ_UPSTREAM_LONG_OP_TIMEOUT", default_value = "15m", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_long_op_timeout: Duration,
    /// How long the upstream may stop taking a request body's bytes while the
    /// gateway has more to send (a store that stops reading, as a full Ceph
    /// cluster does) before the request fails with 502; a client that sends
    /// slowly is bounded by --body-read-timeout instead.
    #[arg(long, env = "HIPOBJ_UPSTREAM_SEND_TIMEOUT", default_value = "60s", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_send_timeout: Duration,
    /// How long an idle pooled connection to the upstream is kept open.
    #[arg(long, env = "HIPOBJ_UPSTREAM_IDLE_TIMEOUT", default_value = "90s", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_idle_timeout: Duration,
    /// Retries of a request without a body (GET, HEAD, DELETE, ...) after a
    /// connection error or a 502/503/504 from the upstream; 0: none.
    #[arg(long, env = "HIPOBJ_UPSTREAM_RETRIES", default_value = "2", value_parser = clap::value_parser!(u32).range(..=100), requires = "upstream", value_name = "N")]
    pub upstream_retries: u32,
    /// The waits before the first, second, ... retry, comma-separated (the
    /// last repeats).
    #[arg(long, env = "HIPOBJ_UPSTREAM_BACKOFF", default_value = "50ms,200ms", value_delimiter = ',', value_parser = duration, value_name = "DURATION,...", requires = "upstream")]
    pub upstream_backoff: Vec<Duration>,
    /// How often each endpoint of several (--upstream a,b) is probed to mark
    /// it healthy or down.
    #[arg(long, env = "HIPOBJ_UPSTREAM_HEALTH_INTERVAL", default_value = "5s", value_parser = positive_duration, value_name = "DURATION", requires = "upstream")]
    pub upstream_health_interval: Duration,
    /// Remove `encoding-type` from requests to the upstream: for a store that
    /// answers encoding-type=url without encoding the keys (s3s-fs 0.14), whose
    /// keys clients would otherwise decode wrongly (`a+b` listed as `a b`).
    #[arg(
        long,
        env = "HIPOBJ_UPSTREAM_DROP_ENCODING_TYPE",
        requires = "upstream"
    )]
    pub upstream_drop_encoding_type: bool,
    /// Send the store a body whose checksum came in an aws-chunked trailer
    /// as a plain body (Content-Length, no trailer), for a store that
    /// refuses STREAMING-UNSIGNED-PAYLOAD-TRAILER (Ceph RGW 16). The gateway
    /// still checks the checksum against the bytes; the store does not
    /// record it.
    #[arg(
        long,
        env = "HIPOBJ_UPSTREAM_NO_CHECKSUM_TRAILERS",
        requires = "upstream"
    )]
    pub upstream_no_checksum_trailers: bool,
}

/// A configuration the flags parse to but the engine cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A credential of the upstream is missing.
    #[error("{0} is required with --upstream")]
    MissingUpstreamCredential(&'static str),
    /// `--upstream` names no endpoint.
    #[error("--upstream names no endpoint")]
    NoEndpoint,
    /// `--upstream-ca-file`.
    #[error("--upstream-ca-file: {0}")]
    CaFile(#[from] CaFileError),
    /// `--credentials-file`.
    #[error("--credentials-file: {0}")]
    CredentialsFile(#[from] CredentialsFileError),
}

/// A duration the human way: `30s`, `500ms`, `10m`, `1h 30m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("not a duration ({e}); write it like 30s, 500ms or 10m"))
}

/// A duration greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// `--rdma-device`: `all`, or device names separated by commas, each once.
pub fn device_list(s: &str) -> Result<String, String> {
    crate::config::Devices::parse(Some(s)).map(|_| s.trim().to_string())
}

/// A token header alias: a valid header name (lowercased), not one of the
/// protocol's own.
pub fn token_alias(s: &str) -> Result<String, String> {
    let name = s.trim().to_ascii_lowercase();
    http::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{s:?} is not an HTTP header name"))?;
    if name.starts_with("x-amz-rdma-") || name == "authorization" || name == "host" {
        return Err(format!("{name} cannot be the token's second name"));
    }
    Ok(name)
}

/// A DC key: `cuobject` (cuObject's public 0xffeeddcc), `0x` and hex
/// digits, or decimal.
pub fn dc_key(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("cuobject") {
        return Ok(hipobj_fabric::CUOBJECT_DC_KEY);
    }
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|e| format!("not a DC key (a 64-bit number, or cuobject): {e}"))
}

/// A count of at least one.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

impl UpstreamArgs {
    /// The store: `None` without `--upstream` (the caller chooses the
    /// embedded store), one remote endpoint, or a cluster of several.
    pub fn config(&self) -> Result<Option<UpstreamConfig>, ConfigError> {
        let Some(list) = &self.upstream else {
            return Ok(None);
        };
        let credentials = KeyPair {
            access_key: self.upstream_access_key.clone().ok_or(
                ConfigError::MissingUpstreamCredential("--upstream-access-key"),
            )?,
            secret_key: self.upstream_secret_key.clone().ok_or(
                ConfigError::MissingUpstreamCredential("--upstream-secret-key"),
            )?,
        };
        let mut endpoints: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Some(match endpoints.len() {
            0 => return Err(ConfigError::NoEndpoint),
            1 => UpstreamConfig::Remote {
                endpoint: endpoints.remove(0),
                credentials,
            },
            _ => UpstreamConfig::Cluster {
                endpoints,
                credentials,
            },
        }))
    }

    /// How the remote store is reached (the CA file is read here).
    pub fn options(&self) -> Result<UpstreamOptions, ConfigError> {
        let ca = match &self.upstream_ca_file {
            Some(path) => CaCerts::from_pem_file(path)?,
            None => CaCerts::none(),
        };
        Ok(UpstreamOptions {
            connect_timeout: self.upstream_connect_timeout,
            response_timeout: self.upstream_response_timeout,
            long_op_timeout: self.upstream_long_op_timeout,
            send_stall_timeout: self.upstream_send_timeout,
            pool_idle_timeout: self.upstream_idle_timeout,
            retries: self.upstream_retries,
            backoff: self.upstream_backoff.clone(),
            health_interval: self.upstream_health_interval,
            ca,
            drop_encoding_type: self.upstream_drop_encoding_type,
            checksum_trailers: !self.upstream_no_checksum_trailers,
        })
    }
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
    /// The client credentials: the pair of --access-key/--secret-key, then
    /// those of --credentials-file (read here; a file that cannot be read,
    /// a malformed line or an access key given twice is an error).
    pub fn credentials(&self) -> Result<Vec<Tenant>, ConfigError> {
        let mut pairs: Vec<Tenant> = vec![KeyPair {
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
        }
        .into()];
        if let Some(path) = &self.credentials_file {
            pairs.extend(credentials_file::read(path, &[&self.access_key])?);
        }
        Ok(pairs)
    }

    /// The HTTP front's settings.
    pub fn server(&self) -> ServerConfig {
        ServerConfig {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            body_read_timeout: self.body_read_timeout,
            max_connections: self.max_connections,
            max_connections_per_source: self.max_connections_per_source,
            domains: self.domain.clone(),
            post_spool_dir: self.post_spool_dir.clone(),
            post_spool_bytes: (self.post_spool_mib as u64).saturating_mul(1 << 20),
            post_upload_timeout: self.post_upload_timeout,
            chunk_buffer_bytes: (self.chunk_buffer_mib as u64).saturating_mul(1 << 20),
            chunk_buffer_per_key: (self.chunk_buffer_per_key_mib as u64).saturating_mul(1 << 20),
            anonymous_to_store: !self.refuse_anonymous,
        }
    }

    /// The RDMA settings.
    pub fn rdma(&self) -> RdmaConfig {
        RdmaConfig {
            device: self.rdma_device.clone(),
            provider: self.rdma_provider,
            token_alias: self.rdma_token_alias.clone(),
            chunk_size: self.chunk_mib.clamp(1, 1024) << 20,
            buffers: self.staging_buffers.max(1),
            depth: self.transfer_depth,
            pool_timeout: self.staging_timeout,
            pairs_per_key: self.max_pairs_per_key,
            pairs_total: self.max_pairs,
            pair_idle: self.pair_idle_timeout,
            pair_probe: self.pair_probe_interval,
            progress_timeout: self.rdma_progress_timeout,
            map_store_files: !self.no_store_mapping,
            store_mapping_cache: self
                .store_mapping_cache_mib
                .map(|m| m.saturating_mul(1 << 20)),
            staging_per_key: self.max_staging_per_key,
            dc_initiators: self.max_dc_initiators,
            dc_per_key: self.max_dc_per_key,
            dc_key: self.dc_key,
            allowed_peers: self.rdma_allow_peers.clone(),
            rc_v2: crate::config::RcV2Config {
                enabled: !self.no_rc_v2,
                prepare_timeout: self.rc_v2_prepare_timeout,
                exec_timeout: self.rc_v2_exec_timeout,
                sessions_total: self.rc_v2_sessions,
                sessions_per_key: self.rc_v2_sessions_per_key.min(self.rc_v2_sessions),
                ready_slots: self.rc_v2_ready_slots,
                put_bytes: self.rc_v2_put_mib.map(|m| (m as u64) << 20),
                put_bytes_per_key: self.rc_v2_put_mib_per_key.map(|m| (m as u64) << 20),
            },
        }
    }

    /// Clock skew allowed on signed requests.
    pub fn max_skew(&self) -> Duration {
        self.max_clock_skew
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

/// Reloads the credentials (`--access-key` and `--credentials-file`) into
/// `engine` on each SIGHUP, until the runtime stops. Requests in flight
/// keep the keys they started with; a file that cannot be used (unreadable,
/// a bad line, a wrong owner or mode) leaves the keys in force and logs
/// why. Installed before the server starts, so that a SIGHUP never kills
/// the process (its default action).
pub fn reload_credentials_on_sighup(
    engine: std::sync::Arc<crate::engine::Engine>,
    common: CommonArgs,
) -> std::io::Result<()> {
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let outcome = common
                .credentials()
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    let n = t.len();
                    engine
                        .set_credentials(&t)
                        .map(|()| n)
                        .map_err(|e| e.to_string())
                });
            match outcome {
                Ok(n) => tracing::info!(keys = n, "SIGHUP: credentials reloaded"),
                Err(why) => {
                    tracing::error!(%why, "SIGHUP: credentials not reloaded; the keys in force stay")
                }
            }
        }
    });
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::Parser;

    /// The gateway's flags as its binary declares them.
    #[derive(Debug, Parser)]
    struct Gateway {
        #[command(flatten)]
        upstream: UpstreamArgs,
        #[command(flatten)]
        common: CommonArgs,
    }

    /// Parses `args` with none of the flags' variables in the environment
    /// mattering: every flag that the tests rely on is given.
    fn parse(args: &[&str]) -> Result<Gateway, clap::Error> {
        Gateway::try_parse_from(std::iter::once("hipobj-gateway").chain(args.iter().copied()))
    }

    fn err(args: &[&str]) -> String {
        parse(args).unwrap_err().to_string()
    }

    const UP: [&str; 6] = [
        "--upstream",
        "http://127.0.0.1:9000",
        "--upstream-access-key",
        "AK",
        "--upstream-secret-key",
        "SK",
    ];

    fn with_up(extra: &[&str]) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = UP.to_vec();
        for e in extra {
            v.push(Box::leak(e.to_string().into_boxed_str()));
        }
        v
    }

    #[test]
    fn durations_the_human_way() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "30", "abc", "-1s", "5 parsecs"] {
            let e = duration(bad).unwrap_err();
            assert!(e.contains("30s, 500ms or 10m"), "{bad}: {e}");
        }
        assert_eq!(
            positive_duration("0ms").unwrap_err(),
            "must be greater than zero"
        );
        assert_eq!(positive_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(at_least_one("0").unwrap_err(), "must be at least 1");
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("x").unwrap_err().starts_with("not a count"));
    }

    #[test]
    fn several_rdma_devices_or_all() {
        let g = parse(&["--rdma-device", "soft0, soft1"]).unwrap();
        assert_eq!(g.common.rdma().device.as_deref(), Some("soft0, soft1"));
        assert_eq!(
            crate::config::Devices::parse(g.common.rdma().device.as_deref()),
            Ok(crate::config::Devices::Named(vec![
                "soft0".into(),
                "soft1".into()
            ]))
        );
        let g = parse(&["--rdma-device", "all"]).unwrap();
        assert_eq!(g.common.rdma().device.as_deref(), Some("all"));
        assert!(parse(&["--rdma-device", "mlx5_0,,mlx5_1"]).is_err());
        assert!(parse(&["--rdma-device", "mlx5_0,mlx5_0"]).is_err());
    }

    #[test]
    fn rdma_and_auth_settings_reach_the_config() {
        let g = parse(&[
            "--transfer-depth",
            "8",
            "--staging-timeout",
            "2s",
            "--max-pairs-per-key",
            "3",
            "--max-pairs",
            "5",
            "--pair-idle-timeout",
            "90s",
            "--max-clock-skew",
            "5m",
            "--chunk-mib",
            "2",
            "--staging-buffers",
            "16",
            "--rdma-device",
            "soft0",
            "--pair-probe-interval",
            "3s",
            "--rdma-progress-timeout",
            "4s",
            "--no-store-mapping",
            "--store-mapping-cache-mib",
            "96",
            "--max-staging-per-key",
            "6",
            "--max-dc-initiators",
            "7",
            "--max-dc-per-key",
            "2",
            "--dc-key",
            "0x0123456789abcdef",
            "--rdma-allow-peers",
            "10.1.0.0/16,fe80::/64",
        ])
        .unwrap();
        let r = g.common.rdma();
        assert_eq!(
            r,
            RdmaConfig {
                device: Some("soft0".into()),
                provider: crate::config::RdmaProvider::Auto,
                token_alias: None,
                chunk_size: 2 << 20,
                buffers: 16,
                depth: 8,
                pool_timeout: Duration::from_secs(2),
                pairs_per_key: 3,
                pairs_total: 5,
                pair_idle: Duration::from_secs(90),
                pair_probe: Duration::from_secs(3),
                progress_timeout: Duration::from_secs(4),
                map_store_files: false,
                store_mapping_cache: Some(96 << 20),
                staging_per_key: Some(6),
                dc_initiators: 7,
                dc_per_key: 2,
                dc_key: Some(0x0123_4567_89ab_cdef),
                allowed_peers: vec!["10.1.0.0/16".parse().unwrap(), "fe80::/64".parse().unwrap()],
                rc_v2: crate::config::RcV2Config::default(),
            }
        );
        assert_eq!(g.common.max_skew(), Duration::from_secs(300));
    }

    #[test]
    fn the_dc_key_is_a_number_or_cuobject_and_absent_by_default() {
        assert_eq!(dc_key("cuobject"), Ok(0xffee_ddcc));
        assert_eq!(dc_key("CuObject"), Ok(hipobj_fabric::CUOBJECT_DC_KEY));
        assert_eq!(dc_key("0xFFEEDDCC"), Ok(0xffee_ddcc));
        assert_eq!(dc_key("42"), Ok(42));
        assert_eq!(dc_key("0xffffffffffffffff"), Ok(u64::MAX));
        for bad in [
            "",
            "0x",
            "-1",
            "0x1_0000_0000_0000_0000",
            "public",
            "0x10000000000000000",
        ] {
            let e = dc_key(bad).unwrap_err();
            assert!(e.starts_with("not a DC key"), "{bad}: {e}");
        }
        assert_eq!(parse(&[]).unwrap().common.rdma().dc_key, None);
        let g = parse(&["--dc-key", "cuobject"]).unwrap();
        assert_eq!(g.common.rdma().dc_key, Some(0xffee_ddcc));
        assert!(parse(&["--dc-key", "nope"]).is_err());
    }

    #[test]
    fn server_settings_reach_the_config() {
        let g = parse(&[
            "--header-read-timeout",
            "2s",
            "--idle-timeout",
            "5m",
            "--body-read-timeout",
            "90s",
            "--max-connections",
            "64",
            "--max-connections-per-source",
            "16",
            "--domain",
            "s3.example.com,localhost",
            "--domain",
            "s3.internal",
            "--post-spool-dir",
            "/var/spool/hipobj",
            "--post-spool-mib",
            "512",
            "--post-upload-timeout",
            "5m",
        ])
        .unwrap();
        assert_eq!(
            g.common.server(),
            ServerConfig {
                header_read_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(300),
                body_read_timeout: Duration::from_secs(90),
                max_connections: 64,
                max_connections_per_source: Some(16),
                domains: vec![
                    "s3.example.com".into(),
                    "localhost".into(),
                    "s3.internal".into()
                ],
                post_spool_dir: Some("/var/spool/hipobj".into()),
                post_spool_bytes: 512 << 20,
                post_upload_timeout: Duration::from_secs(300),
                chunk_buffer_bytes: 256 << 20,
                chunk_buffer_per_key: 64 << 20,
                anonymous_to_store: true,
            }
        );
        for (flag, value) in [
            ("--header-read-timeout", "0s"),
            ("--idle-timeout", "0s"),
            ("--body-read-timeout", "0ms"),
            ("--max-connections", "0"),
        ] {
            let e = parse(&[flag, value]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{flag}");
        }
    }

    #[test]
    fn the_credentials_file_adds_tenants() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tenants");
        std::fs::write(
            &path,
            "# two tenants\ntenant-a secret-a\ntenant-b secret-b\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let p = path.to_str().unwrap();
        let g = parse(&[
            "--access-key",
            "main",
            "--secret-key",
            "main-secret",
            "--credentials-file",
            p,
        ])
        .unwrap();
        let keys: Vec<(String, String)> = g
            .common
            .credentials()
            .unwrap()
            .into_iter()
            .map(|k| (k.keys.access_key, k.keys.secret_key))
            .collect();
        assert_eq!(
            keys,
            [
                ("main".to_string(), "main-secret".to_string()),
                ("tenant-a".to_string(), "secret-a".to_string()),
                ("tenant-b".to_string(), "secret-b".to_string()),
            ]
        );
        // The file may not redefine the flags' key.
        let g = parse(&[
            "--access-key",
            "tenant-b",
            "--secret-key",
            "x",
            "--credentials-file",
            p,
        ])
        .unwrap();
        let e = g.common.credentials().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--credentials-file: the credentials file {p}, line 3: the access key tenant-b is given twice"
            )
        );
        assert!(!e.to_string().contains("secret-b"));
    }

    #[test]
    fn defaults_are_the_built_in_values() {
        let g = parse(&[
            "--transfer-depth",
            "4",
            "--staging-timeout",
            "30s",
            "--max-pairs-per-key",
            "256",
            "--max-pairs",
            "1024",
            "--pair-idle-timeout",
            "10m",
            "--chunk-mib",
            "8",
            "--staging-buffers",
            "32",
        ])
        .unwrap();
        let d = RdmaConfig::default();
        assert_eq!(
            g.common.rdma(),
            RdmaConfig {
                device: g.common.rdma_device.clone(),
                ..d
            }
        );
        // The declared defaults, as clap reports them, are these values.
        let cmd = <Gateway as clap::CommandFactory>::command();
        let default_of = |id: &str| {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_default_values()
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(duration(&default_of("staging_timeout")), Ok(d.pool_timeout));
        assert_eq!(duration(&default_of("pair_idle_timeout")), Ok(d.pair_idle));
        assert_eq!(default_of("transfer_depth"), d.depth.to_string());
        assert_eq!(default_of("max_pairs_per_key"), d.pairs_per_key.to_string());
        assert_eq!(default_of("max_pairs"), d.pairs_total.to_string());
        assert_eq!(
            duration(&default_of("max_clock_skew")),
            Ok(Duration::from_secs(900))
        );
        let srv = ServerConfig::default();
        assert_eq!(
            duration(&default_of("header_read_timeout")),
            Ok(srv.header_read_timeout)
        );
        assert_eq!(duration(&default_of("idle_timeout")), Ok(srv.idle_timeout));
        assert_eq!(
            duration(&default_of("body_read_timeout")),
            Ok(srv.body_read_timeout)
        );
        assert_eq!(
            default_of("max_connections"),
            srv.max_connections.to_string()
        );
        let o = UpstreamOptions::default();
        assert_eq!(
            duration(&default_of("upstream_connect_timeout")),
            Ok(o.connect_timeout)
        );
        assert_eq!(
            duration(&default_of("upstream_response_timeout")),
            Ok(o.response_timeout)
        );
        assert_eq!(
            duration(&default_of("upstream_long_op_timeout")),
            Ok(o.long_op_timeout)
        );
        assert_eq!(
            duration(&default_of("upstream_idle_timeout")),
            Ok(o.pool_idle_timeout)
        );
        assert_eq!(
            duration(&default_of("upstream_health_interval")),
            Ok(o.health_interval)
        );
        assert_eq!(default_of("upstream_retries"), o.retries.to_string());
        let backoff: Vec<Duration> = default_of("upstream_backoff")
            .split(',')
            .map(|d| duration(d).unwrap())
            .collect();
        assert_eq!(backoff, o.backoff);
    }

    #[test]
    fn zero_is_refused_where_it_means_nothing() {
        for (flag, value) in [
            ("--transfer-depth", "0"),
            ("--max-pairs-per-key", "0"),
            ("--max-pairs", "0"),
            ("--staging-timeout", "0s"),
            ("--pair-idle-timeout", "0ms"),
            ("--max-clock-skew", "0m"),
        ] {
            let e = parse(&[flag, value]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{flag}");
            let text = e.to_string();
            assert!(text.contains(flag), "{flag}: {text}");
            assert!(
                text.contains("must be greater than zero") || text.contains("must be at least 1"),
                "{flag}: {text}"
            );
        }
        for flag in [
            "--upstream-connect-timeout",
            "--upstream-response-timeout",
            "--upstream-long-op-timeout",
            "--upstream-idle-timeout",
            "--upstream-health-interval",
        ] {
            let text = err(&with_up(&[flag, "0s"]));
            assert!(text.contains(flag), "{flag}: {text}");
            assert!(text.contains("must be greater than zero"), "{flag}: {text}");
        }
        let text = err(&["--staging-timeout", "thirty"]);
        assert!(text.contains("write it like 30s"), "{text}");
        let text = err(&with_up(&["--upstream-retries", "101"]));
        assert!(text.contains("--upstream-retries"), "{text}");
    }

    #[test]
    fn upstream_settings_reach_the_options() {
        let g = parse(&with_up(&[
            "--upstream-connect-timeout",
            "1500ms",
            "--upstream-response-timeout",
            "45s",
            "--upstream-long-op-timeout",
            "1h",
            "--upstream-idle-timeout",
            "2m",
            "--upstream-retries",
            "0",
            "--upstream-backoff",
            "10ms,1s,5s",
            "--upstream-health-interval",
            "750ms",
            "--upstream-send-timeout",
            "20s",
            "--upstream-drop-encoding-type",
        ]))
        .unwrap();
        let o = g.upstream.options().unwrap();
        assert_eq!(
            o,
            UpstreamOptions {
                connect_timeout: Duration::from_millis(1500),
                response_timeout: Duration::from_secs(45),
                long_op_timeout: Duration::from_secs(3600),
                send_stall_timeout: Duration::from_secs(20),
                pool_idle_timeout: Duration::from_secs(120),
                retries: 0,
                backoff: vec![
                    Duration::from_millis(10),
                    Duration::from_secs(1),
                    Duration::from_secs(5)
                ],
                health_interval: Duration::from_millis(750),
                ca: CaCerts::none(),
                drop_encoding_type: true,
                checksum_trailers: true,
            }
        );
        assert_eq!(
            g.upstream.config().unwrap(),
            Some(UpstreamConfig::Remote {
                endpoint: "http://127.0.0.1:9000".into(),
                credentials: KeyPair {
                    access_key: "AK".into(),
                    secret_key: "SK".into(),
                },
            })
        );
    }

    #[test]
    fn upstream_endpoints_and_credentials() {
        let g = parse(&[
            "--upstream",
            "https://a:9000, http://b:9000,",
            "--upstream-access-key",
            "AK",
            "--upstream-secret-key",
            "SK",
        ])
        .unwrap();
        match g.upstream.config().unwrap() {
            Some(UpstreamConfig::Cluster { endpoints, .. }) => {
                assert_eq!(endpoints, ["https://a:9000", "http://b:9000"])
            }
            other => panic!("{other:?}"),
        }
        let g = parse(&["--upstream", "http://a:1", "--upstream-access-key", "AK"]).unwrap();
        let e = g.upstream.config().unwrap_err();
        assert_eq!(
            e.to_string(),
            "--upstream-secret-key is required with --upstream"
        );
        let g = parse(&[
            "--upstream",
            " , ",
            "--upstream-access-key",
            "A",
            "--upstream-secret-key",
            "S",
        ])
        .unwrap();
        assert!(matches!(g.upstream.config(), Err(ConfigError::NoEndpoint)));
        // Tuning a store that is not there is a mistake.
        let e = parse(&["--upstream-retries", "3"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument, "{e}");
        let e = parse(&["--upstream-ca-file", "/x.pem"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument, "{e}");
    }

    #[test]
    fn a_bad_ca_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let g = parse(&with_up(&["--upstream-ca-file", path.to_str().unwrap()])).unwrap();
        let e = g.upstream.options().unwrap_err();
        assert!(
            matches!(e, ConfigError::CaFile(CaFileError::Empty { .. })),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "--upstream-ca-file: the CA file {} holds no PEM CERTIFICATE",
                path.display()
            )
        );
    }
}
