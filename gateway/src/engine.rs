//! The engine: every request is authenticated, then served by RDMA when it
//! carries a token, or proxied to the store when it does not. The gateway
//! and the test server are this engine with a different store behind it.

use crate::auth::{self, AuthSettings, BodyMode, Credentials};
use crate::body::Body;
use crate::client_addr::ClientAddr;
use crate::config::{EngineConfig, ServerConfig, UpstreamConfig};
use crate::rdma::RdmaEngine;
use crate::s3err::{request_id, S3Error};
use crate::upstream::{self, Payload, Upstream};
use http::{Request, Response, StatusCode};
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store.
    #[error("upstream: {0}")]
    Upstream(#[from] upstream::UpstreamError),
    /// The RDMA device or pool.
    #[error("RDMA: {0}")]
    Rdma(#[from] crate::rdma::StartError),
    /// The listener.
    #[error("listen: {0}")]
    Io(#[from] std::io::Error),
    /// Settings that cannot work together.
    #[error("{0}")]
    Config(String),
}

/// The engine.
#[derive(Debug)]
pub struct Engine {
    /// The access keys and their tenants' policies; replaced whole by
    /// [`Engine::set_credentials`] (a request keeps the set it started
    /// with).
    creds: RwLock<Arc<Credentials>>,
    /// Whether the store is the embedded one (which has one identity: no
    /// tenant may name store credentials of its own).
    embedded: bool,
    auth: AuthSettings,
    upstream: Arc<dyn Upstream>,
    /// The RDMA side.
    pub rdma: Arc<RdmaEngine>,
    /// The HTTP front's timeouts and connection cap, for [`serve`].
    pub server: ServerConfig,
    /// Where and within what bounds form uploads wait for the store.
    spool: crate::plain::post_spool::SpoolSettings,
    /// Whether a trailing checksum goes on to the store in a trailer
    /// ([`crate::config::UpstreamOptions::checksum_trailers`]).
    checksum_trailers: bool,
}

impl Engine {
    /// Builds the engine: the store (a remote one reached as
    /// `cfg.upstream_options` say), the RDMA device and the staging pool.
    pub fn new(cfg: &EngineConfig) -> Result<Engine, StartError> {
        crate::metrics::install();
        let embedded = matches!(cfg.upstream, UpstreamConfig::Embedded { .. });
        crate::auth::chunk_budget::global().configure(
            cfg.server.chunk_buffer_bytes,
            cfg.server.chunk_buffer_per_key,
        );
        check_tenants(&cfg.credentials, embedded)?;
        let upstream = upstream::build_with(&cfg.upstream, &cfg.region, &cfg.upstream_options)?;
        let mut rdma_cfg = cfg.rdma.clone();
        if rdma_cfg.staging_per_key.is_none() {
            // Tenants share the pool; a single one may use all of it.
            let buffers = rdma_cfg.buffers.max(1);
            rdma_cfg.staging_per_key = Some(if cfg.credentials.len() > 1 {
                (buffers / 2).max(1)
            } else {
                buffers
            });
        }
        let rdma = Arc::new(RdmaEngine::open(&rdma_cfg)?);
        rdma.start_sweeper()?;
        rdma.start_reaper()?;
        Ok(Engine {
            creds: RwLock::new(Arc::new(Credentials::of_tenants(&cfg.credentials))),
            embedded,
            auth: AuthSettings {
                region: cfg.region.clone(),
                max_skew: cfg.max_skew,
                token_alias: cfg.rdma.token_alias.clone(),
                anonymous_to_store: cfg.server.anonymous_to_store,
            },
            upstream,
            rdma,
            server: cfg.server.clone(),
            spool: crate::plain::post_spool::SpoolSettings {
                budget: crate::plain::post_spool::SpoolBudget::new(cfg.server.post_spool_bytes),
                dir: cfg.server.post_spool_dir.clone(),
                deadline: cfg.server.post_upload_timeout,
            },
            checksum_trailers: cfg.upstream_options.checksum_trailers,
        })
    }

    /// Replaces the access keys and their policies (SIGHUP's reload of the
    /// credentials file): requests that have started keep the set they
    /// started with; a set that cannot be served leaves the old one.
    pub fn set_credentials(&self, tenants: &[crate::config::Tenant]) -> Result<(), StartError> {
        check_tenants(tenants, self.embedded)?;
        let new = Arc::new(Credentials::of_tenants(tenants));
        match self.creds.write() {
            Ok(mut guard) => *guard = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
        Ok(())
    }

    /// The access keys in force now.
    fn credentials(&self) -> Arc<Credentials> {
        match self.creds.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// What the engine runs on, for the start-up line.
    pub fn describe(&self) -> String {
        format!(
            "store {}; RDMA {}",
            self.upstream.describe(),
            self.rdma.describe()
        )
    }

    /// Serves one request.
    pub async fn handle(&self, req: Request<Body>) -> Response<Body> {
        let request_id = request_id();
        let creds = self.credentials();
        let (parts, body) = req.into_parts();
        // Unauthenticated operational endpoints; signed, these paths are S3
        // requests for the buckets "health" and "metrics".
        if parts.method == http::Method::GET
            && !parts.headers.contains_key(http::header::AUTHORIZATION)
            && parts.uri.query().is_none()
        {
            match parts.uri.path() {
                "/health" | "/health/ready" => return health(self).await,
                "/health/live" => return live(),
                "/metrics" => return crate::metrics::render(&self.rdma.gauges()),
                _ => {}
            }
        }
        // A virtual-hosted request is served as its path-style form; its
        // signature is verified over what was signed (Host and path as sent).
        let mut parts = parts;
        let path_style = match path_style_uri(&parts, &self.server.domains) {
            Ok(u) => u,
            Err(e) => return e.into_response(&request_id),
        };
        let as_sent = path_style
            .as_ref()
            .map(|u| std::mem::replace(&mut parts.uri, u.clone()));
        // A browser-based upload: its signature is in the form.
        if let Some(bucket) = crate::plain::post_object::is_post_object(&parts)
            .then(|| crate::plain::post_object::path_bucket(&parts).map(str::to_string))
            .flatten()
        {
            let upload = crate::plain::post_object::serve(
                self.upstream.as_ref(),
                &creds,
                &self.auth,
                &self.spool,
                &bucket,
                parts,
                body,
            );
            // Every form upload has a total deadline: trickled under the
            // body timeout, it would hold its spool file for ever.
            return match tokio::time::timeout(self.spool.deadline, upload).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => e.into_response(&request_id),
                Err(_) => {
                    tracing::info!(bucket, "a form upload ran past its deadline");
                    S3Error::new(
                        StatusCode::BAD_REQUEST,
                        "RequestTimeout",
                        "Your socket connection to the server was not read from or written to within the timeout period.",
                    )
                    .into_response(&request_id)
                }
            };
        }
        // A request without any authentication: the store decides it, as
        // the client sent it (never signed with a tenant's or the store's
        // key).
        if self.auth.anonymous_to_store && auth::is_anonymous(&parts) {
            if let Some(u) = path_style {
                parts.uri = u;
            }
            return self.anonymous(parts, body, &request_id).await;
        }
        // SigV2 signs the path-style path (see `auth::verify_addressed`).
        let path_style_path = parts.uri.path().to_string();
        if let Some(u) = as_sent {
            parts.uri = u;
        }
        let verified = match auth::verify_addressed(
            &parts,
            &path_style_path,
            &creds,
            &self.auth,
            SystemTime::now(),
        ) {
            Ok(v) => v,
            Err(e) => {
                crate::metrics::auth_failure(e.code());
                tracing::info!(method = %parts.method, path = parts.uri.path(), code = e.code(), "authentication failed");
                return S3Error::new(e.status(), e.code(), e.to_string())
                    .into_response(&request_id);
            }
        };
        if let Some(u) = path_style {
            parts.uri = u;
        }
        // A token under its second name is moved to the standard one, once
        // the signature is known to cover it.
        if let Some(alias) = self.auth.token_alias.as_deref() {
            if let Err(e) = crate::rdma::token_alias::normalize(&mut parts, &verified, alias) {
                crate::metrics::auth_failure(e.code());
                tracing::info!(method = %parts.method, path = parts.uri.path(), code = e.code(), alias, "token alias refused");
                return e.into_response(&request_id);
            }
        }
        // What the tenant may reach, before anything reaches the store.
        let Some(policy) = creds.policy(&verified.access_key).cloned() else {
            return S3Error::internal("a verified key without a policy".to_string())
                .into_response(&request_id);
        };
        // hipobj-rc-v2's control requests name their object in a signed
        // header, authorized there as the request it stands for.
        if let Some(which) = crate::rdma::v2::control(&parts) {
            drop(body);
            return self
                .rdma
                .serve_rc_v2(
                    which,
                    parts,
                    &verified,
                    &policy,
                    &self.upstream,
                    &request_id,
                )
                .await;
        }
        let access = match crate::tenancy::authorize(&policy, &parts) {
            Ok(a) => a,
            Err(e) => {
                crate::metrics::auth_failure("TenantDenied");
                tracing::info!(method = %parts.method, path = parts.uri.path(),
                    access_key = %verified.access_key, "refused: out of the tenant's buckets");
                let r = e.into_response(&request_id);
                // An RDMA request's answer carries its reply, as the RDMA
                // path's own refusals do.
                return if parts.headers.contains_key(hipobj_wire::headers::RDMA_TOKEN) {
                    crate::rdma::reply::with_reply(r, "403")
                } else {
                    r
                };
            }
        };
        if let Some(store) = &policy.store {
            parts
                .extensions
                .insert(crate::tenancy::StoreIdentity(Arc::clone(store)));
        }
        // Two tokens would leave it to chance which one is served (and
        // signed as "a,b", neither is what was signed alone).
        if parts
            .headers
            .get_all(hipobj_wire::headers::RDMA_TOKEN)
            .iter()
            .nth(1)
            .is_some()
        {
            let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
            crate::metrics::request(op, crate::metrics::PATH_RDMA);
            crate::metrics::rdma_failure("InvalidRDMAToken");
            return S3Error::invalid_token("more than one x-amz-rdma-token header".to_string())
                .into_response(&request_id);
        }
        let token = parts
            .headers
            .get(hipobj_wire::headers::RDMA_TOKEN)
            .map(|v| v.to_str().map(str::to_string));
        match token {
            Some(Ok(t)) => {
                // An RDMA request's own body is empty; it is not read.
                drop(body);
                // Put there by the server loop; absent, no GID is the caller's.
                let client = parts.extensions.get::<ClientAddr>().copied();
                self.rdma
                    .serve(
                        &verified.access_key,
                        client,
                        parts,
                        &t,
                        &self.upstream,
                        &request_id,
                    )
                    .await
            }
            Some(Err(_)) => {
                let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
                crate::metrics::request(op, crate::metrics::PATH_RDMA);
                crate::metrics::rdma_failure("InvalidRDMAToken");
                S3Error::invalid_token("x-amz-rdma-token is not ASCII".to_string())
                    .into_response(&request_id)
            }
            None => {
                let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
                crate::metrics::request(op, crate::metrics::PATH_HTTP);
                let payload = match &verified.body {
                    BodyMode::Sha256(h) => Payload::Sha256(h.clone()),
                    _ => Payload::Unsigned,
                };
                let decoded_length = verified.decoded_length;
                let checksum = trailing_checksum(&verified).filter(|_| self.checksum_trailers);
                let (body, trailers) = auth::decode_body_with_trailers(&verified, body);
                let answer = crate::plain::forward::forward_with_trailer(
                    self.upstream.as_ref(),
                    parts,
                    body,
                    decoded_length,
                    payload,
                    checksum.map(|a| (a, trailers)),
                )
                .await;
                let answer = match (answer, access) {
                    (Ok(r), crate::tenancy::authorize::Access::ListBucketsFiltered) => {
                        crate::tenancy::list_buckets::narrow(r, &policy.buckets).await
                    }
                    (other, _) => other,
                };
                match answer {
                    Ok(r) => r,
                    Err(e) => e.into_response(&request_id),
                }
            }
        }
    }
}

impl Engine {
    /// An anonymous request, to the store unsigned. An RDMA request (a
    /// token, or a hipobj-rc-v2 control request) is never served
    /// anonymously: the token decides where the gateway's RDMA goes.
    async fn anonymous(
        &self,
        mut parts: http::request::Parts,
        body: Body,
        request_id: &str,
    ) -> Response<Body> {
        let rdma = parts
            .headers
            .keys()
            .any(|k| k.as_str().starts_with("x-amz-rdma-"))
            || self
                .auth
                .token_alias
                .as_deref()
                .is_some_and(|a| parts.headers.contains_key(a))
            || crate::rdma::v2::control(&parts).is_some();
        if rdma {
            crate::metrics::auth_failure("AccessDenied");
            return crate::rdma::reply::with_reply(
                S3Error::access_denied("an RDMA request must be signed".to_string())
                    .into_response(request_id),
                "403",
            );
        }
        let op = crate::s3op::operation_name(&parts.method, &parts.uri, &parts.headers);
        crate::metrics::request(op, crate::metrics::PATH_HTTP);
        crate::metrics::anonymous_request();
        tracing::debug!(method = %parts.method, path = parts.uri.path(), "anonymous request, to the store unsigned");
        parts.extensions.insert(crate::tenancy::Anonymous);
        let length = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        match crate::plain::forward::forward_with_trailer(
            self.upstream.as_ref(),
            parts,
            body,
            length,
            Payload::Unsigned,
            None,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => e.into_response(request_id),
        }
    }
}

/// Refuses tenants that name store credentials of their own in front of
/// the embedded store, which has a single identity.
fn check_tenants(tenants: &[crate::config::Tenant], embedded: bool) -> Result<(), StartError> {
    if embedded {
        if let Some(t) = tenants.iter().find(|t| t.policy.store.is_some()) {
            return Err(StartError::Config(format!(
                "the tenant {} names store credentials (upstream=), which only a remote store (--upstream) has",
                t.keys.access_key
            )));
        }
    }
    Ok(())
}

/// The checksum an aws-chunked body carries in its trailer, when it carries
/// exactly one trailing header and that is a checksum (`x-amz-trailer:
/// x-amz-checksum-*`): passed on to the store in a trailer of its own.
fn trailing_checksum(verified: &auth::Verified) -> Option<crate::checksum::Algorithm> {
    let chunked = matches!(
        verified.body,
        BodyMode::ChunkedSigned { trailer: true } | BodyMode::ChunkedUnsigned
    );
    match verified.declared_trailers() {
        [one] if chunked && verified.decoded_length.is_some() => {
            crate::checksum::Algorithm::from_header(one)
        }
        _ => None,
    }
}

/// The path-style URI of a virtual-hosted request (`Host:
/// bucket.<domain>`, path `/key`): `/bucket/key`, the query kept; `None`
/// for a path-style request.
fn path_style_uri(
    parts: &http::request::Parts,
    domains: &[String],
) -> Result<Option<http::Uri>, S3Error> {
    if domains.is_empty() {
        return Ok(None);
    }
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()));
    let pq = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let Some(rewritten) = crate::s3op::path_style(host, pq, domains) else {
        return Ok(None);
    };
    http::Uri::try_from(rewritten).map(Some).map_err(|_| {
        S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidURI",
            "the virtual-hosted request has no path-style form".to_string(),
        )
    })
}

