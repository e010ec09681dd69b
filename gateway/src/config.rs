//! What the engine is configured with. The binaries fill it from flags and
//! the environment (clap); tests build it directly.

pub use crate::tls::CaCerts;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The defaults of the store connection's settings (the command line's
/// defaults say the same).
pub mod defaults {
    use std::time::Duration;

    /// How long a TCP connect to the store may take.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// How long an idle pooled connection is kept.
    pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
    /// How long the store may take to send the response head.
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
    /// How long the store may take to answer an operation it carries out
    /// before answering (CompleteMultipartUpload, copies).
    pub const DEFAULT_LONG_OP_TIMEOUT: Duration = Duration::from_secs(15 * 60);
    /// How long the store may stop taking a request body's bytes (the
    /// gateway has the next ones ready) before the request fails.
    pub const DEFAULT_SEND_STALL_TIMEOUT: Duration = Duration::from_secs(60);
    /// Retries of a replayable request.
    pub const DEFAULT_MAX_RETRIES: u32 = 2;
    /// The waits before the first, second, ... retry (the last repeats).
    pub const DEFAULT_BACKOFF: [Duration; 2] =
        [Duration::from_millis(50), Duration::from_millis(200)];
    /// How often the endpoints of a cluster are probed.
    pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);
    /// aws-chunked bytes held awaiting their signatures, in all: 256 MiB.
    pub const CHUNK_BUFFER_BYTES: u64 = 256 << 20;
    /// The share of one access key: 64 MiB.
    pub const CHUNK_BUFFER_PER_KEY: u64 = 64 << 20;
}

pub use crate::keys::KeyPair;

/// A tenant: the key pair it signs with, and what it may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    /// The access key and secret clients sign with.
    pub keys: KeyPair,
    /// The buckets it may reach and the store identity it reaches them as.
    pub policy: crate::tenancy::Policy,
}

impl From<KeyPair> for Tenant {
    /// An unrestricted tenant: every bucket, as the gateway's store
    /// identity.
    fn from(keys: KeyPair) -> Tenant {
        Tenant {
            keys,
            policy: crate::tenancy::Policy::unrestricted(),
        }
    }
}

/// Where the objects live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamConfig {
    /// A remote S3 endpoint (MinIO, ...), signed with its own credentials.
    Remote {
        /// Base URL, `http://host:port` or `https://host:port`.
        endpoint: String,
        /// Credentials for the upstream.
        credentials: KeyPair,
    },
    /// Several endpoints of one remote store (each `http(s)://host:port`),
    /// same credentials: requests go to the first healthy one, in order.
    Cluster {
        /// Base URLs, in order of preference.
        endpoints: Vec<String>,
        /// Credentials for the upstream.
        credentials: KeyPair,
    },
    /// The embedded store (hipobj-store) in a directory, served in-process.
    Embedded {
        /// Its root directory.
        root: PathBuf,
        /// Whether every write is flushed to disk before it is answered
        /// (atomicity holds either way).
        fsync: bool,
    },
}

/// How a remote store (or cluster) is reached: timeouts, connection pool,
/// retries, health checks and TLS trust. The embedded store ignores them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamOptions {
    /// How long a TCP connect to the store may take.
    pub connect_timeout: Duration,
    /// How long the store may take to send a response head once the
    /// request body has been sent.
    pub response_timeout: Duration,
    /// As `response_timeout`, for CompleteMultipartUpload, CopyObject and
    /// UploadPartCopy (the store does the work before it answers).
    pub long_op_timeout: Duration,
    /// How long the store may stop taking the request body (the gateway
    /// has bytes ready and the connection takes none) before the request
    /// fails: a store that stops reading, as a Ceph cluster whose OSDs are
    /// full does (it blocks writes until space is freed), would otherwise
    /// hold the request, its client and its staging buffers for ever.
    pub send_stall_timeout: Duration,
    /// How long an idle pooled connection to the store is kept.
    pub pool_idle_timeout: Duration,
    /// Retries of a replayable request after a connection error or a
    /// 502/503/504 (0: none).
    pub retries: u32,
    /// The wait before the first, second, ... retry (the last repeats).
    pub backoff: Vec<Duration>,
    /// How often each endpoint of a cluster is probed.
    pub health_interval: Duration,
    /// CA certificates trusted for an `https://` store besides the
    /// system's roots.
    pub ca: CaCerts,
    /// Whether listings are asked for without `encoding-type` (for a store
    /// that echoes `encoding-type=url` without encoding keys: s3s-fs).
    pub drop_encoding_type: bool,
    /// Whether an aws-chunked body whose checksum came in a trailer goes to
    /// the store framed again with that trailer
    /// (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`, so the store records the
    /// checksum), or, when false, as a plain body with a `Content-Length`
    /// (for a store that refuses such bodies: Ceph RGW 16). Either way the
    /// gateway has checked the checksum against the bytes first.
    pub checksum_trailers: bool,
}

