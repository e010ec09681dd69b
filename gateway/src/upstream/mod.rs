//! The S3 store behind the front.
//!
//! Two kinds share one interface, [`Upstream`]: a remote S3 endpoint reached
//! over HTTP ([`remote::RemoteUpstream`]) and the embedded store (hipobj-store)
//! served in-process ([`embedded::EmbeddedUpstream`]). Either way the request
//! is re-addressed to the store, signed with the store's own credentials
//! (SigV4, through [`sign_request`]) and streamed both ways.
//! Several remote endpoints of one store are served with failover by
//! [`multi::MultiUpstream`]; [`retry`] says which requests are retried,
//! [`crate::tls`] what an `https://` store's certificate is checked against.

pub mod embedded;
pub mod multi;
pub use hipobj_net::quickack;
pub mod remote;
pub mod retry;
pub mod send_watch;
mod sign;

mod error;
mod interface;
mod payload;
mod target;

use std::sync::Arc;

use crate::body::Body;
use crate::config::{UpstreamConfig, UpstreamOptions};

pub use self::embedded::EmbeddedUpstream;
pub use self::error::UpstreamError;
pub use self::interface::{Upstream, READY_TIMEOUT};
pub use self::multi::{MultiOptions, MultiUpstream};
pub use self::payload::Payload;
pub use self::remote::{RemoteOptions, RemoteUpstream};
pub use self::retry::RetryPolicy;
pub(crate) use self::sign::sign;
pub use self::sign::sign_request;
pub(crate) use self::target::{upstream_path_and_query, without_encoding_type};
pub use crate::tls::{CaCerts, CaFileError};

/// Opens the configured store with the default [`UpstreamOptions`].
/// Spawns nothing and needs no runtime; the embedded store's root is
/// created if missing.
pub fn build(cfg: &UpstreamConfig, region: &str) -> Result<Arc<dyn Upstream>, UpstreamError> {
    build_with(cfg, region, &UpstreamOptions::default())
}

/// Opens the configured store; a remote one (or cluster) connects, times
/// out, retries, probes and trusts as `options` say (the embedded store
/// ignores them). Spawns nothing and needs no runtime.
pub fn build_with(
    cfg: &UpstreamConfig,
    region: &str,
    options: &UpstreamOptions,
) -> Result<Arc<dyn Upstream>, UpstreamError> {
    match cfg {
        UpstreamConfig::Remote {
            endpoint,
            credentials,
        } => Ok(Arc::new(RemoteUpstream::with_options(
            endpoint,
            credentials.clone(),
            region,
            remote_options(options),
        )?)),
        UpstreamConfig::Cluster {
            endpoints,
            credentials,
        } => Ok(Arc::new(MultiUpstream::new(
            endpoints,
            credentials.clone(),
            region,
            multi_options(options),
        )?)),
        UpstreamConfig::Embedded { root, fsync } => Ok(Arc::new(EmbeddedUpstream::with_config(
            root,
            region,
            hipobj_store::StoreConfig { fsync: *fsync },
        )?)),
    }
}

/// What a [`RemoteUpstream`] is built with for `options`.
pub fn remote_options(options: &UpstreamOptions) -> RemoteOptions {
    RemoteOptions {
        response_timeout: options.response_timeout,
        long_op_timeout: options.long_op_timeout,
        send_stall_timeout: options.send_stall_timeout,
        retry: RetryPolicy {
            max_retries: options.retries,
            backoff: options.backoff.clone(),
        },
        connect_timeout: options.connect_timeout,
        pool_idle_timeout: options.pool_idle_timeout,
        ca: options.ca.clone(),
        drop_encoding_type: options.drop_encoding_type,
    }
}

/// What a [`MultiUpstream`] is built with for `options`.
pub fn multi_options(options: &UpstreamOptions) -> MultiOptions {
    MultiOptions {
        remote: remote_options(options),
        health_interval: options.health_interval,
    }
}

