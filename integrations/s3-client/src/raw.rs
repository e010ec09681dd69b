//! Raw requests: one signed (or deliberately mis-signed) request with the
//! headers the caller chose, sent once, and its whole answer. For tools that
//! examine a server's answers themselves (`hipobj conformance`): the client
//! library's tokens go in `x-amz-rdma-token`, and nothing is retried or
//! interpreted.

use bytes::Bytes;
use hipobj_wire::headers;
use http::header::{HeaderMap, HeaderValue, CONTENT_LENGTH};
use http::Method;

use crate::http as h;
use crate::sign::EMPTY_SHA256;
use crate::{Error, Result, S3Client};

/// The largest answer body a raw request reads (error documents).
const RAW_BODY_CAP: usize = 1 << 20;

/// How a raw request is authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawAuth {
    /// SigV4 over every header, the token included.
    Signed,
    /// SigV4 over every header but the token, which is added after signing
    /// (a token not among the signed headers).
    TokenNotSigned,
    /// No signature at all (an anonymous request).
    Anonymous,
}

/// One request: method, `/bucket[/key][?query]` (already encoded), extra
/// headers, an optional `x-amz-rdma-token`, and a body (empty for RDMA).
#[derive(Clone, Debug)]
pub struct RawRequest {
    /// The method.
    pub method: Method,
    /// Path and query, as they go on the wire.
    pub path_query: String,
    /// Extra headers (Range, checksums, ...).
    pub headers: HeaderMap,
    /// The `x-amz-rdma-token` value, if any.
    pub token: Option<String>,
    /// How it is signed.
    pub auth: RawAuth,
    /// The body (sent with its SHA-256 as the payload hash, or
    /// `UNSIGNED-PAYLOAD` when a token is sent).
    pub body: Bytes,
    /// The bytes the request moves by RDMA, for its time limit (the
    /// client's request timeout plus its time per GiB).
    pub moves: u64,
}

impl RawRequest {
    /// A signed request of `path_query` by `method`, no token, no body.
    pub fn new(method: Method, path_query: impl Into<String>) -> RawRequest {
        RawRequest {
            method,
            path_query: path_query.into(),
            headers: HeaderMap::new(),
            token: None,
            auth: RawAuth::Signed,
            body: Bytes::new(),
            moves: 0,
        }
    }

    /// With `x-amz-rdma-token: token`.
    pub fn with_token(mut self, token: impl Into<String>) -> RawRequest {
        self.token = Some(token.into());
        self
    }

    /// With one more header; an invalid name or value is an error.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<RawRequest> {
        let n = http::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::InvalidArgument(format!("header name {name:?}")))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| Error::InvalidArgument(format!("header {name} value {value:?}")))?;
        self.headers.append(n, v);
        Ok(self)
    }

    /// Authenticated as `auth`.
    pub fn with_auth(mut self, auth: RawAuth) -> RawRequest {
        self.auth = auth;
        self
    }
}

/// A raw answer: status, headers, body (the first MiB).
#[derive(Clone, Debug)]
pub struct RawAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl RawAnswer {
    /// A header's value as text (the first, when repeated).
    pub fn header(&self, name: &str) -> Option<String> {
        h::header(&self.headers, name)
    }

