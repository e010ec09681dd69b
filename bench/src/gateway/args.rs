//! The parameters of a run: the command line ([`Args`], [`Section`]) and
//! what they resolve to ([`Plan`]).

use std::path::PathBuf;

use anyhow::bail;

use crate::size::parse_size;

/// A part of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Section {
    /// GET and PUT throughput of each size on the three paths.
    Throughput,
    /// 4 KiB GET latency on the three paths.
    Latency,
    /// One object as large as one registered buffer holds, by RDMA.
    Big,
    /// An object larger than any buffer, by RDMA in parts and ranges.
    Huge,
    /// Small objects (4 KiB and 128 KiB by default) from 16 concurrent
    /// clients: operations per second and latency on the three paths.
    Small,
    /// Concurrent clients for a fixed count of requests (last: the plain
    /// proxy's connection buffers stay resident in the gateway after it).
    Concurrency,
}

/// `hipobj-bench gateway`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A smoke run: small sizes, one round, few requests (checks that
    /// everything works, measures nothing worth reporting).
    #[arg(long)]
    pub(super) quick: bool,
    /// Sections to run, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub(super) sections: Vec<Section>,
    /// Object sizes of the throughput section [default: 64MiB,1GiB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub(super) sizes: Vec<u64>,
    /// Rounds of the throughput section (the best is reported) [default: 3].
    #[arg(long)]
    pub(super) rounds: Option<usize>,
    /// 4 KiB GETs per path in the latency section [default: 1000].
    #[arg(long)]
    pub(super) latency_count: Option<usize>,
    /// Concurrent clients [default: 32].
    #[arg(long)]
    pub(super) clients: Option<usize>,
    /// Requests per path and direction in the concurrency section
    /// [default: 256].
    #[arg(long)]
    pub(super) requests: Option<usize>,
    /// Object size in the concurrency section [default: 16MiB].
    #[arg(long, value_parser = parse_size)]
    pub(super) concurrent_size: Option<u64>,
    /// Object sizes of the small-objects section, comma-separated
    /// [default: 4KiB,128KiB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub(super) small_sizes: Vec<u64>,
    /// The RDMA path's protocol: v2 (hipobj-rc-v2), handshake (the
    /// connect-first flow) or auto (v2 where the server speaks it; the
    /// handshake flow for 1 MiB and less where it says it serves that too).
    #[arg(long, default_value = "auto", value_name = "v2|handshake|auto")]
    pub(super) rdma_protocol: hipobj_s3::RdmaProtocol,
    /// Concurrent clients in the small-objects section.
    #[arg(long, default_value_t = 16)]
    pub(super) small_clients: usize,
    /// Requests per size, path and direction in the small-objects section
    /// [default: 2000].
    #[arg(long)]
    pub(super) small_requests: Option<usize>,
    /// The single-buffer RDMA object [default: 4GiB, the most one
    /// registered buffer holds].
    #[arg(long, value_parser = parse_size)]
    pub(super) big_size: Option<u64>,
    /// The object moved in parts and ranges [default: 10GiB].
    #[arg(long, value_parser = parse_size)]
    pub(super) huge_size: Option<u64>,
    /// Its part and range size, one reused registered buffer [default: 1GiB].
    #[arg(long, value_parser = parse_size)]
    pub(super) huge_part: Option<u64>,
    /// The gateway's staging buffer size in MiB (`--chunk-mib`).
    #[arg(long, default_value_t = 8)]
    pub(super) chunk_mib: usize,
    /// The gateway's staging buffers (`--staging-buffers`).
    #[arg(long, default_value_t = 32)]
    pub(super) staging_buffers: usize,
    /// Also write the markdown report to this file.
    #[arg(long)]
    pub(super) output: Option<PathBuf>,
    /// The s3s-fs 0.14.1 binary [default: $HIPOBJ_S3S_FS_BIN,
    /// target/tools/bin/s3s-fs, PATH].
    #[arg(long)]
    pub(super) s3s_fs: Option<PathBuf>,
    /// The hipobj-gateway binary [default: $HIPOBJ_GATEWAY_BIN, next to this
    /// executable].
    #[arg(long)]
    pub(super) gateway_bin: Option<PathBuf>,
    /// Where the temporary store directory is made [default: the system's
    /// temporary directory]; it is removed at the end.
    #[arg(long)]
    pub(super) tmp_dir: Option<PathBuf>,
    /// A store already running (e.g. Ceph RGW: scripts/ceph-rgw) instead
    /// of starting s3s-fs: its endpoint.
    #[arg(long, requires_all = ["store_access_key", "store_secret_key"])]
    pub(super) store_endpoint: Option<String>,
    /// Its access key.
    #[arg(long)]
    pub(super) store_access_key: Option<String>,
    /// Its secret key.
    #[arg(long, env = "HIPOBJ_BENCH_STORE_SECRET_KEY")]
    pub(super) store_secret_key: Option<String>,
    /// Its processes, whose CPU time is the store's column (radosgw,
    /// ceph-osd, ceph-mon for RGW), comma-separated PIDs.
    #[arg(long, value_delimiter = ',')]
    pub(super) store_pids: Vec<u32>,
    /// Its name in the report [default: s3s-fs, or "store"].
    #[arg(long)]
    pub(super) store_name: Option<String>,
    /// RUST_LOG of the two servers.
    #[arg(long, default_value = "warn")]
    pub(super) server_log: String,
}

