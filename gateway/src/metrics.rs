//! Prometheus metrics: their names, and the helpers the engine calls.
//!
//! The recorder is installed once per process ([`install`], called when
//! the engine is built); the engine answers an unauthenticated
//! `GET /metrics` with [`render`] of a [`Gauges`] snapshot it takes of
//! itself. This module imports nothing of the gateway but the body type:
//! callers pass plain values (the S3 operation's name comes from
//! `crate::s3op`, an upstream error's reason from the upstream module).
//! Labels are bounded sets (S3 operation names, reasons, statuses, the
//! RDMA devices served on): never a bucket, key or access key. `device` is
//! the RDMA device's name (`mlx5_0`, `soft1`): the metrics of what happens
//! on one device (handshakes, bytes, transfers, completions, its staging
//! pool, pairs and DC initiators) carry it; those of requests refused
//! before a device is chosen do not.
//!
//! | Metric | Kind | Labels |
//! |--------|------|--------|
//! | `hipobj_requests_total` | counter | `op` (S3 operation), `path` (`rdma`, `http`) |
//! | `hipobj_auth_failures_total` | counter | `code` (S3 error code) |
//! | `hipobj_rdma_handshakes_total` | counter | `device`, `result` (`ok`, `limit`, `other_key`, `error`) |
//! | `hipobj_rdma_bytes_total` | counter | `device`, `direction` (`write`: to the client, GET; `read`: from the client, PUT/UploadPart) |
//! | `hipobj_rdma_transfer_seconds` | histogram | `device`, `op`, `result` (`ok`, `error`) |
//! | `hipobj_rdma_declined_total` | counter | `reason` (501: the client falls back to plain HTTP) |
//! | `hipobj_rdma_fallbacks_total` | counter | `reason` (`reconnect`: 421, the client repeats the handshake) |
//! | `hipobj_rdma_failures_total` | counter | `reason` (the S3 error code answered, or `StoreError`) |
//! | `hipobj_rdma_completion_errors_total` | counter | `device`, `op` (`write`, `read`), `status` (`ibv_wc_status` name, or `Timeout`) |
//! | `hipobj_staging_buffers_in_use` | gauge | `device` |
//! | `hipobj_staging_buffers_total` | gauge | `device` |
//! | `hipobj_staging_buffers_quarantined_total` | counter | `device` |
//! | `hipobj_rdma_pairs` | gauge | `device` (connected QP pairs) |
//! | `hipobj_rdma_pairs_released_total` | counter | `device`, `reason` (`idle`, `probe`) |
//! | `hipobj_rdma_dc_initiators_in_use` | gauge | `device` |
//! | `hipobj_upstream_request_seconds` | histogram | `op` (time until the store's response head) |
//! | `hipobj_upstream_errors_total` | counter | `op`, `reason` (no answer: `connect`, `connect_timeout`, `request`, ...; or `status_5xx`) |
//! | `hipobj_http_connections` | gauge | (client connections being served) |
//! | `hipobj_http_connections_closed_total` | counter | `reason` (closed by the front: `refused`, `header_timeout`, `idle_timeout`, `send_stall`) |

use crate::body::Body;
use http::Response;
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// Requests, by `op` and `path`.
pub const REQUESTS: &str = "hipobj_requests_total";
/// Requests whose authentication failed, by `code`.
pub const AUTH_FAILURES: &str = "hipobj_auth_failures_total";
/// RDMA handshakes, by `result`.
pub const HANDSHAKES: &str = "hipobj_rdma_handshakes_total";
/// Bytes moved by RDMA, by `direction`.
pub const RDMA_BYTES: &str = "hipobj_rdma_bytes_total";
/// RDMA transfer latency, by `op` and `result`.
pub const RDMA_TRANSFER_SECONDS: &str = "hipobj_rdma_transfer_seconds";
/// RDMA requests declined (501), by `reason`.
pub const RDMA_DECLINED: &str = "hipobj_rdma_declined_total";
/// RDMA requests the client must repeat another way, by `reason`.
pub const RDMA_FALLBACKS: &str = "hipobj_rdma_fallbacks_total";
/// RDMA requests that failed, by `reason`.
pub const RDMA_FAILURES: &str = "hipobj_rdma_failures_total";
/// Work completions with an error, by `op` and `status`.
pub const COMPLETION_ERRORS: &str = "hipobj_rdma_completion_errors_total";
/// Staging buffers held by transfers.
pub const STAGING_IN_USE: &str = "hipobj_staging_buffers_in_use";
/// Staging buffers in the pool.
pub const STAGING_TOTAL: &str = "hipobj_staging_buffers_total";
/// Connected QP pairs.
pub const PAIRS: &str = "hipobj_rdma_pairs";
/// Upstream latency to the response head, by `op`.
pub const UPSTREAM_SECONDS: &str = "hipobj_upstream_request_seconds";
/// Upstream requests without an answer or with a 5xx one, by `op` and `reason`.
pub const UPSTREAM_ERRORS: &str = "hipobj_upstream_errors_total";

