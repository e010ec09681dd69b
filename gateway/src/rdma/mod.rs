//! The RDMA path: requests carrying `x-amz-rdma-token`.
//!
//! - `rail`: the devices served on, each with its PD, GID, staging pool,
//!   pairs and DC initiators; `choose`: which device answers a client.
//! - `pairs`: the connect-first RC flow's server QPs (a table per device).
//! - `dci`: the bounded pool of DC initiators (one per device, shared limits).
//! - `shares`: per-access-key shares of the staging pools and the initiators.
//! - `staging`: a device's pool of registered buffers.
//! - `mover`: posting WRITE/READ and waiting for completions.
//! - `checksum`: the checksums a PUT is verified against.
//! - `target`: where a token aims (handshake, RC QP or DC target, buffer),
//!   and the buffers a token may name for an operation.
//! - `handshake`: the connect-first RC flow's answer.
//! - `admit`: whether a transfer may start and on which QP (`Admission`),
//!   and the refusals.
//! - `transfer`, `reply`: what a transfer works with, and its answer's headers.
//! - `get`, `put`: GetObject, and PutObject/UploadPart.

mod admit;
pub mod checksum;
pub mod choose;
// One of the two modules with unsafe code: registering a CQ's completion
// channel with tokio's reactor (`AsyncFd::register_with_interest`), whose
// contract on the descriptor's lifetime is argued at the call.
#[allow(unsafe_code)]
pub mod completions;
pub mod dci;
pub(crate) mod get;
mod handshake;
// The other module with unsafe code: an object's file mapped and
// registered as a GET's source (mmap, munmap, reg_mr), argued at each call.
#[allow(unsafe_code)]
pub mod mapped;
pub mod mover;
pub mod pairs;
mod put;
pub mod rail;
pub(crate) mod reply;
pub mod shares;
pub mod staging;
mod target;
pub mod token_alias;
pub(crate) mod transfer;
pub mod v2;

use crate::body::Body;
use crate::client_addr::ClientAddr;
use crate::config::RdmaConfig;
use crate::s3err::S3Error;
use crate::s3op::Operation;
use crate::upstream::Upstream;
use admit::Admission;
use choose::Candidate;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{Gid, QpState};
use hipobj_wire::detect;
use http::Response;
use mover::Initiator;
use rail::Rail;
pub use rail::StartError;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tracing::Instrument as _;

use reply::with_reply;
use target::{check_buffer, Aim};
use transfer::Transfer;

/// cuObject's public default DC access key, what `--dc-key cuobject`
/// chooses ([`hipobj_fabric::CUOBJECT_DC_KEY`]).
pub const DEFAULT_DC_KEY: u64 = hipobj_fabric::CUOBJECT_DC_KEY;

/// The longest a handshake at its key's pair limit waits for the probes of
/// that key's pairs (a live client answers within a round trip; one that
/// is gone fails the probe or never answers).
pub const HANDSHAKE_PROBE_WAIT: Duration = Duration::from_secs(2);

/// The RDMA side of the engine: one rail per device served on.
#[derive(Debug)]
pub struct RdmaEngine {
    /// The devices, in the configured order (the device choice's ties go
    /// to the first).
    pub rails: Vec<Rail>,
    cfg: RdmaConfig,
    /// Whether a transfer may start, and on which QP.
    admission: Admission,
    /// hipobj-rc-v2's sessions and limits.
    pub v2: v2::RcV2,
}

impl RdmaEngine {
    /// Opens the devices (`cfg.device`: one, several, `all`, or by default
    /// the first hardware device, else the software provider's `soft0`)
    /// and registers a staging pool on each.
    pub fn open(cfg: &RdmaConfig) -> Result<RdmaEngine, StartError> {
        let soft: Arc<dyn Provider> = Arc::new(SoftProvider::from_env()?);
        let verbs: Arc<dyn Provider> = Arc::new(hipobj_fabric::ibverbs::VerbsProvider::new());
        let rails = rail::open_all(cfg, soft, verbs)?;
        let chunk = cfg.chunk_size as u64;
        let pool_bytes = chunk.saturating_mul(cfg.buffers as u64);
        let share_bytes = chunk
            .saturating_mul(cfg.staging_per_key.unwrap_or(cfg.buffers).min(cfg.buffers) as u64);
        Ok(RdmaEngine {
            rails,
            cfg: cfg.clone(),
            admission: Admission::new(cfg),
            v2: v2::RcV2::new(&cfg.rc_v2, pool_bytes, share_bytes),
        })
    }

