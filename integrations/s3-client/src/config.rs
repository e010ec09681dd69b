//! The client's configuration.

use std::sync::Arc;
use std::time::Duration;

/// Default part size of multipart uploads: 64 MiB.
pub const DEFAULT_PART_SIZE: usize = 64 << 20;
/// Default number of parts moved at once.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Default number of attempts of each request.
pub const DEFAULT_ATTEMPTS: u32 = 2;
/// Default time an endpoint found without RDMA is remembered as such.
pub const DEFAULT_NO_RDMA_TTL: Duration = Duration::from_secs(5 * 60);
/// Default time an endpoint of several is avoided after it failed an
/// attempt (refused, reset, timed out, 502/503/504).
pub const DEFAULT_ENDPOINT_COOLDOWN: Duration = Duration::from_secs(10);
/// Default largest transfer that `auto` sends by the handshake flow rather
/// than hipobj-rc-v2 at a server that serves both: 1 MiB.
pub const DEFAULT_AUTO_HANDSHAKE_MAX: u64 = 1 << 20;
/// The smallest part S3 accepts (but the last).
pub const MIN_PART_SIZE: usize = 5 << 20;

/// Which RDMA protocol the client speaks (`rdma_protocol`,
/// `--rdma-protocol`, `HIPOBJ_RDMA_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RdmaProtocol {
    /// hipobj-rc-v2 only: PREPARE, READY (docs/protocol.md); a server
    /// without it gets plain HTTP.
    V2,
    /// The connect-first handshake flow only (a token on the S3 request).
    Handshake,
    /// v2 first; a server that does not speak it (501 with
    /// `x-amz-rdma-protocol-status: unsupported`, or an answer without the
    /// protocol echo) is remembered for a while and gets the handshake
    /// flow, then plain HTTP as ever.
    #[default]
    Auto,
}

impl RdmaProtocol {
    /// `v2`, `handshake` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            RdmaProtocol::V2 => "v2",
            RdmaProtocol::Handshake => "handshake",
            RdmaProtocol::Auto => "auto",
        }
    }

    /// Whether v2 is tried.
    pub fn tries_v2(self) -> bool {
        self != RdmaProtocol::Handshake
    }
}

impl std::fmt::Display for RdmaProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RdmaProtocol {
    type Err = String;

    /// `v2` (or `hipobj-rc-v2`), `handshake` (or `v1`), `auto`; any case,
    /// surrounding blanks ignored.
    fn from_str(s: &str) -> std::result::Result<RdmaProtocol, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "v2" | "hipobj-rc-v2" => Ok(RdmaProtocol::V2),
            "handshake" | "v1" => Ok(RdmaProtocol::Handshake),
            "auto" => Ok(RdmaProtocol::Auto),
            _ => Err(format!(
                "rdma protocol {s:?} is none of v2, handshake, auto"
            )),
        }
    }
}

/// Timeouts of each attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing a TCP connection (default 5 s).
    pub connect: Duration,
    /// One attempt of a request without payload, up to its whole answer;
    /// also the longest wait for the next piece of a body (default 10 s,
    /// as the MinIO SDKs).
    pub request: Duration,
    /// Added to `request` for each GiB the attempt moves (by RDMA or in an
    /// HTTP body), so large transfers get time in proportion (default 30 s,
    /// a floor of about 34 MiB/s).
    pub per_gib: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(10),
            per_gib: Duration::from_secs(30),
        }
    }
}

impl Timeouts {
    /// The limit of one attempt that moves `bytes`.
    pub fn for_bytes(&self, bytes: u64) -> Duration {
        let gib = bytes as f64 / (1u64 << 30) as f64;
        self.request + self.per_gib.mul_f64(gib)
    }
}