    /// Every value of a header, as text (non-UTF-8 values lossily).
    pub fn all(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    /// The `<Code>` of an S3 XML error body.
    pub fn code(&self) -> Option<String> {
        crate::xml::error_doc(&String::from_utf8_lossy(&self.body)).code
    }

    /// The `x-amz-rdma-reply` value.
    pub fn reply(&self) -> Option<String> {
        self.header(headers::RDMA_REPLY)
    }
}

impl S3Client {
    /// Sends `req` once (no retry, no fallback, nothing interpreted) and
    /// returns the answer, whatever its status.
    pub async fn raw(&self, req: RawRequest) -> Result<RawAnswer> {
        let (endpoint, signer, http, cfg) = self.raw_parts();
        let target = endpoint.target(&req.path_query)?;
        let hash = if req.token.is_some() {
            "UNSIGNED-PAYLOAD".to_string()
        } else if req.body.is_empty() {
            EMPTY_SHA256.to_string()
        } else {
            use sha2::Digest as _;
            hex::encode(sha2::Sha256::digest(&req.body))
        };
        let mut hm = req.headers.clone();
        let token = match &req.token {
            Some(t) => Some(HeaderValue::from_str(t).map_err(|_| {
                Error::InvalidArgument("the token is not a valid header value".into())
            })?),
            None => None,
        };
        if let (Some(t), RawAuth::Signed) = (&token, req.auth) {
            hm.insert(headers::RDMA_TOKEN, t.clone());
        }
        let len = req.body.len() as u64;
        let body = h::full(req.body.clone());
        let mut request = match req.auth {
            RawAuth::Signed | RawAuth::TokenNotSigned => {
                h::signed(signer, req.method.clone(), target, hm, body, len, &hash)?
            }
            RawAuth::Anonymous => {
                if let Some(host) = target.host {
                    hm.insert(http::header::HOST, host);
                }
                hm.insert(CONTENT_LENGTH, HeaderValue::from(len));
                let mut r = http::Request::new(body);
                *r.method_mut() = req.method.clone();
                *r.uri_mut() = target.uri;
                *r.headers_mut() = hm;
                r
            }
        };
        if let (Some(t), RawAuth::TokenNotSigned | RawAuth::Anonymous) = (token, req.auth) {
            request.headers_mut().insert(headers::RDMA_TOKEN, t);
        }
        let limit = cfg.timeouts.for_bytes(len.max(req.moves));
        // As the RDMA path does: the connection comes from the NIC the
        // token names, the address a server connects its RDMA to.
        let bound;
        let client = match req.token.as_deref().and_then(token_ip) {
            Some(ip) if cfg.bind_to_token_nic => {
                bound = h::client(Some(ip), cfg.timeouts.connect);
                &bound
            }
            _ => http,
        };
        let resp = h::send(client, request, limit).await?;
        let (parts, mut b) = resp.into_parts();
        let body = h::read_capped(&mut b, RAW_BODY_CAP, cfg.timeouts.request).await?;
        Ok(RawAnswer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
}

/// The IPv4 address a token's GID names (either dialect), if any.
fn token_ip(token: &str) -> Option<std::net::IpAddr> {
    let d = hipobj_wire::detect(token).ok()?;
    let gid = match d.value {
        hipobj_wire::TokenValue::HipObj(t) => t.gid,
        hipobj_wire::TokenValue::CuObj(c) => c.gid?,
    };
    gid.ipv4().map(std::net::IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipobj_wire::{DcDescriptor, Gid, Token, Transport};
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn requests_bind_to_the_address_their_token_names() {
        let gid = Gid::from_ipv4(Ipv4Addr::new(10, 1, 2, 3));
        let t = Token {
            transport: Transport::Rc,
            qp_num: 7,
            gid,
            rkey: 1,
            addr: 4096,
            len: 10,
            port: 1,
            lid: 0,
        };
        let want = Some(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(token_ip(&t.encode()), want);
        let d = DcDescriptor {
            addr: 4096,
            size: 10,
            rkey: 1,
            lid: 0,
            dct_num: 9,
            gid: Some(gid),
        };
        assert_eq!(token_ip(&d.format().unwrap()), want);
        let d = DcDescriptor { gid: None, ..d };
        assert_eq!(token_ip(&d.format().unwrap()), None);
        assert_eq!(token_ip("not-a-token"), None);
    }

    #[test]
    fn requests_take_headers_and_reject_bad_ones() {
        let r = RawRequest::new(Method::GET, "/b/k")
            .with_token("t")
            .with_auth(RawAuth::TokenNotSigned)
            .with_header("range", "bytes=0-9")
            .unwrap();
        assert_eq!(r.token.as_deref(), Some("t"));
        assert_eq!(r.auth, RawAuth::TokenNotSigned);
        assert_eq!(r.headers.get("range").unwrap(), "bytes=0-9");
        assert!(RawRequest::new(Method::GET, "/b/k")
            .with_header("bad name", "v")
            .is_err());
        assert!(RawRequest::new(Method::GET, "/b/k")
            .with_header("x", "a\nb")
            .is_err());
    }
}
