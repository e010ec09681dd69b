//! The token under a second header name (`--rdma-token-alias`): Dell
//! ObjectScale's clients send it as `x-rdma-info`. After the signature is
//! verified, a request that carries the alias has it moved to
//! `x-amz-rdma-token`, and is then served like any RDMA request; the rest
//! of the gateway sees one name.
//!
//! The same rules as the standard name: the header must be among the
//! SigV4 signed headers (a token decides where the gateway's RDMA goes, so
//! one a middlebox added must not be served; SigV2 names no such header,
//! so an alias under SigV2 is refused), it may come once, and not beside
//! `x-amz-rdma-token` (two tokens would leave it to chance which is
//! served).

use crate::auth::Verified;
use crate::s3err::S3Error;
use hipobj_wire::headers;
use http::request::Parts;
use http::StatusCode;

/// Why a request's alias header was refused.
#[derive(Debug)]
pub struct AliasError(S3Error);

impl AliasError {
    /// The S3 error code, for the metrics.
    pub fn code(&self) -> &'static str {
        self.0.code
    }

    /// The answer: the S3 error, with `x-amz-rdma-reply` as the RDMA
    /// path's refusals carry it.
    pub fn into_response(self, request_id: &str) -> http::Response<crate::body::Body> {
        let status = self.0.status.as_u16().to_string();
        super::reply::with_reply(self.0.into_response(request_id), &status)
    }
}

/// Moves a token sent under `alias` to `x-amz-rdma-token`; nothing to do
/// for a request without it.
pub fn normalize(parts: &mut Parts, verified: &Verified, alias: &str) -> Result<(), AliasError> {
    let mut values = parts.headers.get_all(alias).iter();
    let Some(value) = values.next().cloned() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(AliasError(S3Error::invalid_token(format!(
            "more than one {alias} header"
        ))));
    }
    if !verified.signed_headers.iter().any(|h| h == alias) {
        return Err(AliasError(S3Error::new(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            format!("{alias} carries an RDMA token and must be signed: list it in SignedHeaders (SigV4)"),
        )));
    }
    if parts.headers.contains_key(headers::RDMA_TOKEN) {
        return Err(AliasError(S3Error::invalid_token(format!(
            "both {} and {alias}: send the token once",
            headers::RDMA_TOKEN
        ))));
    }
    parts.headers.remove(alias);
    parts.headers.insert(headers::RDMA_TOKEN, value);
    Ok(())
}