/// What an [`S3Client`](crate::S3Client) talks to and how.
///
/// ```
/// use hipobj_s3::ClientConfig;
///
/// let mut cfg = ClientConfig::new("http://127.0.0.1:9000", "hipobj-test-key", "hipobj-test-secret");
/// cfg.require_rdma = true;
/// cfg.part_size = 16 << 20;
/// assert_eq!(cfg.region, "us-east-1");
/// assert_eq!(cfg.concurrency, 4);
/// assert!(cfg.rdma_memory.is_none()); // plain HTTP until a library is given
/// ```
#[derive(Clone)]
pub struct ClientConfig {
    /// `http://host:port` (no TLS), or several separated by commas
    /// (`http://gw1:9000,http://gw2:9000`: gateways in front of one store).
    /// Requests go to the current one; an attempt that fails there (no
    /// connection, a connection reset or a transfer broken off, a timeout,
    /// a 502/503/504 answer) puts it in a cool-down
    /// ([`endpoint_cooldown`](Self::endpoint_cooldown)) and the retry goes
    /// to the next (round robin), within [`attempts`](Self::attempts).
    /// Each is validated by [`S3Client::new`](crate::S3Client::new).
    pub endpoint: String,
    /// Virtual-hosted-style addressing: each request goes to the endpoint's
    /// address with `Host: <bucket>.<host>:<port>` and path `/key`, for a
    /// server that knows the endpoint's host as its domain (the gateway's
    /// `--domain`). Default false: path-style (`/bucket/key`).
    pub virtual_host: bool,
    /// The SigV4 region (default `us-east-1`).
    pub region: String,
    /// The access key.
    pub access_key: String,
    /// The secret key.
    pub secret_key: String,
    /// Make every fallback to plain HTTP an [`Error::RdmaRequired`](crate::Error::RdmaRequired).
    pub require_rdma: bool,
    /// Objects larger than this go in a multipart upload of parts this
    /// large (default 64 MiB; at least 5 MiB).
    pub part_size: usize,
    /// Parts moved at once (default 4). RDMA parts each lease a connection
    /// of the client library's pool (`HIPOBJ_MAX_TRANSFERS`, default 16).
    pub concurrency: usize,
    /// Timeouts of each attempt.
    pub timeouts: Timeouts,
    /// Attempts of each request (default 2): transport failures, timeouts
    /// and 5xx answers are tried again, each RDMA attempt with a fresh token.
    pub attempts: u32,
    /// The client library whose registered buffers are moved by RDMA;
    /// `None` moves every byte over plain HTTP.
    pub rdma_memory: Option<Arc<hipobj::Hipobj>>,
    /// How long an endpoint found without RDMA (its handshake answered
    /// without `x-amz-rdma-reply`) is remembered as such, process-wide
    /// (default 5 minutes).
    pub no_rdma_ttl: std::time::Duration,
    /// Bind the TCP connections of RDMA requests to the address of the NIC
    /// the token's GID names, as the MinIO SDKs do (default true).
    pub bind_to_token_nic: bool,
    /// Which RDMA protocol to speak (default [`RdmaProtocol::Auto`]).
    pub rdma_protocol: RdmaProtocol,
    /// Under [`RdmaProtocol::Auto`], transfers of at most this many bytes
    /// (a GET's room in the buffer, when the object's size is not given)
    /// go by the handshake flow at an endpoint known to serve it, instead
    /// of hipobj-rc-v2 first (default 1 MiB; 0: v2 first for every size).
    /// An endpoint is known to serve it when a v2 answer there said so
    /// (`x-amz-rdma-capabilities: hipobj-handshake`, which hipobj's gateway
    /// and test server send), in the last minute: the first small transfer
    /// goes by v2 and learns it. The handshake flow keeps its connected QPs
    /// and moves a small object in one HTTP exchange, where v2 takes a HEAD
    /// (a GET's size), PREPARE and READY and a new QP and connection each
    /// time: several times faster under 1 MiB (docs/benchmarks.md).
    pub auto_handshake_max: u64,
    /// How long an endpoint of several is avoided after it failed an
    /// attempt (default 10 s); then it is tried again when the rotation
    /// comes back to it. Unused with one endpoint.
    pub endpoint_cooldown: Duration,
}

impl ClientConfig {
    /// A configuration with the defaults: region `us-east-1`, plain HTTP
    /// (no `rdma_memory`), fallback allowed.
    pub fn new(
        endpoint: impl Into<String>,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> ClientConfig {
        ClientConfig {
            endpoint: endpoint.into(),
            virtual_host: false,
            region: "us-east-1".into(),
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            require_rdma: false,
            part_size: DEFAULT_PART_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
            timeouts: Timeouts::default(),
            attempts: DEFAULT_ATTEMPTS,
            rdma_memory: None,
            no_rdma_ttl: DEFAULT_NO_RDMA_TTL,
            bind_to_token_nic: true,
            rdma_protocol: RdmaProtocol::Auto,
            auto_handshake_max: DEFAULT_AUTO_HANDSHAKE_MAX,
            endpoint_cooldown: DEFAULT_ENDPOINT_COOLDOWN,
        }
    }

    /// With several endpoints (gateways in front of one store), tried in
    /// this order: [`endpoint`](Self::endpoint) becomes their list.
    ///
    /// ```
    /// use hipobj_s3::ClientConfig;
    ///
    /// let cfg = ClientConfig::new("http://gw1:9000", "k", "s")
    ///     .with_endpoints(["http://gw1:9000", "http://gw2:9000"]);
    /// assert_eq!(cfg.endpoint, "http://gw1:9000,http://gw2:9000");
    /// assert_eq!(cfg.endpoints(), ["http://gw1:9000", "http://gw2:9000"]);
    /// ```
    pub fn with_endpoints<I, S>(mut self, endpoints: I) -> ClientConfig
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let v: Vec<String> = endpoints
            .into_iter()
            .map(|e| e.as_ref().trim().to_string())
            .collect();
        self.endpoint = v.join(",");
        self
    }

    /// The endpoints [`endpoint`](Self::endpoint) lists, trimmed, in order
    /// (not validated: [`S3Client::new`](crate::S3Client::new) does).
    pub fn endpoints(&self) -> Vec<String> {
        self.endpoint
            .split(',')
            .map(|e| e.trim().to_string())
            .collect()
    }

    /// With the client library whose registered buffers move by RDMA.
    pub fn with_rdma(mut self, lib: Arc<hipobj::Hipobj>) -> ClientConfig {
        self.rdma_memory = Some(lib);
        self
    }
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("endpoint", &self.endpoint)
            .field("virtual_host", &self.virtual_host)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("require_rdma", &self.require_rdma)
            .field("part_size", &self.part_size)
            .field("concurrency", &self.concurrency)
            .field("timeouts", &self.timeouts)
            .field("attempts", &self.attempts)
            .field("rdma_memory", &self.rdma_memory.is_some())
            .field("no_rdma_ttl", &self.no_rdma_ttl)
            .field("bind_to_token_nic", &self.bind_to_token_nic)
            .field("rdma_protocol", &self.rdma_protocol)
            .field("auto_handshake_max", &self.auto_handshake_max)
            .field("endpoint_cooldown", &self.endpoint_cooldown)
            .finish()
    }
}