/// The run's parameters, resolved.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) sections: Vec<Section>,
    pub(super) sizes: Vec<u64>,
    pub(super) rounds: usize,
    pub(super) latency_count: usize,
    pub(super) clients: usize,
    pub(super) requests: usize,
    pub(super) concurrent_size: u64,
    pub(super) small_sizes: Vec<u64>,
    pub(super) small_clients: usize,
    pub(super) small_requests: usize,
    /// The RDMA path's protocol, as given.
    pub(super) rdma_protocol: &'static str,
    pub(super) big_size: u64,
    pub(super) huge_size: u64,
    pub(super) huge_part: u64,
    pub(super) chunk_mib: usize,
    pub(super) staging_buffers: usize,
    pub(super) quick: bool,
    /// The store's name in the report.
    pub(super) store_name: String,
}

impl Plan {
    pub(super) fn from(a: &Args) -> anyhow::Result<Plan> {
        let q = a.quick;
        let mut sections = if a.sections.is_empty() {
            vec![
                Section::Throughput,
                Section::Latency,
                Section::Big,
                Section::Huge,
                Section::Small,
                Section::Concurrency,
            ]
        } else {
            a.sections.clone()
        };
        sections.sort();
        sections.dedup();
        let sizes = if a.sizes.is_empty() {
            if q {
                vec![4 << 20, 16 << 20]
            } else {
                vec![64 << 20, 1 << 30]
            }
        } else {
            a.sizes.clone()
        };
        let p = Plan {
            sections,
            sizes,
            rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }).max(1),
            latency_count: a.latency_count.unwrap_or(if q { 50 } else { 1000 }).max(1),
            clients: a.clients.unwrap_or(32).max(1),
            requests: a.requests.unwrap_or(if q { 64 } else { 256 }).max(1),
            concurrent_size: a
                .concurrent_size
                .unwrap_or(if q { 1 << 20 } else { 16 << 20 }),
            small_sizes: if a.small_sizes.is_empty() {
                vec![4 << 10, 128 << 10]
            } else {
                a.small_sizes.clone()
            },
            small_clients: a.small_clients.max(1),
            small_requests: a.small_requests.unwrap_or(if q { 64 } else { 2000 }).max(1),
            rdma_protocol: a.rdma_protocol.as_str(),
            big_size: a.big_size.unwrap_or(if q { 256 << 20 } else { 4 << 30 }),
            huge_size: a.huge_size.unwrap_or(if q { 1 << 30 } else { 10 << 30 }),
            huge_part: a.huge_part.unwrap_or(if q { 256 << 20 } else { 1 << 30 }),
            chunk_mib: a.chunk_mib.clamp(1, 1024),
            staging_buffers: a.staging_buffers.max(1),
            quick: q,
            store_name: a.store_name.clone().unwrap_or_else(|| {
                if a.store_endpoint.is_some() {
                    "store".into()
                } else {
                    "s3s-fs".into()
                }
            }),
        };
        if p.sizes.iter().any(|s| *s == 0 || *s > 4 << 30) {
            bail!("--sizes must be between 1 byte and 4GiB (one registered buffer)");
        }
        if p.small_sizes.iter().any(|s| *s == 0 || *s > 64 << 20) {
            bail!("--small-sizes must be between 1 byte and 64MiB");
        }
        if p.big_size == 0 || p.big_size > 4 << 30 {
            bail!("--big-size must be between 1 byte and 4GiB (one registered buffer)");
        }
        if p.concurrent_size == 0 || p.concurrent_size > 1 << 30 {
            bail!("--concurrent-size must be between 1 byte and 1GiB");
        }
        if p.huge_part < 5 << 20 || p.huge_part > 4 << 30 {
            bail!("--huge-part must be between 5MiB (S3's smallest part) and 4GiB");
        }
        if p.huge_size == 0 || p.huge_size.div_ceil(p.huge_part) > 10_000 {
            bail!("--huge-size must be non-zero and at most 10000 parts of --huge-part");
        }
        Ok(p)
    }
}
