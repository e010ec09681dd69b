//! SigV4 with aws-sigv4 in S3's mode: single percent-encoding, no path
//! normalization, `x-amz-content-sha256`. Every header set before signing
//! is signed (the RDMA token included), but the hop-by-hop ones.

use std::time::SystemTime;

use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, HOST};
use http::{Method, Uri};

use crate::{Error, Result};

/// The SHA-256 of the empty payload.
pub(crate) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Headers never signed: hop-by-hop ones and those the signer sets.
const UNSIGNED_HEADERS: &[&str] = &[
    "authorization",
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
    "x-amz-date",
    "x-amz-content-sha256",
];

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
        let fail = |m: String| Error::InvalidArgument(format!("signing the request: {m}"));
        if !headers.contains_key(HOST) {
            let host = uri
                .host()
                .ok_or_else(|| fail("the URI has no host".into()))?;
            let value = match uri.port_u16() {
                Some(p) if p != 80 => format!("{host}:{p}"),
                _ => host.to_string(),
            };
            headers.insert(
                HOST,
                HeaderValue::from_str(&value).map_err(|e| fail(e.to_string()))?,
            );
        }
        for name in [AUTHORIZATION.as_str(), "x-amz-date", "x-amz-content-sha256"] {
            headers.remove(name);
        }
        let creds = aws_credential_types::Credentials::new(
            &self.access_key,
            &self.secret_key,
            None,
            None,
            "hipobj-s3",
        );
        let identity: aws_smithy_runtime_api::client::identity::Identity = creds.into();
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(now)
            .settings(settings)
            .build()
            .map_err(|e| fail(e.to_string()))?
            .into();
        let mut list: Vec<(&str, &str)> = Vec::with_capacity(headers.len());
        for (name, value) in headers.iter() {
            if UNSIGNED_HEADERS.contains(&name.as_str()) {
                continue;
            }
            let value = value
                .to_str()
                .map_err(|_| fail(format!("the value of header {name} is not ASCII")))?;
            list.push((name.as_str(), value));
        }
        let uri_text = uri.to_string();
        let signable = SignableRequest::new(
            method.as_str(),
            uri_text.as_str(),
            list.into_iter(),
            SignableBody::Precomputed(payload_hash.to_string()),
        )
        .map_err(|e| fail(e.to_string()))?;
        let (instructions, _sig) = sign(signable, &params)
            .map_err(|e| fail(e.to_string()))?
            .into_parts();
        let (new_headers, _) = instructions.into_parts();
        let mut out = Vec::new();
        for h in new_headers {
            let name = HeaderName::from_bytes(h.name().as_bytes())
                .map_err(|_| fail("aws-sigv4 returned an invalid header name".into()))?;
            let mut value = HeaderValue::from_str(h.value()).map_err(|e| fail(e.to_string()))?;
            value.set_sensitive(h.sensitive() || name == AUTHORIZATION);
            out.push((name, value));
        }
        for (name, value) in out {
            headers.insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_signed() {
        let s = Signer {
            access_key: "AK".into(),
            secret_key: "SK".into(),
            region: "us-east-1".into(),
        };
        let uri: Uri = "http://127.0.0.1:9000/b/k%20x?partNumber=1&uploadId=u"
            .parse()
            .unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-amz-rdma-token", HeaderValue::from_static("abc"));
        h.insert("content-length", HeaderValue::from_static("0"));
        s.sign(
            &Method::PUT,
            &uri,
            &mut h,
            "UNSIGNED-PAYLOAD",
            SystemTime::now(),
        )
        .unwrap();
        let auth = h.get(AUTHORIZATION).unwrap().to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AK/"),
            "{auth}"
        );
        assert!(auth.contains("x-amz-rdma-token"), "{auth}");
        assert_eq!(h.get("host").unwrap(), "127.0.0.1:9000");
        assert_eq!(h.get("x-amz-content-sha256").unwrap(), "UNSIGNED-PAYLOAD");
        assert!(format!("{s:?}").find("SK").is_none());
    }
}