impl Default for UpstreamOptions {
    fn default() -> UpstreamOptions {
        use defaults::*;
        UpstreamOptions {
            connect_timeout: CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            long_op_timeout: DEFAULT_LONG_OP_TIMEOUT,
            send_stall_timeout: DEFAULT_SEND_STALL_TIMEOUT,
            pool_idle_timeout: POOL_IDLE_TIMEOUT,
            retries: DEFAULT_MAX_RETRIES,
            backoff: DEFAULT_BACKOFF.to_vec(),
            health_interval: DEFAULT_HEALTH_INTERVAL,
            ca: CaCerts::none(),
            drop_encoding_type: false,
            checksum_trailers: true,
        }
    }
}

/// Which RDMA provider opens the devices (`--rdma-provider`, or
/// `HIPOBJ_PROVIDER` as the client library reads it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RdmaProvider {
    /// Names starting `soft` are the software provider's, others
    /// libibverbs'; by default the first libibverbs device, else `soft0`.
    #[default]
    Auto,
    /// The software provider only (`soft0`, `soft:<ipv4>`).
    Soft,
    /// libibverbs only, whatever the names (a NIC, rxe, or the soft
    /// provider's own libibverbs, soft-verbs).
    Verbs,
}

/// The RDMA side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaConfig {
    /// The devices to serve on: one name (`soft0`, `soft:<ipv4>`,
    /// `mlx5_0`, ...), several separated by commas (`mlx5_0,mlx5_1`), or
    /// `all` (every device whose port is active: the hardware ones if there
    /// are any, else the software provider's); `None` chooses: the first
    /// hardware device, else the software provider's `soft0`. See
    /// [`Devices::parse`].
    pub device: Option<String>,
    /// Which provider opens the devices.
    pub provider: RdmaProvider,
    /// A second request header name the token may come under (lowercase,
    /// e.g. `x-rdma-info`, which Dell ObjectScale's clients send); it must
    /// be signed, and a request may not carry both. `None`: only
    /// `x-amz-rdma-token`.
    pub token_alias: Option<String>,
    /// Bytes per staging buffer (one RDMA WRITE or READ each).
    pub chunk_size: usize,
    /// Staging buffers in all (chunk_size × buffers is the engine's RDMA
    /// memory), divided evenly among the devices served on.
    pub buffers: usize,
    /// Chunks in flight per transfer.
    pub depth: usize,
    /// How long a transfer waits for a staging buffer before it fails.
    pub pool_timeout: Duration,
    /// Connected QP pairs allowed per access key.
    pub pairs_per_key: usize,
    /// Connected QP pairs allowed in all.
    pub pairs_total: usize,
    /// Idle time after which a pair is dropped.
    pub pair_idle: Duration,
    /// How long a pair may sit idle before the gateway checks that its
    /// client is still there (a zero-length RDMA WRITE); a pair whose probe
    /// fails is released. The sweep that expires and probes pairs runs on
    /// this period too (at most every 5 s).
    pub pair_probe: Duration,
    /// How long a transfer may go without a work request completing before
    /// it is failed (a progress deadline, not a total one).
    pub progress_timeout: Duration,
    /// GETs of 1 MiB and more from the embedded store are sent from the
    /// object's file, mapped and registered, instead of through staging.
    pub map_store_files: bool,
    /// Bytes of mapped object ranges kept per device for the next GET of
    /// the same range (`rdma::mapped::MappedCache`); `None`: the staging
    /// pool's size.
    pub store_mapping_cache: Option<u64>,
    /// Staging buffers one access key may hold at a time; `None`: the whole
    /// pool when one access key is configured, half of it when several.
    pub staging_per_key: Option<usize>,
    /// DC initiators in all (a DC request waits for one, up to the pool
    /// timeout).
    pub dc_initiators: usize,
    /// DC initiators one access key may hold at a time.
    pub dc_per_key: usize,
    /// The DC access key presented to clients' DC targets; `None`: DC
    /// tokens are declined (501). cuObject's public default
    /// ([`hipobj_fabric::CUOBJECT_DC_KEY`]) is only used when chosen, and
    /// then logged as a warning.
    pub dc_key: Option<u64>,
    /// Networks whose addresses a client's RDMA GID may name besides the
    /// address of the HTTP connection the request came on (clients behind
    /// a proxy or load balancer, or with HTTP and RDMA on different
    /// interfaces). Empty: only the HTTP peer itself.
    pub allowed_peers: Vec<ipnet::IpNet>,
    /// hipobj-rc-v2 (`/.hipobj-rc/prepare`, `ready`, `cancel`).
    pub rc_v2: RcV2Config,
}