/// Counter: staging buffers withdrawn because their work requests were never flushed.
pub const STAGING_QUARANTINED: &str = "hipobj_staging_buffers_quarantined_total";
/// Gauge: DC initiators leased by transfers now.
pub const DC_INITIATORS: &str = "hipobj_rdma_dc_initiators_in_use";
/// Counter: pairs released without a failed transfer, by reason (idle, probe, broken).
pub const PAIRS_RELEASED: &str = "hipobj_rdma_pairs_released_total";
/// Gauge: bytes form uploads hold in spool files.
pub const POST_SPOOL_BYTES: &str = "hipobj_post_spool_bytes";
/// Counter: form uploads refused because the spool's budget was spent.
pub const POST_SPOOL_REFUSED: &str = "hipobj_post_spool_refused_total";
/// Gauge: aws-chunked bytes held awaiting their chunk signatures.
pub const CHUNK_BUFFER_BYTES: &str = "hipobj_chunk_buffer_bytes";
/// Counter: aws-chunked bodies ended (503) because the chunk budget was spent.
pub const CHUNK_BUFFER_REFUSED: &str = "hipobj_chunk_buffer_refused_total";
/// Client connections being served.
pub const HTTP_CONNECTIONS: &str = "hipobj_http_connections";
/// Counter: bytes RDMA GETs took from the embedded store's files directly
/// (no response body in between): read into staging buffers, or mapped.
pub const STORE_DIRECT_BYTES: &str = "hipobj_rdma_store_direct_bytes_total";
/// Counter: of those, bytes the RDMA WRITEs took from the object's file
/// mapped and registered, without a staging buffer (one copy).
pub const STORE_MAPPED_BYTES: &str = "hipobj_rdma_store_mapped_bytes_total";
/// Gauge: object files mapped and registered for GETs now (one held for
/// good by a work request never flushed stays counted).
pub const STORE_MAPPED_REGIONS: &str = "hipobj_rdma_store_mapped_regions";
/// Gauge: requests whose head has been read and whose response has not
/// been sent whole (a `/metrics` scrape counts itself).
pub const HTTP_REQUESTS_IN_FLIGHT: &str = "hipobj_http_requests_in_flight";
/// Client connections the front closed itself, by `reason`.
pub const HTTP_CONNECTIONS_CLOSED: &str = "hipobj_http_connections_closed_total";
/// Counter: requests without authentication passed to the store unsigned.
pub const ANONYMOUS: &str = "hipobj_anonymous_requests_total";
/// Gauge: hipobj-rc-v2 sessions (prepared or transferring).
pub const RC_V2_SESSIONS: &str = "hipobj_rc_v2_sessions";
/// Gauge: hipobj-rc-v2 data phases under way.
pub const RC_V2_TRANSFERS: &str = "hipobj_rc_v2_transfers";
/// Gauge: bytes of hipobj-rc-v2 PUT staging regions held.
pub const RC_V2_PUT_BYTES: &str = "hipobj_rc_v2_put_staging_bytes";

/// The `path` label of a request with `x-amz-rdma-token`.
pub const PATH_RDMA: &str = "rdma";
/// The `path` label of a plain (proxied) request.
pub const PATH_HTTP: &str = "http";

/// Histogram buckets, in seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder as the process's global recorder (once;
/// later calls return the same handle). Should another recorder be
/// installed already, the handle is that of a recorder that sees nothing.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let handle = match builder.install_recorder() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "metrics recorder not installed");
                PrometheusBuilder::new().build_recorder().handle()
            }
        };
        describe();
        let upkeep = handle.clone();
        let _ = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(5));
                upkeep.run_upkeep();
            });
        handle
    })
}