/// Liveness: the process serves requests.
fn live() -> Response<Body> {
    let mut r = Response::new(Body::from("{\"status\":\"ok\"}\n"));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// Readiness (`/health/ready`, and `/health` as before): 200 when the store
/// answers and the RDMA device's port is active, 503 otherwise.
async fn health(engine: &Engine) -> Response<Body> {
    let store = engine.upstream.ready().await;
    let rdma = engine.rdma.ready();
    let ok = store && rdma;
    let mut r = Response::new(Body::from(format!(
        "{{\"status\":\"{}\",\"store\":{store},\"rdma\":{rdma}}}\n",
        if ok { "ok" } else { "unavailable" }
    )));
    *r.status_mut() = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

impl crate::server::Handler for Engine {
    fn handle(&self, req: Request<Body>) -> impl Future<Output = Response<Body>> + Send {
        Engine::handle(self, req)
    }
}

/// Serves on `listener` until `shutdown` completes, then finishes the
/// requests (and transfers) in flight: the front of [`crate::server`],
/// with the engine's [`ServerConfig`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cfg = engine.server.clone();
    crate::server::serve(listener, engine, &cfg, shutdown).await
}

/// The embedded store in `root`, every write flushed to disk; or in a new
/// temporary directory, not flushed (it does not outlive the process).
pub fn embedded(
    root: Option<std::path::PathBuf>,
) -> std::io::Result<(UpstreamConfig, Option<tempfile::TempDir>)> {
    match root {
        Some(r) => {
            std::fs::create_dir_all(&r)?;
            Ok((
                UpstreamConfig::Embedded {
                    root: r,
                    fsync: true,
                },
                None,
            ))
        }
        None => {
            let dir = tempfile::Builder::new().prefix("hipobj-store-").tempdir()?;
            Ok((
                UpstreamConfig::Embedded {
                    root: dir.path().to_path_buf(),
                    fsync: false,
                },
                Some(dir),
            ))
        }
    }
}