/// hipobj-rc-v2's settings: whether it is served, and its limits, each
/// with its timer (docs/protocol.md, "hipobj-rc-v2").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RcV2Config {
    /// Served; `false`: every control request is answered 501 with
    /// `x-amz-rdma-protocol-status: unsupported`.
    pub enabled: bool,
    /// How long a prepared session waits for its READY.
    pub prepare_timeout: Duration,
    /// How long a READY's data phase and store write may take in all.
    pub exec_timeout: Duration,
    /// Sessions (prepared or transferring) in all.
    pub sessions_total: usize,
    /// Sessions one access key may hold.
    pub sessions_per_key: usize,
    /// Data phases under way at once, in all; a READY beyond is answered
    /// 409 (busy, retryable; the session stays prepared).
    pub ready_slots: usize,
    /// Bytes of PUT staging regions in all (`None`: the staging pool's size,
    /// chunk × buffers).
    pub put_bytes: Option<u64>,
    /// Bytes of PUT staging regions one access key may hold, which is also
    /// the largest PUT served at once (`None`: the key's share of the pool,
    /// in bytes).
    pub put_bytes_per_key: Option<u64>,
}

impl Default for RcV2Config {
    fn default() -> RcV2Config {
        RcV2Config {
            enabled: true,
            prepare_timeout: Duration::from_secs(30),
            exec_timeout: Duration::from_secs(60),
            sessions_total: 1024,
            sessions_per_key: 64,
            ready_slots: 64,
            put_bytes: None,
            put_bytes_per_key: None,
        }
    }
}

/// Which devices the gateway serves on, as [`RdmaConfig::device`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    /// The first hardware device, else the software provider's `soft0`.
    Default,
    /// Every device whose port is active.
    All,
    /// These, in this order (the order of the device choice's ties).
    Named(Vec<String>),
}

impl Devices {
    /// Parses `--rdma-device`: `all`, or names separated by commas, each
    /// once; `None` or blank is [`Devices::Default`].
    pub fn parse(spec: Option<&str>) -> Result<Devices, String> {
        let Some(spec) = spec.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(Devices::Default);
        };
        if spec.eq_ignore_ascii_case("all") {
            return Ok(Devices::All);
        }
        let mut names: Vec<String> = Vec::new();
        for n in spec.split(',').map(str::trim) {
            if n.is_empty() {
                return Err(format!("{spec:?}: an empty device name"));
            }
            if n.eq_ignore_ascii_case("all") {
                return Err(format!("{spec:?}: \"all\" stands alone"));
            }
            if names.iter().any(|m| m == n) {
                return Err(format!("{spec:?}: {n} is named twice"));
            }
            names.push(n.to_string());
        }
        Ok(Devices::Named(names))
    }
}

impl Default for RdmaConfig {
    fn default() -> RdmaConfig {
        RdmaConfig {
            device: None,
            provider: RdmaProvider::Auto,
            token_alias: None,
            chunk_size: 8 << 20,
            buffers: 32,
            depth: 4,
            pool_timeout: Duration::from_secs(30),
            pairs_per_key: 256,
            pairs_total: 1024,
            pair_idle: Duration::from_secs(600),
            pair_probe: Duration::from_secs(15),
            progress_timeout: Duration::from_secs(15),
            map_store_files: true,
            store_mapping_cache: None,
            staging_per_key: None,
            dc_initiators: 64,
            dc_per_key: 16,
            dc_key: None,
            allowed_peers: Vec::new(),
            rc_v2: RcV2Config::default(),
        }
    }
}