fn describe() {
    describe_counter!(REQUESTS, "Requests by S3 operation and path (rdma, http)");
    describe_counter!(
        AUTH_FAILURES,
        "Requests refused by authentication, by S3 error code"
    );
    describe_counter!(HANDSHAKES, "RDMA handshakes by result");
    describe_counter!(
        RDMA_BYTES,
        "Bytes moved by RDMA, by direction (write: GET, read: PUT)"
    );
    describe_histogram!(
        RDMA_TRANSFER_SECONDS,
        metrics::Unit::Seconds,
        "RDMA transfers, from the store's request to the answer"
    );
    describe_counter!(RDMA_DECLINED, "RDMA requests declined (501) by reason");
    describe_counter!(
        RDMA_FALLBACKS,
        "RDMA requests the client repeats another way, by reason"
    );
    describe_counter!(RDMA_FAILURES, "RDMA requests that failed, by reason");
    describe_counter!(
        COMPLETION_ERRORS,
        "RDMA work completions with an error, by status"
    );
    describe_gauge!(STAGING_IN_USE, "Staging buffers held by transfers");
    describe_gauge!(STAGING_TOTAL, "Staging buffers in the pool");
    describe_gauge!(PAIRS, "Connected RDMA QP pairs");
    describe_counter!(
        STAGING_QUARANTINED,
        "Staging buffers withdrawn because their work requests were never flushed"
    );
    describe_gauge!(DC_INITIATORS, "DC initiators leased by transfers");
    describe_gauge!(POST_SPOOL_BYTES, "Bytes form uploads hold in spool files");
    describe_gauge!(
        CHUNK_BUFFER_BYTES,
        "aws-chunked bytes held awaiting their chunk signatures"
    );
    describe_counter!(
        CHUNK_BUFFER_REFUSED,
        "aws-chunked bodies ended (503) because the chunk budget was spent"
    );
    describe_counter!(
        POST_SPOOL_REFUSED,
        "Form uploads refused (503) because the spool's budget was spent"
    );
    describe_counter!(
        PAIRS_RELEASED,
        "RDMA pairs released, by reason (idle, probe: the sweeper; limit_probe: a handshake of the same key at its limit found their clients gone)"
    );
    describe_histogram!(
        UPSTREAM_SECONDS,
        metrics::Unit::Seconds,
        "Upstream requests, until the store's response head"
    );
    describe_counter!(
        UPSTREAM_ERRORS,
        "Upstream requests without an answer or answered 5xx"
    );
    describe_gauge!(HTTP_CONNECTIONS, "Client connections being served");
    describe_counter!(
        STORE_DIRECT_BYTES,
        metrics::Unit::Bytes,
        "Bytes RDMA GETs took from the embedded store's files directly (into staging, or mapped)"
    );
    describe_counter!(
        STORE_MAPPED_BYTES,
        metrics::Unit::Bytes,
        "Bytes RDMA GETs sent straight from the embedded store's files, mapped and registered"
    );
    describe_gauge!(
        STORE_MAPPED_REGIONS,
        "Object files mapped and registered for RDMA GETs now"
    );
    describe_gauge!(
        HTTP_REQUESTS_IN_FLIGHT,
        "Requests read and not yet answered whole"
    );
    describe_counter!(
        ANONYMOUS,
        "Requests without authentication passed to the store unsigned"
    );
    describe_gauge!(
        RC_V2_SESSIONS,
        "hipobj-rc-v2 sessions, prepared or transferring"
    );
    describe_gauge!(RC_V2_TRANSFERS, "hipobj-rc-v2 data phases under way");
    describe_gauge!(
        RC_V2_PUT_BYTES,
        metrics::Unit::Bytes,
        "Bytes of hipobj-rc-v2 PUT staging regions held by sessions"
    );
    describe_counter!(
        HTTP_CONNECTIONS_CLOSED,
        "Client connections the front refused or closed on a timeout, by reason"
    );
}

/// One device's state at one instant, for the gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// The device.
    pub device: String,
    /// Staging buffers in the pool.
    pub staging_total: usize,
    /// Staging buffers held by transfers.
    pub staging_in_use: usize,
    /// Connected QP pairs.
    pub pairs: usize,
    /// DC initiators leased by transfers.
    pub dc_initiators: usize,
}

