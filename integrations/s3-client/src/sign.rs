//! SigV4 with aws-sigv4 in S3's mode (the signer itself is
//! `hipobj_net::sigv4`, shared with the gateway). Every header set before
//! signing is signed (the RDMA token included), but the hop-by-hop ones.

use std::time::SystemTime;

use http::header::HeaderMap;
use http::{Method, Uri};

use crate::{Error, Result};

/// The SHA-256 of the empty payload.
pub(crate) use hipobj_net::sigv4::EMPTY_SHA256;

/// Credentials and region.
#[derive(Clone)]
pub(crate) struct Signer {
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("access_key", &self.access_key)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Signs in place: adds `Host` (from the URI when missing),
    /// `Authorization`, `X-Amz-Date` and `x-amz-content-sha256`.
    /// `payload_hash` is `UNSIGNED-PAYLOAD` or a hex SHA-256.
    pub(crate) fn sign(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &mut HeaderMap,
        payload_hash: &str,
        now: SystemTime,
    ) -> Result<()> {
        hipobj_net::sigv4::sign_headers(
            method,
            uri,
            headers,
            &self.access_key,
            &self.secret_key,
            &self.region,
            payload_hash,
            now,
        )
        .map_err(|e| Error::InvalidArgument(format!("signing the request: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use http::header::AUTHORIZATION;

    use super::*;

    fn signer(access_key: &str) -> Signer {
        Signer {
            access_key: access_key.into(),
            secret_key: "SK".into(),
            region: "us-east-1".into(),
        }
    }

    #[test]
    fn signs_through_the_shared_signer_and_hides_the_secret() {
        let uri: Uri = "http://127.0.0.1:9000/b/k".parse().unwrap();
        let mut h = HeaderMap::new();
        let s = signer("AK");
        s.sign(&Method::GET, &uri, &mut h, EMPTY_SHA256, SystemTime::now())
            .unwrap();
        assert!(h.contains_key(AUTHORIZATION));
        assert_eq!(h.get("host").unwrap(), "127.0.0.1:9000");
        assert!(!format!("{s:?}").contains("SK"));
        let e = signer("")
            .sign(&Method::GET, &uri, &mut h, EMPTY_SHA256, SystemTime::now())
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(ref m) if m.starts_with("signing the request: "))
        );
    }
}
