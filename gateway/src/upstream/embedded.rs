//! The embedded store: hipobj-store over a directory, served in-process.
//!
//! Requests go through s3s's whole S3 service, SigV4 verification included:
//! each is signed with a key pair generated at start, exactly as a remote
//! store's would be, so the embedded and remote paths differ only in the
//! transport. The store ([`hipobj_store::Store`]) maps every key to files
//! named by the key's hash inside its bucket's directory, writes objects
//! aside and renames them into place, and lists from an index in memory
//! (see `docs/store.md`).

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use hipobj_store::{Store, StoreConfig};
use http::header::{HeaderValue, HOST};
use http::{Request, Response, Uri, Version};
use s3s::auth::SimpleAuth;
use s3s::service::{S3Service, S3ServiceBuilder};

use super::{Payload, Upstream, UpstreamError};
use crate::body::{Body, BoxError};
use crate::config::KeyPair;

/// The `Host` the embedded store's requests carry (and are signed with).
/// A bare name, so s3s treats every request as path-style.
const EMBEDDED_HOST: &str = "hipobj-embedded";

/// hipobj-store over a directory, behind the [`Upstream`] interface. Cheap
/// to clone: clones share the service.
#[derive(Clone)]
pub struct EmbeddedUpstream {
    service: S3Service,
    root: PathBuf,
    credentials: KeyPair,
    region: String,
}

impl std::fmt::Debug for EmbeddedUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedUpstream")
            .field("root", &self.root)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl EmbeddedUpstream {
    /// Opens (creating it if missing) the store at `root`, every write
    /// flushed to disk. Requests are signed for `region` with an internal
    /// key pair drawn from the OS's random source.
    pub fn new(root: &Path, region: &str) -> Result<EmbeddedUpstream, UpstreamError> {
        EmbeddedUpstream::with_config(root, region, StoreConfig::default())
    }

    /// As [`new`](Self::new), the store writing as `config` says (fsync
    /// or not).
    pub fn with_config(
        root: &Path,
        region: &str,
        config: StoreConfig,
    ) -> Result<EmbeddedUpstream, UpstreamError> {
        let init = |reason: String| UpstreamError::EmbeddedInit {
            root: root.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(root).map_err(|e| init(e.to_string()))?;
        let store = Store::open(root, config).map_err(|e| init(e.to_string()))?;

        let credentials = random_key_pair()?;
        let mut builder = S3ServiceBuilder::new(store);
        builder.set_auth(SimpleAuth::from_single(
            credentials.access_key.as_str(),
            credentials.secret_key.as_str(),
        ));
        Ok(EmbeddedUpstream {
            service: builder.build(),
            root: root.to_owned(),
            credentials,
            region: region.to_owned(),
        })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// A fresh access key (20 characters) and secret (40), uppercase and
/// lowercase hex from the OS's random source.
fn random_key_pair() -> Result<KeyPair, UpstreamError> {
    let mut bytes = [0u8; 30];
    getrandom::fill(&mut bytes).map_err(|e| UpstreamError::Random(e.to_string()))?;
    Ok(KeyPair {
        access_key: hex::encode_upper(&bytes[..10]),
        secret_key: hex::encode(&bytes[10..]),
    })
}

impl Upstream for EmbeddedUpstream {
    fn send(
        &self,
        req: Request<Body>,
        payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
        let this = self.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            // The store URL-encodes listed keys when asked
            // (`encoding-type=url`), so the parameter goes through.
            let path_and_query = super::upstream_path_and_query(&parts.uri)?;
            parts.uri = Uri::try_from(path_and_query)
                .map_err(|e| UpstreamError::InvalidTarget(e.to_string()))?;
            parts.version = Version::HTTP_11;
            parts
                .headers
                .insert(HOST, HeaderValue::from_static(EMBEDDED_HOST));
            let mut req = Request::from_parts(parts, body);
            super::sign(&mut req, &this.credentials, &this.region, &payload)?;

            let method = req.method().clone();
            tracing::debug!(%method, path = req.uri().path(), "to embedded store");
            let req = req.map(s3s::Body::http_body_unsync);
            let resp = this
                .service
                .call(req)
                .await
                .map_err(|e| UpstreamError::Embedded(BoxError::from(e)))?;
            tracing::debug!(%method, status = %resp.status(), "from embedded store");
            Ok(resp.map(Body::new))
        })
    }

    fn describe(&self) -> String {
        format!(
            "embedded hipobj-store at {} (region {})",
            self.root.display(),
            self.region
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_shaped() {
        let a = random_key_pair().unwrap();
        let b = random_key_pair().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.access_key.len(), 20);
        assert_eq!(a.secret_key.len(), 40);
    }

    #[test]
    fn encoding_type_is_dropped() {
        use super::super::without_encoding_type;
        assert_eq!(
            without_encoding_type("/b?list-type=2&encoding-type=url&prefix=a"),
            "/b?list-type=2&prefix=a"
        );
        assert_eq!(without_encoding_type("/b?encoding-type=url"), "/b");
        assert_eq!(without_encoding_type("/b?uploads"), "/b?uploads");
        assert_eq!(without_encoding_type("/b/k"), "/b/k");
        assert_eq!(
            without_encoding_type("/b?prefix=encoding-type"),
            "/b?prefix=encoding-type"
        );
    }

    #[test]
    fn debug_has_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let up = EmbeddedUpstream::new(dir.path(), "us-east-1").unwrap();
        let s = format!("{up:?} {}", up.describe());
        assert!(!s.contains(&up.credentials.secret_key), "{s}");
        assert!(!s.contains(&up.credentials.access_key), "{s}");
    }
}
