//! Several endpoints of one remote store, with health checks and failover.
//!
//! Policy: *ordered failover*, not round-robin. Each request goes to the
//! first endpoint, in the configured order, that is marked healthy (when
//! none is, to the first one in order all the same). An endpoint whose
//! connect fails (refused, unreachable, timed out) is marked down at once;
//! a replayable request (see [`super::retry`]) then moves straight on to
//! the next endpoint without waiting, and other failures (a connection reset
//! or closed before the response head, a 502/503/504) are retried on the
//! same endpoint after the policy's backoff, within its retry count. A
//! streamed request is sent once, to one endpoint.
//!
//! A background task probes every endpoint each
//! [`MultiOptions::health_interval`] with a signed `GET /`: an endpoint that
//! answers (any status below 500) within [`super::READY_TIMEOUT`] is marked
//! healthy again, one that does not is marked down. The task is spawned on
//! the first [`Upstream::send`] or [`Upstream::ready`] (so [`super::build`]
//! needs no runtime) and ends once the `MultiUpstream` is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};

use super::remote::{RemoteOptions, RemoteUpstream};
use super::retry::{self, RetryPolicy};
use super::{Payload, Upstream, UpstreamError, READY_TIMEOUT};
use crate::body::Body;
use crate::config::KeyPair;
use hipobj_net::sigv4::EMPTY_SHA256;

pub use crate::config::defaults::DEFAULT_HEALTH_INTERVAL;

/// How a [`MultiUpstream`] times out, retries and probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiOptions {
    /// The timeouts, pool and TLS trust of every endpoint, and the retry
    /// policy applied across them.
    pub remote: RemoteOptions,
    /// How often every endpoint is probed.
    pub health_interval: Duration,
}

impl Default for MultiOptions {
    fn default() -> Self {
        MultiOptions {
            remote: RemoteOptions::default(),
            health_interval: DEFAULT_HEALTH_INTERVAL,
        }
    }
}

/// Several endpoints of one store (same objects, same credentials), used in
/// order with failover. Cheap to clone: clones share endpoints and health.
#[derive(Clone)]
pub struct MultiUpstream {
    shared: Arc<Shared>,
}

struct Shared {
    endpoints: Vec<Endpoint>,
    retry: RetryPolicy,
    health_interval: Duration,
    health_started: AtomicBool,
    region: String,
}

struct Endpoint {
    remote: RemoteUpstream,
    healthy: AtomicBool,
}

impl std::fmt::Debug for MultiUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiUpstream")
            .field("endpoints", &self.endpoints())
            .field("healthy", &self.healthy())
            .field("region", &self.shared.region)
            .field("retry", &self.shared.retry)
            .field("health_interval", &self.shared.health_interval)
            .field("first", &self.shared.endpoints[0].remote)
            .finish_non_exhaustive()
    }
}

impl MultiUpstream {
    /// A client for the store at `endpoints` (each as for
    /// [`RemoteUpstream::new`], at least one), all marked healthy at first.
    /// Nothing is spawned here.
    pub fn new<S: AsRef<str>>(
        endpoints: &[S],
        credentials: KeyPair,
        region: &str,
        options: MultiOptions,
    ) -> Result<MultiUpstream, UpstreamError> {
        if endpoints.is_empty() {
            return Err(UpstreamError::InvalidEndpoint {
                endpoint: String::new(),
                reason: "no endpoint given",
            });
        }
        let per_endpoint = RemoteOptions {
            retry: RetryPolicy::none(),
            ..options.remote.clone()
        };
        let endpoints = endpoints
            .iter()
            .map(|e| {
                Ok(Endpoint {
                    remote: RemoteUpstream::with_options(
                        e.as_ref().trim(),
                        credentials.clone(),
                        region,
                        per_endpoint.clone(),
                    )?,
                    healthy: AtomicBool::new(true),
                })
            })
            .collect::<Result<Vec<_>, UpstreamError>>()?;
        Ok(MultiUpstream {
            shared: Arc::new(Shared {
                endpoints,
                retry: options.remote.retry,
                health_interval: options.health_interval,
                health_started: AtomicBool::new(false),
                region: region.to_owned(),
            }),
        })
    }

    /// The endpoints, in order.
    pub fn endpoints(&self) -> Vec<&str> {
        self.shared
            .endpoints
            .iter()
            .map(|e| e.remote.endpoint())
            .collect()
    }

    /// Whether each endpoint is marked healthy, in order.
    pub fn healthy(&self) -> Vec<bool> {
        self.shared
            .endpoints
            .iter()
            .map(|e| e.healthy.load(Ordering::Relaxed))
            .collect()
    }

    /// The endpoint the next request goes to first.
    pub fn current(&self) -> &str {
        self.shared.endpoints[self.shared.order()[0]]
            .remote
            .endpoint()
    }

    /// Spawns the health check on the current runtime, once; outside a
    /// runtime, does nothing (the next call tries again).
    fn start_health_check(&self) {
        if self.shared.health_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.shared.health_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.shared);
        let interval = self.shared.health_interval;
        handle.spawn(health_loop(weak, interval));
    }
}

async fn health_loop(weak: Weak<Shared>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let probes = shared.endpoints.iter().map(|e| e.remote.clone()).map(probe);
        let results = futures::future::join_all(probes).await;
        for (i, ok) in results.into_iter().enumerate() {
            if ok {
                shared.mark_up(i);
            } else {
                shared.mark_down(i, "health check failed");
            }
        }
    }
}

