//! hipobj-rc-v2's control requests as the client library's [`V2Ops`]:
//! body-less, SigV4-signed `POST`s (every `x-amz-rdma-*` header signed,
//! `UNSIGNED-PAYLOAD`) to `/.hipobj-rc/prepare`, `/ready` and `/cancel` on
//! the S3 endpoint, sent from the transfer's blocking thread on the RDMA
//! runtime; and what is remembered per endpoint: servers without v2, and
//! the largest PUT a server stages at once (a 413's `x-amz-rdma-max-size`),
//! servers that also serve the handshake flow (a FINAL's capabilities).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use hipobj::v2::{cancel_headers, V2Ops, V2Response};
use hipobj_wire::headers;
use hipobj_wire::rc_v2::{
    Cookie, Final, Headers, Prepare, PrepareAnswer, Ready, SessionId, CANCEL_PATH, H_PROTOCOL,
    PREPARE_PATH, PROTOCOL, READY_PATH,
};
use http::header::HeaderMap;
use http::Method;

use crate::http::{self as h, Answer, Target};
use crate::rdma::{exchange, RdmaContext, Remembered};
use crate::{Error, Result};

/// Endpoints found without v2, and until when that is believed.
static NO_V2: Remembered = Remembered::new();
/// Endpoints whose v2 answers said they serve the handshake flow too.
static HANDSHAKE: Remembered = Remembered::new();
/// How long that is believed after the last answer that said it: a small
/// transfer under `auto` goes by v2 again after it, and learns it again.
const HANDSHAKE_TTL: Duration = Duration::from_secs(60);

/// Whether `endpoint` is known to serve the handshake flow.
pub(crate) fn serves_handshake(endpoint: &str) -> bool {
    HANDSHAKE.left(endpoint).is_some()
}

/// Remembers that `endpoint` serves the handshake flow (a FINAL said so).
pub(crate) fn remember_handshake(endpoint: &str) {
    HANDSHAKE.remember(endpoint, HANDSHAKE_TTL);
}

/// Forgets it (the endpoint answered a handshake without RDMA).
pub(crate) fn forget_handshake(endpoint: &str) {
    HANDSHAKE.forget(endpoint);
}

/// Endpoints' largest v2 PUT (a 413's `x-amz-rdma-max-size`).
static PUT_CAP: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(Default::default);

/// How much longer `endpoint` is believed to be without v2.
pub(crate) fn remembered_no_v2(endpoint: &str) -> Option<Duration> {
    NO_V2.left(endpoint)
}

/// Remembers `endpoint` as without v2 for `ttl`.
pub(crate) fn remember_no_v2(endpoint: &str, ttl: Duration) {
    NO_V2.remember(endpoint, ttl);
}

/// The largest v2 PUT `endpoint` announced, if it refused one.
pub(crate) fn put_cap(endpoint: &str) -> Option<u64> {
    PUT_CAP
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(endpoint)
        .copied()
}

/// Remembers the largest v2 PUT of `endpoint`.
pub(crate) fn remember_put_cap(endpoint: &str, cap: u64) {
    PUT_CAP
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(endpoint.to_string(), cap);
}

/// A header map as the wire crate reads it.
pub(crate) struct Hm<'a>(pub &'a HeaderMap);

impl Headers for Hm<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Whether an answer carries `x-amz-rdma-protocol: hipobj-rc-v2`.
pub(crate) fn echoes(a: &Answer) -> bool {
    Hm(&a.headers).get(H_PROTOCOL) == Some(PROTOCOL)
}

/// The control requests of one transfer, and what they saw.
pub(crate) struct V2Http {
    ctx: Arc<RdmaContext>,
    /// Where this transfer's control requests go: a session lives on one
    /// gateway.
    endpoint: h::Endpoint,
    /// The limit of PREPARE and CANCEL.
    request_limit: Duration,
    /// The limit of READY (it moves the bytes).
    ready_limit: Duration,
    /// PREPARE's answer.
    pub prepare: Option<Answer>,
    /// READY's answer.
    pub ready: Option<Answer>,
    /// Why a request got no answer.
    pub failure: Option<Error>,
    /// CANCELs sent.
    pub cancels: u32,
    /// Whether a READY was sent (answered or not).
    pub ready_sent: bool,
    /// The local address the requests go from: the token's NIC (when the
    /// context binds), as the server accepts a token only from its GID's
    /// address.
    local: Option<std::net::IpAddr>,
}

impl V2Http {
    pub(crate) fn new(
        ctx: Arc<RdmaContext>,
        endpoint: h::Endpoint,
        request_limit: Duration,
        ready_limit: Duration,
    ) -> V2Http {
        V2Http {
            ctx,
            endpoint,
            request_limit,
            ready_limit,
            prepare: None,
            ready: None,
            failure: None,
            cancels: 0,
            ready_sent: false,
            local: None,
        }
    }

    /// One signed `POST` of `headers` to `path`, path-style whatever the
    /// addressing (the control paths name no bucket).
    fn post(
        &self,
        path: &str,
        fields: Vec<(&'static str, String)>,
        limit: Duration,
    ) -> Result<Answer> {
        let mut hm = HeaderMap::new();
        for (k, v) in &fields {
            h::set(&mut hm, k, v)?;
        }
        let target = Target {
            uri: self.endpoint.uri(path)?,
            host: None,
        };
        let req = h::signed(
            &self.ctx.signer,
            Method::POST,
            target,
            hm,
            h::empty(),
            0,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let client = self.ctx.client(self.local, false);
        self.ctx.handle().block_on(exchange(client, req, limit))
    }

    fn response<T: hipobj::v2::Message>(a: &Answer) -> V2Response<T> {
        let mut r = V2Response::from_headers(a.status.as_u16(), &Hm(&a.headers));
        if !a.body.is_empty() {
            let doc = crate::xml::error_doc(&String::from_utf8_lossy(&a.body));
            r.detail = [doc.code, doc.message]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
        }
        r
    }
}

impl V2Ops for V2Http {
    fn prepare(
        &mut self,
        req: &Prepare,
        remaining: Duration,
    ) -> std::result::Result<V2Response<PrepareAnswer>, i32> {
        if self.ctx.bind {
            self.local = req.token.client_ip().map(std::net::IpAddr::V4);
        }
        match self.post(
            PREPARE_PATH,
            req.headers(),
            remaining.min(self.request_limit),
        ) {
            Ok(a) => {
                let r = Self::response(&a);
                self.prepare = Some(a);
                Ok(r)
            }
            Err(e) => {
                self.failure = Some(e);
                Err(-1)
            }
        }
    }

    fn ready(
        &mut self,
        req: &Ready,
        remaining: Duration,
    ) -> std::result::Result<V2Response<Final>, i32> {
        self.ready_sent = true;
        match self.post(READY_PATH, req.headers(), remaining.min(self.ready_limit)) {
            Ok(a) => {
                let r = Self::response(&a);
                self.ready = Some(a);
                Ok(r)
            }
            Err(e) => {
                self.failure = Some(e);
                Err(-1)
            }
        }
    }

    fn cancel(
        &mut self,
        session: SessionId,
        cookie: Cookie,
        remaining: Duration,
    ) -> std::result::Result<u16, i32> {
        self.cancels += 1;
        let limit = remaining.min(self.request_limit);
        match self.post(CANCEL_PATH, cancel_headers(session, cookie), limit) {
            Ok(a) => Ok(a.status.as_u16()),
            Err(e) => {
                tracing::debug!(error = %e, "hipobj-rc-v2 CANCEL got no answer");
                Err(-1)
            }
        }
    }
}
