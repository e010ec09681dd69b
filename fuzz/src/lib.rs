//! What the gateway's fuzz targets share: the credentials and settings
//! they verify against, a fixed clock, requests built from fuzz bytes, and
//! a `Verified` of each body mode (made by signing a real request and
//! verifying it).

use std::time::{Duration, SystemTime};

use hipobj_gateway::auth::{self, AuthSettings, Credentials, Verified};
use hipobj_gateway::body::Body;
use hipobj_gateway::config::KeyPair;
use hipobj_gateway::upstream;

/// The access key the targets verify against.
pub const AK: &str = "AKIAFUZZ";
/// Its secret.
pub const SK: &str = "fuzz/secret+key";

/// The fixed clock: 2026-01-01T00:00:00Z.
pub fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600)
}

/// One key pair.
pub fn creds() -> Credentials {
    Credentials::new(&[KeyPair {
        access_key: AK.into(),
        secret_key: SK.into(),
    }])
}

/// us-east-1, 15 minutes.
pub fn settings() -> AuthSettings {
    AuthSettings::default()
}

/// Splits `data` at `\n` into at most `n` fields (the last takes the
/// rest), each as lossy text.
pub fn fields(data: &[u8], n: usize) -> Vec<String> {
    data.splitn(n, |&b| b == b'\n')
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// Request parts of `method`, `uri` and `headers`; `None` where the http
/// crate refuses them (it never reaches the gateway then).
pub fn parts(method: &str, uri: &str, headers: &[(&str, &[u8])]) -> Option<http::request::Parts> {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        let name = http::HeaderName::from_bytes(k.as_bytes()).ok()?;
        let value = http::HeaderValue::from_bytes(v).ok()?;
        b = b.header(name, value);
    }
    Some(b.body(()).ok()?.into_parts().0)
}

/// A method picked by `b`.
pub fn method(b: u8) -> &'static str {
    ["GET", "PUT", "POST", "HEAD", "DELETE"][usize::from(b) % 5]
}

/// The body modes a `Verified` can have, for the chunked target.
#[derive(Clone, Copy, Debug)]
pub enum Chunked {
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`.
    Signed,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER` with a CRC32 trailer.
    SignedTrailer,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER` with a CRC32 trailer.
    UnsignedTrailer,
}

/// A verified aws-chunked PUT of `decoded` bytes in `mode`.
pub fn verified(mode: Chunked, decoded: u64) -> Verified {
    let hash = match mode {
        Chunked::Signed => "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        Chunked::SignedTrailer => "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        Chunked::UnsignedTrailer => "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    };
    let mut b = http::Request::builder()
        .method("PUT")
        .uri("http://127.0.0.1:9000/bucket/key")
        .header("host", "127.0.0.1:9000")
        .header("content-encoding", "aws-chunked")
        .header("x-amz-decoded-content-length", decoded);
    if !matches!(mode, Chunked::Signed) {
        b = b.header("x-amz-trailer", "x-amz-checksum-crc32");
    }
    let mut req = b.body(Body::empty()).expect("a request");
    upstream::sign_request(&mut req, AK, SK, "us-east-1", hash, now()).expect("signed");
    let (parts, _) = req.into_parts();
    auth::verify(&parts, &creds(), &settings(), now()).expect("verified")
}

/// Drains `body`: the bytes it gave and whether it ended in an error.
pub fn drain(body: Body) -> (usize, bool) {
    use http_body_util::BodyExt as _;
    futures::executor::block_on(async move {
        let mut body = body;
        let mut n = 0usize;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => n += f.data_ref().map_or(0, |d| d.len()),
                Err(_) => return (n, true),
            }
        }
        (n, false)
    })
}