    /// Starts the thread that expires idle pairs and probes the clients of
    /// pairs that sat idle, on a timer; it ends when the engine is dropped.
    pub fn start_sweeper(self: &Arc<Self>) -> std::io::Result<()> {
        let engine: Weak<RdmaEngine> = Arc::downgrade(self);
        let period = self.cfg.pair_probe.min(Duration::from_secs(5));
        std::thread::Builder::new()
            .name("rdma-pair-sweeper".into())
            .spawn(move || loop {
                std::thread::sleep(period);
                let Some(e) = engine.upgrade() else { return };
                let probe_wait = e.cfg.progress_timeout;
                for r in &e.rails {
                    let _span = tracing::info_span!("rdma", device = %r.name).entered();
                    crate::metrics::pairs_released(&r.name, "idle", r.pairs.sweep());
                    crate::metrics::pairs_released(
                        &r.name,
                        "probe",
                        r.pairs.probe(e.cfg.pair_probe, probe_wait),
                    );
                }
            })
            .map(|_| ())
    }

    /// Before a handshake of `access_key` on device `rail`: where the key
    /// is at its pair limit, probes its pairs there and releases those
    /// whose client is gone (see `pairs`), waiting at most
    /// [`HANDSHAKE_PROBE_WAIT`] (or the progress timeout, if shorter).
    async fn release_gone_pairs_at_limit(self: &Arc<Self>, rail: usize, access_key: &str) {
        let here = self.rails[rail].pairs.held(access_key).mine;
        let elsewhere = self.pairs_elsewhere(rail, access_key).mine;
        if here == 0 || here + elsewhere < self.cfg.pairs_per_key {
            return;
        }
        let (engine, key) = (Arc::clone(self), access_key.to_string());
        let wait = self.cfg.progress_timeout.min(HANDSHAKE_PROBE_WAIT);
        let released =
            tokio::task::spawn_blocking(move || engine.rails[rail].pairs.probe_key(&key, wait))
                .await
                .unwrap_or(0);
        crate::metrics::pairs_released(&self.rails[rail].name, "limit_probe", released);
    }

    /// A human description for the start-up line.
    pub fn describe(&self) -> String {
        let rails: Vec<String> = self.rails.iter().map(Rail::describe).collect();
        format!("device {}", rails.join("; device "))
    }

    /// Whether every device's port is active (health).
    pub fn ready(&self) -> bool {
        self.rails.iter().all(Rail::active)
    }

    /// DC initiators leased now, on all devices.
    pub fn dc_in_use(&self) -> usize {
        self.rails.iter().map(|r| r.dcis.in_use()).sum()
    }

    /// The gauges' values now, one set per device, for `GET /metrics`.
    pub fn gauges(&self) -> Vec<crate::metrics::Gauges> {
        crate::metrics::rc_v2(
            self.v2.sessions.len(),
            self.v2.transfers(),
            self.v2.put_bytes_in_use(),
        );
        self.rails.iter().map(Rail::gauges).collect()
    }

    /// The device that answers a client whose GID is `client`
    /// ([`choose::choose`]).
    fn rail_for(&self, client: Gid) -> usize {
        if self.rails.len() == 1 {
            return 0;
        }
        let candidates: Vec<Candidate> = self
            .rails
            .iter()
            .map(|r| Candidate {
                gid: r.gid,
                active: r.active(),
            })
            .collect();
        let (i, why) = choose::choose(client, &candidates);
        tracing::debug!(
            device = %self.rails[i].name,
            client = ?client,
            why = why.as_str(),
            "RDMA device chosen"
        );
        i
    }

    /// The pairs of the devices other than `rail`, for the limits.
    fn pairs_elsewhere(&self, rail: usize, access_key: &str) -> pairs::Elsewhere {
        let mut e = pairs::Elsewhere::default();
        for (i, r) in self.rails.iter().enumerate() {
            if i != rail {
                let h = r.pairs.held(access_key);
                e.mine += h.mine;
                e.total += h.total;
            }
        }
        e
    }