/// The exposition text, with the gauges set from `now` (one per device).
pub fn render(now: &[Gauges]) -> Response<Body> {
    let handle = install();
    for g in now {
        let d = || g.device.clone();
        gauge!(STAGING_TOTAL, "device" => d()).set(g.staging_total as f64);
        gauge!(STAGING_IN_USE, "device" => d()).set(g.staging_in_use as f64);
        gauge!(PAIRS, "device" => d()).set(g.pairs as f64);
        gauge!(DC_INITIATORS, "device" => d()).set(g.dc_initiators as f64);
    }
    let mut r = Response::new(Body::from(handle.render()));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

/// An anonymous request passed to the store.
pub fn anonymous_request() {
    counter!(ANONYMOUS).increment(1);
}

/// hipobj-rc-v2's gauges now.
pub fn rc_v2(sessions: usize, transfers: usize, put_bytes: u64) {
    gauge!(RC_V2_SESSIONS).set(sessions as f64);
    gauge!(RC_V2_TRANSFERS).set(transfers as f64);
    gauge!(RC_V2_PUT_BYTES).set(put_bytes as f64);
}

/// A gauge one up (`true`) or one down.
fn step(name: &'static str, up: bool) {
    let g = gauge!(name);
    if up {
        g.increment(1.0);
    } else {
        g.decrement(1.0);
    }
}

/// A client connection opened (`true`) or closed.
pub fn http_connection(open: bool) {
    step(HTTP_CONNECTIONS, open);
}

/// An RDMA GET that took `bytes` from the embedded store's file directly
/// (into staging buffers, or mapped).
pub fn store_direct_bytes(bytes: u64) {
    counter!(STORE_DIRECT_BYTES).increment(bytes);
}

/// An object file mapped for a GET (`true`) or released.
pub fn store_mapped_region(held: bool) {
    step(STORE_MAPPED_REGIONS, held);
}

/// Bytes a GET's WRITEs took from the object's mapped file.
pub fn store_mapped_bytes(bytes: u64) {
    counter!(STORE_MAPPED_BYTES).increment(bytes);
}

/// A request started (`true`: its head is read) or ended (its response
/// sent whole, or dropped).
pub fn http_request_in_flight(start: bool) {
    step(HTTP_REQUESTS_IN_FLIGHT, start);
}

/// A client connection the front refused or closed itself, and why.
pub fn http_connection_closed(reason: &'static str) {
    counter!(HTTP_CONNECTIONS_CLOSED, "reason" => reason).increment(1);
}

/// One request.
pub fn request(op: &'static str, path: &'static str) {
    counter!(REQUESTS, "op" => op, "path" => path).increment(1);
}

/// A request refused by authentication.
pub fn auth_failure(code: &'static str) {
    counter!(AUTH_FAILURES, "code" => code).increment(1);
}

/// A handshake's `result` on `device`.
pub fn handshake(device: &str, result: &'static str) {
    counter!(HANDSHAKES, "device" => device.to_string(), "result" => result).increment(1);
}

/// Bytes a completed WRITE (`write`) or READ moved on `device`.
pub fn rdma_bytes(device: &str, write: bool, n: usize) {
    let direction = if write { "write" } else { "read" };
    counter!(RDMA_BYTES, "device" => device.to_string(), "direction" => direction)
        .increment(n as u64);
}

/// One transfer's duration on `device`.
pub fn rdma_transfer(device: &str, op: &'static str, took: Duration, ok: bool) {
    let result = if ok { "ok" } else { "error" };
    histogram!(
        RDMA_TRANSFER_SECONDS,
        "device" => device.to_string(),
        "op" => op,
        "result" => result
    )
    .record(took.as_secs_f64());
}

/// A declined (501) RDMA request.
pub fn rdma_declined(reason: &'static str) {
    counter!(RDMA_DECLINED, "reason" => reason).increment(1);
}

/// An RDMA request the client must repeat another way.
pub fn rdma_fallback(reason: &'static str) {
    counter!(RDMA_FALLBACKS, "reason" => reason).increment(1);
}

/// A failed RDMA request.
pub fn rdma_failure(reason: &'static str) {
    counter!(RDMA_FAILURES, "reason" => reason).increment(1);
}

/// Staging buffers of `device` withdrawn for good.
pub fn staging_quarantined(device: &str, n: usize) {
    counter!(STAGING_QUARANTINED, "device" => device.to_string()).increment(n as u64);
}

/// Pairs of `device` the sweeper released.
pub fn pairs_released(device: &str, reason: &'static str, n: usize) {
    if n > 0 {
        counter!(PAIRS_RELEASED, "device" => device.to_string(), "reason" => reason)
            .increment(n as u64);
    }
}

/// The aws-chunked bytes held now.
pub fn chunk_buffer_bytes(n: u64) {
    gauge!(CHUNK_BUFFER_BYTES).set(n as f64);
}

/// An aws-chunked body ended for the chunk budget.
pub fn chunk_buffer_refused() {
    counter!(CHUNK_BUFFER_REFUSED).increment(1);
}

/// The bytes form uploads hold in spool files now.
pub fn post_spool_bytes(n: u64) {
    gauge!(POST_SPOOL_BYTES).set(n as f64);
}

/// A form upload refused for the spool's budget.
pub fn post_spool_refused() {
    counter!(POST_SPOOL_REFUSED).increment(1);
}

/// A work completion with an error on `device` (`status`: the
/// `ibv_wc_status` name, or `Timeout` when none came).
pub fn completion_error(device: &str, write: bool, status: String) {
    let op = if write { "write" } else { "read" };
    counter!(
        COMPLETION_ERRORS,
        "device" => device.to_string(),
        "op" => op,
        "status" => status
    )
    .increment(1);
}

/// One request to the store: the time until its response head, and why it
/// counts as an error (no answer, or a 5xx one), if it does.
pub fn upstream_request(op: &'static str, took: Duration, error: Option<&'static str>) {
    histogram!(UPSTREAM_SECONDS, "op" => op).record(took.as_secs_f64());
    if let Some(reason) = error {
        counter!(UPSTREAM_ERRORS, "op" => op, "reason" => reason).increment(1);
    }
}