/// A signed `GET /`, answered below 500 in time.
async fn probe(remote: RemoteUpstream) -> bool {
    let mut req = Request::new(Body::empty());
    *req.uri_mut() = http::Uri::from_static("/");
    let fut = remote.send_once(req, Payload::Sha256(EMPTY_SHA256.to_owned()));
    matches!(
        tokio::time::timeout(READY_TIMEOUT, fut).await,
        Ok(Ok(resp)) if !resp.status().is_server_error()
    )
}

impl Shared {
    /// Endpoint indices to try: the healthy ones in order, then the others.
    fn order(&self) -> Vec<usize> {
        let (mut up, down): (Vec<usize>, Vec<usize>) = (0..self.endpoints.len())
            .partition(|&i| self.endpoints[i].healthy.load(Ordering::Relaxed));
        up.extend(down);
        up
    }

    fn mark_down(&self, i: usize, why: &str) {
        let e = &self.endpoints[i];
        if e.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(upstream = %e.remote.endpoint(), reason = why, "endpoint marked down");
        }
    }

    fn mark_up(&self, i: usize) {
        let e = &self.endpoints[i];
        if !e.healthy.swap(true, Ordering::Relaxed) {
            tracing::info!(upstream = %e.remote.endpoint(), "endpoint healthy again");
        }
    }

    async fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> Result<Response<Body>, UpstreamError> {
        let mut order = self.order();
        if !retry::is_replayable(req.method(), req.body()) {
            let i = order[0];
            let out = self.endpoints[i].remote.send_once(req, payload).await;
            if let Err(err) = &out {
                if retry::is_connect_error(err) {
                    self.mark_down(i, "connect failed");
                }
            }
            return out;
        }
        let (parts, _) = req.into_parts();
        let mut pos = 0;
        let mut retries = 0;
        loop {
            let i = order[pos];
            let attempt = Request::from_parts(parts.clone(), Body::empty());
            let out = self.endpoints[i]
                .remote
                .send_once(attempt, payload.clone())
                .await;
            match &out {
                Ok(resp) if !retry::is_retryable_status(resp.status()) => return out,
                Err(err) if !retry::is_retryable_error(err) => return out,
                Err(err) if retry::is_connect_error(err) => {
                    self.mark_down(i, "connect failed");
                    if pos + 1 < order.len() {
                        tracing::debug!(upstream = %self.endpoints[i].remote.endpoint(),
                            error = %err, "failing over");
                        pos += 1;
                        continue;
                    }
                    // Every endpoint failed to connect: start over after
                    // the backoff.
                    if retries < self.retry.max_retries {
                        order = self.order();
                        pos = 0;
                    }
                }
                _ => {}
            }
            if retries >= self.retry.max_retries {
                return out;
            }
            let delay = self.retry.delay(retries);
            tracing::debug!(upstream = %self.endpoints[i].remote.endpoint(),
                status = ?out.as_ref().ok().map(Response::status),
                error = ?out.as_ref().err().map(ToString::to_string), ?delay, "retrying");
            drop(out);
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }
}

impl Upstream for MultiUpstream {
    fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
        self.start_health_check();
        let shared = Arc::clone(&self.shared);
        Box::pin(async move { shared.send(req, payload).await })
    }

    /// Ready when any endpoint answers a signed `GET /` with 200.
    fn ready(&self) -> BoxFuture<'static, bool> {
        self.start_health_check();
        let readies: Vec<_> = self
            .shared
            .endpoints
            .iter()
            .map(|e| e.remote.ready())
            .collect();
        Box::pin(async move {
            futures::future::join_all(readies)
                .await
                .into_iter()
                .any(|ok| ok)
        })
    }

    fn describe(&self) -> String {
        format!(
            "remote S3 cluster [{}] (region {}, first healthy in order)",
            self.endpoints().join(", "),
            self.shared.region
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> KeyPair {
        KeyPair {
            access_key: "AK".into(),
            secret_key: "s3cr3t-value".into(),
        }
    }

    #[test]
    fn new_needs_endpoints_and_no_runtime() {
        let none: [&str; 0] = [];
        assert!(matches!(
            MultiUpstream::new(&none, key(), "r", MultiOptions::default()),
            Err(UpstreamError::InvalidEndpoint { .. })
        ));
        assert!(matches!(
            MultiUpstream::new(
                &["http://a:1", "ftp://b:2"],
                key(),
                "r",
                MultiOptions::default()
            ),
            Err(UpstreamError::InvalidEndpoint { .. })
        ));
        let up = MultiUpstream::new(
            &["http://a:1", " http://b:2/"],
            key(),
            "r",
            MultiOptions::default(),
        )
        .unwrap();
        assert_eq!(up.endpoints(), ["http://a:1", "http://b:2"]);
        assert_eq!(up.healthy(), [true, true]);
        assert_eq!(up.current(), "http://a:1");
        let s = format!("{up:?} {}", up.describe());
        assert!(!s.contains("s3cr3t"), "{s}");
        assert!(s.contains("http://b:2"), "{s}");
    }

    #[test]
    fn order_prefers_healthy() {
        let up = MultiUpstream::new(
            &["http://a:1", "http://b:2", "http://c:3"],
            key(),
            "r",
            MultiOptions::default(),
        )
        .unwrap();
        up.shared.mark_down(0, "test");
        assert_eq!(up.shared.order(), [1, 2, 0]);
        assert_eq!(up.current(), "http://b:2");
        up.shared.mark_down(1, "test");
        up.shared.mark_down(2, "test");
        assert_eq!(up.shared.order(), [0, 1, 2]);
        up.shared.mark_up(2);
        assert_eq!(up.shared.order(), [2, 0, 1]);
    }
}