/// Times a request to the store for the metrics, counting it as an error
/// when it gets no answer or a 5xx one.
pub async fn timed<F>(op: &'static str, send: F) -> F::Output
where
    F: std::future::Future<Output = Result<http::Response<Body>, UpstreamError>>,
{
    let start = std::time::Instant::now();
    let out = send.await;
    let error = match &out {
        Ok(r) if r.status().is_server_error() => Some("status_5xx"),
        Ok(_) => None,
        Err(e) => Some(e.metric_reason()),
    };
    crate::metrics::upstream_request(op, start.elapsed(), error);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hipobj_net::sigv4::EMPTY_SHA256;

    use super::*;
    use crate::config::KeyPair;

    fn pq(s: &str) -> String {
        upstream_path_and_query(&s.parse().unwrap()).unwrap()
    }

    #[test]
    fn path_is_canonically_encoded() {
        assert_eq!(pq("/bucket/key%20x"), "/bucket/key%20x");
        assert_eq!(pq("/bucket/a%7Eb%2Dc"), "/bucket/a~b-c");
        assert_eq!(pq("/bucket/a+b"), "/bucket/a%2Bb");
        assert_eq!(pq("/bucket/%C3%A9t%C3%A9"), "/bucket/%C3%A9t%C3%A9");
        assert_eq!(pq("/bucket/a!b*c"), "/bucket/a%21b%2Ac");
        assert_eq!(pq("/"), "/");
    }

    #[test]
    fn query_kept_less_empty_delimiter() {
        assert_eq!(
            pq("/b?partNumber=1&uploadId=x%2By"),
            "/b?partNumber=1&uploadId=x%2By"
        );
        assert_eq!(
            pq("/b?list-type=2&delimiter=&prefix=a"),
            "/b?list-type=2&prefix=a"
        );
        assert_eq!(pq("/b?delimiter=&list-type=2"), "/b?list-type=2");
        assert_eq!(pq("/b?delimiter"), "/b");
        assert_eq!(pq("/b?delimiter=%2F"), "/b?delimiter=%2F");
        assert_eq!(pq("/b?uploads"), "/b?uploads");
    }

    #[test]
    fn invalid_utf8_path_is_refused() {
        let uri: http::Uri = "/b/%FF".parse().unwrap();
        assert!(matches!(
            upstream_path_and_query(&uri),
            Err(UpstreamError::InvalidTarget(_))
        ));
    }

    #[test]
    fn defaults_are_the_constructors_defaults() {
        let d = UpstreamOptions::default();
        assert_eq!(remote_options(&d), RemoteOptions::default());
        assert_eq!(multi_options(&d), MultiOptions::default());
    }

    #[test]
    fn options_reach_remote_and_multi() {
        let o = UpstreamOptions {
            connect_timeout: Duration::from_millis(1500),
            response_timeout: Duration::from_secs(7),
            long_op_timeout: Duration::from_secs(13),
            send_stall_timeout: Duration::from_secs(17),
            pool_idle_timeout: Duration::from_secs(11),
            retries: 5,
            backoff: vec![Duration::from_millis(10), Duration::from_millis(20)],
            health_interval: Duration::from_secs(3),
            ca: CaCerts::none(),
            drop_encoding_type: true,
            checksum_trailers: false,
        };
        let r = remote_options(&o);
        assert_eq!(r.connect_timeout, Duration::from_millis(1500));
        assert_eq!(r.response_timeout, Duration::from_secs(7));
        assert_eq!(r.long_op_timeout, Duration::from_secs(13));
        assert_eq!(r.send_stall_timeout, Duration::from_secs(17));
        assert_eq!(r.pool_idle_timeout, Duration::from_secs(11));
        assert!(r.drop_encoding_type);
        assert_eq!(r.retry.max_retries, 5);
        assert_eq!(r.retry.delay(0), Duration::from_millis(10));
        assert_eq!(r.retry.delay(4), Duration::from_millis(20));
        let m = multi_options(&o);
        assert_eq!(m.remote, r);
        assert_eq!(m.health_interval, Duration::from_secs(3));
        // Built either way, the options are the upstream's own.
        let key = KeyPair {
            access_key: "a".into(),
            secret_key: "b".into(),
        };
        let remote = UpstreamConfig::Remote {
            endpoint: "http://127.0.0.1:9".into(),
            credentials: key.clone(),
        };
        let s = format!("{:?}", build_with(&remote, "r", &o).unwrap());
        assert!(s.contains("connect_timeout: 1.5s"), "{s}");
        assert!(s.contains("max_retries: 5"), "{s}");
        let cluster = UpstreamConfig::Cluster {
            endpoints: vec!["http://127.0.0.1:9".into(), "http://127.0.0.1:10".into()],
            credentials: key,
        };
        let s = format!("{:?}", build_with(&cluster, "r", &o).unwrap());
        assert!(s.contains("health_interval: 3s"), "{s}");
        assert!(s.contains("response_timeout: 7s"), "{s}");
        assert!(s.contains("long_op_timeout: 13s"), "{s}");
    }

    #[test]
    fn payload_hash() {
        assert_eq!(Payload::Unsigned.hash(), "UNSIGNED-PAYLOAD");
        assert_eq!(Payload::Sha256(EMPTY_SHA256.into()).hash(), EMPTY_SHA256);
    }
}