    /// Serves one request carrying `token` for the authenticated
    /// `access_key`; `client` is the HTTP peer it came from.
    pub async fn serve(
        self: &Arc<Self>,
        access_key: &str,
        client: Option<ClientAddr>,
        parts: http::request::Parts,
        token: &str,
        upstream: &Arc<dyn Upstream>,
        request_id: &str,
    ) -> Response<Body> {
        let redacted = hipobj_wire::redacted(token);
        let op = crate::s3op::request_operation(&parts.method, &parts.uri, &parts.headers);
        crate::metrics::request(op.name(), crate::metrics::PATH_RDMA);
        let detected = match detect(token) {
            Ok(d) => d,
            Err(e) => {
                tracing::info!(token = %redacted, error = %e, "invalid RDMA token");
                crate::metrics::rdma_failure("InvalidRDMAToken");
                return S3Error::invalid_token(e.to_string()).into_response(request_id);
            }
        };
        // Where the bytes would go: the RC client QP, or a DC target.
        let (target, remote, dialect) =
            match target::aim(detected, self.admission.dc_key().unwrap_or_default()) {
                Aim::Handshake(t) => {
                    if !self.admission.peer_allowed(t.gid, client) {
                        return admit::refuse_peer(t.gid, client, request_id);
                    }
                    let rail = self.rail_for(t.gid);
                    if parts
                        .headers
                        .contains_key(hipobj_wire::headers::RDMA_GOODBYE)
                    {
                        return handshake::goodbye(&self.rails[rail], access_key, &t, request_id);
                    }
                    self.release_gone_pairs_at_limit(rail, access_key).await;
                    let elsewhere = self.pairs_elsewhere(rail, access_key);
                    return handshake::connect(
                        &self.rails[rail],
                        elsewhere,
                        access_key,
                        &t,
                        request_id,
                    );
                }
                Aim::Decline { reason, why } => return admit::decline(reason, why, request_id),
                Aim::Transfer {
                    target,
                    remote,
                    dialect,
                } => (target, remote, dialect),
            };
        if !matches!(
            op,
            Operation::GetObject | Operation::PutObject | Operation::UploadPart
        ) {
            return admit::decline(
                "operation",
                "RDMA serves GetObject, PutObject and UploadPart only",
                request_id,
            );
        }
        // A client's mistake is a 4xx before any RDMA (SDKs retry 5xx).
        if let Err(e) = check_buffer(op, &remote) {
            tracing::info!(token = %redacted, error = %e.message, "RDMA buffer refused");
            crate::metrics::rdma_failure(e.code);
            return with_reply(e.into_response(request_id), "400");
        }
        if !self.admission.peer_allowed(target.gid(), client) {
            return admit::refuse_peer(target.gid(), client, request_id);
        }
        // The device that reaches the client; an RC pair is looked for in
        // its table only.
        let rail = self.rail_for(target.gid());
        let initiator = match self
            .admission
            .initiator(&self.rails[rail], target, access_key, request_id)
            .await
        {
            Ok(i) => i,
            Err(refused) => return refused,
        };
        let share = self.rails[rail].pool.share(access_key);
        let span = tracing::info_span!(
            "rdma",
            device = %self.rails[rail].name,
            dialect,
            op = ?op,
            len = remote.len,
            token = %redacted
        );
        let (engine, upstream, request_id_owned) =
            (self.clone(), upstream.clone(), request_id.to_string());
        let transfer = async move {
            let request_id = request_id_owned;
            let rail = &engine.rails[rail];
            let pair = match &initiator {
                Initiator::Rc(p) => Some(p.clone()),
                Initiator::Dc { .. } => None,
            };
            let _busy = match &pair {
                Some(p) => {
                    p.touch();
                    let busy = p.busy.lock().await;
                    if p.is_reclaimed() {
                        // A failed probe released it meanwhile.
                        return admit::reconnect(&request_id);
                    }
                    Some(busy)
                }
                None => None,
            };
            let start = std::time::Instant::now();
            let ctx = Transfer {
                pool: &rail.pool,
                device: &rail.name,
                depth: engine.depth(),
                progress_timeout: engine.progress_timeout(),
                map_files: engine.cfg.map_store_files,
                mapped: &rail.mapped,
                pool_timeout: engine.pool_timeout(),
                share: &share,
                upstream: &upstream,
                request_id: &request_id,
                v2: None,
            };
            let result = match op {
                Operation::GetObject => get::run(&ctx, parts, initiator, remote).await,
                _ => put::run(&ctx, parts, initiator, remote).await,
            };
            crate::metrics::rdma_transfer(&rail.name, op.name(), start.elapsed(), result.is_ok());
            if let Some(p) = &pair {
                p.touch();
                if !matches!(p.qp.state(), Ok(QpState::Rts)) {
                    // A failed transfer leaves the QP in ERR: the client reconnects.
                    if let Ok(a) = p.qp.query() {
                        if let Some(g) = a.ah_attr.grh {
                            rail.pairs.remove_pair(g.dgid, a.dest_qp_num, p);
                        }
                    }
                }
            }
            match &result {
                // Each transfer's success is counted by the metrics; logged
                // at debug, as plain requests are not logged at all.
                Ok(r) => tracing::debug!(status = r.status().as_u16(), "RDMA transfer done"),
                Err(r) => tracing::warn!(status = r.status().as_u16(), "RDMA transfer failed"),
            }
            result.unwrap_or_else(|r| r)
        }
        .instrument(span);
        // The transfer runs in a task of its own, so that it is not
        // cancelled with the request when the client's HTTP connection
        // drops: dropped half-way, a PUT's body would end early but cleanly
        // (the store keeping a truncated object), and work requests still in
        // flight would outlive their staging buffers, back in the pool.
        match tokio::spawn(transfer).await {
            Ok(r) => r,
            Err(e) => {
                crate::metrics::rdma_failure("InternalError");
                S3Error::internal(format!("the RDMA transfer task failed: {e}"))
                    .into_response(request_id)
            }
        }
    }

    /// The buffer wait.
    pub fn pool_timeout(&self) -> std::time::Duration {
        self.cfg.pool_timeout
    }

    /// The progress deadline of a transfer.
    pub fn progress_timeout(&self) -> Duration {
        self.cfg.progress_timeout
    }

    /// Chunks in flight per transfer.
    pub fn depth(&self) -> usize {
        self.cfg.depth.max(1)
    }
}