/// The HTTP front: how long a client may take, and how many connections
/// are served at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// How long a request head (request line and headers) may take to
    /// arrive, counted from its first byte, or from the connection's
    /// accept for the first request; beyond it the connection is closed.
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection with no request in flight is kept
    /// open waiting for the next request's first byte.
    pub idle_timeout: Duration,
    /// How long a request body may stall (no byte arriving while the
    /// engine waits for one) before the request fails; the same bound
    /// applies to a client that stops reading its response.
    pub body_read_timeout: Duration,
    /// Connections served at once (lowered at start so that it stays below
    /// the open-file limit with a reserve; see `server::connection_cap`).
    /// At it, a new connection closes the one that has waited longest for
    /// its client; when every one is serving a request, it is answered 503
    /// `SlowDown` and closed.
    pub max_connections: usize,
    /// Connections one source address may hold (`None`: half of
    /// `max_connections`); at it, its own longest-waiting connection is
    /// closed to make room for a new one, or the new one is refused.
    pub max_connections_per_source: Option<usize>,
    /// Domains under which a request is virtual-hosted
    /// (`Host: bucket.<domain>[:port]`, path `/key`), as MinIO's
    /// `MINIO_DOMAIN`: such a request is served as `/bucket/key` is. Empty:
    /// path-style only.
    pub domains: Vec<String>,
    /// Where form uploads (POST Object) larger than 1 MiB wait for the
    /// store (`None`: `$TMPDIR`).
    pub post_spool_dir: Option<PathBuf>,
    /// Bytes all form uploads together may hold in spool files; beyond,
    /// a form upload fails with 503 `SlowDown`.
    pub post_spool_bytes: u64,
    /// How long one form upload may take in all, from its head to the
    /// store's answer (beyond: 400 `RequestTimeout`).
    pub post_upload_timeout: Duration,
    /// aws-chunked bytes the whole process may hold awaiting their chunk
    /// signatures (see `auth::chunk_budget`).
    pub chunk_buffer_bytes: u64,
    /// The share of that one access key may hold.
    pub chunk_buffer_per_key: u64,
    /// Requests with no authentication at all go to the store unsigned, as
    /// the client sent them (the store's ACLs, bucket policies and CORS
    /// rules decide: public-read objects, preflights); `false`: they are
    /// refused with 403.
    pub anonymous_to_store: bool,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_source: None,
            domains: Vec::new(),
            post_spool_dir: None,
            post_spool_bytes: 4 << 30,
            post_upload_timeout: Duration::from_secs(15 * 60),
            chunk_buffer_bytes: defaults::CHUNK_BUFFER_BYTES,
            chunk_buffer_per_key: defaults::CHUNK_BUFFER_PER_KEY,
            anonymous_to_store: true,
        }
    }
}

/// Everything the engine needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The region requests are signed for.
    pub region: String,
    /// Credentials clients sign with, each tenant's with its policy.
    pub credentials: Vec<Tenant>,
    /// Clock skew allowed on signed requests.
    pub max_skew: Duration,
    /// Where the objects live.
    pub upstream: UpstreamConfig,
    /// How a remote store is reached (ignored by the embedded one).
    pub upstream_options: UpstreamOptions,
    /// The RDMA side.
    pub rdma: RdmaConfig,
    /// The HTTP front's timeouts and connection cap.
    pub server: ServerConfig,
}

#[cfg(test)]
mod tests {
    use super::Devices;

    #[test]
    fn device_lists() {
        assert_eq!(Devices::parse(None), Ok(Devices::Default));
        assert_eq!(Devices::parse(Some(" ")), Ok(Devices::Default));
        assert_eq!(Devices::parse(Some("ALL")), Ok(Devices::All));
        assert_eq!(
            Devices::parse(Some("mlx5_0, mlx5_1")),
            Ok(Devices::Named(vec!["mlx5_0".into(), "mlx5_1".into()]))
        );
        assert_eq!(
            Devices::parse(Some("soft:127.0.0.2")),
            Ok(Devices::Named(vec!["soft:127.0.0.2".into()]))
        );
        assert!(Devices::parse(Some("mlx5_0,,mlx5_1")).is_err());
        assert!(Devices::parse(Some("mlx5_0,mlx5_0")).is_err());
        assert!(Devices::parse(Some("mlx5_0,all")).is_err());
    }
}
