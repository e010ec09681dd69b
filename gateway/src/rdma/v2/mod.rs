//! hipobj-rc-v2, the server side: three body-less, signed `POST`s.
//!
//! - `/.hipobj-rc/prepare` (`prepare`): the object is authorized as the
//!   GET, PUT or UploadPart it stands for; a server QP is made and moved to
//!   RTR, connected to the client QP the token names (with the client's
//!   PSN), and for a PUT a staging region of the transfer's size is
//!   registered in a protection domain of its own, with a receive posted
//!   for the client's WRITE_WITH_IMM. The answer: the server's token, QPN,
//!   PSN and session id, and the region.
//! - `/.hipobj-rc/ready` (`ready`): the QP goes to RTS and the bytes
//!   move. GET: the object streams from the store through the staging
//!   pool and is RDMA WRITTEN into the client's buffer, the last piece
//!   WRITE_WITH_IMM with the cookie. PUT: the client's WRITE_WITH_IMM is
//!   awaited, checked (immediate = cookie, length = size), and the bytes go
//!   to the store. The answer (FINAL) is the outcome.
//! - `/.hipobj-rc/cancel`: the session is freed.
//!
//! [`sessions`] holds them (limits and timers), [`budget`] the bytes of PUT
//! regions, [`answer`] the answers. The choices where the public sources
//! differ are in docs/protocol.md ("hipobj-rc-v2").

pub mod answer;
pub mod budget;
mod prepare;
mod ready;
pub mod sessions;

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Method, Response, StatusCode};
use tokio::sync::Semaphore;

use crate::auth::Verified;
use crate::body::Body;
use crate::config::RcV2Config;
use crate::tenancy::Policy;
use crate::upstream::Upstream;
use answer::V2Error;
use budget::PutBudget;
use hipobj_wire::rc_v2::{self as wire, Op, Part, Target};
use sessions::Sessions;

use super::RdmaEngine;

/// How often the reaper looks for sessions past their timers.
pub const REAP_PERIOD: Duration = Duration::from_secs(1);

/// Which control request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// `/.hipobj-rc/prepare`.
    Prepare,
    /// `/.hipobj-rc/ready`.
    Ready,
    /// `/.hipobj-rc/cancel`.
    Cancel,
}

impl Control {
    /// The operation's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Control::Prepare => "PREPARE",
            Control::Ready => "READY",
            Control::Cancel => "CANCEL",
        }
    }
}

/// The control request `parts` is, if it is one: a `POST` to one of the
/// three paths (no S3 bucket is named `.hipobj-rc`: bucket names start
/// with a letter or digit).
pub fn control(parts: &Parts) -> Option<Control> {
    if parts.method != Method::POST {
        return None;
    }
    match parts.uri.path() {
        wire::PREPARE_PATH => Some(Control::Prepare),
        wire::READY_PATH => Some(Control::Ready),
        wire::CANCEL_PATH => Some(Control::Cancel),
        _ => None,
    }
}

/// The v2 state of the engine.
#[derive(Debug)]
pub struct RcV2 {
    cfg: RcV2Config,
    /// The sessions.
    pub sessions: Sessions,
    budget: Arc<PutBudget>,
    ready_slots: Arc<Semaphore>,
}

impl RcV2 {
    /// With `pool_bytes` the staging pools' size and `share_bytes` one
    /// key's share of it (the defaults of the PUT budget).
    pub fn new(cfg: &RcV2Config, pool_bytes: u64, share_bytes: u64) -> RcV2 {
        let total = cfg.put_bytes.unwrap_or(pool_bytes).max(1);
        let per_key = cfg.put_bytes_per_key.unwrap_or(share_bytes).max(1);
        RcV2 {
            cfg: cfg.clone(),
            sessions: Sessions::new(cfg.sessions_total, cfg.sessions_per_key),
            budget: PutBudget::new(total, per_key),
            ready_slots: Arc::new(Semaphore::new(cfg.ready_slots.max(1))),
        }
    }

    /// Data phases under way now.
    pub fn transfers(&self) -> usize {
        self.cfg
            .ready_slots
            .max(1)
            .saturating_sub(self.ready_slots.available_permits())
    }

    /// Bytes of PUT regions held now.
    pub fn put_bytes_in_use(&self) -> u64 {
        self.budget.in_use()
    }
}

/// The object request a target stands for: `op` on the target's path,
/// with a part's query in canonical order.
pub(crate) fn object_request(
    op: Op,
    target: &Target,
    part: &Part,
) -> Result<http::request::Builder, V2Error> {
    let path = Target {
        query: None,
        ..target.clone()
    }
    .encode();
    let uri = match part {
        Part::Whole => path,
        Part::Number(n) => format!("{path}?partNumber={n}"),
        Part::Upload { upload_id, number } => {
            format!("{path}?partNumber={number}&uploadId={upload_id}")
        }
    };
    let uri: http::Uri = uri
        .parse()
        .map_err(|e| V2Error::invalid(format!("the target is not a request path: {e}")))?;
    let method = match op {
        Op::Get => Method::GET,
        Op::Put => Method::PUT,
    };
    Ok(http::Request::builder().method(method).uri(uri))
}

/// What the tenant's policy says of the object request the target stands
/// for (the same rules as the request itself); with the store identity the
/// request is signed with.
pub(crate) fn authorize(
    policy: &Policy,
    op: Op,
    target: &Target,
    part: &Part,
) -> Result<Parts, V2Error> {
    let (mut parts, ()) = object_request(op, target, part)?
        .body(())
        .map_err(|e| V2Error::invalid(e.to_string()))?
        .into_parts();
    crate::tenancy::authorize(policy, &parts).map_err(|e| V2Error::denied(e.message))?;
    if let Some(store) = &policy.store {
        parts
            .extensions
            .insert(crate::tenancy::StoreIdentity(Arc::clone(store)));
    }
    Ok(parts)
}

/// A request's headers as the wire messages read them (each
/// `x-amz-rdma-*` header comes once: [`admit`] refuses repeats).
pub(crate) struct HeaderView<'a>(pub &'a http::HeaderMap);

impl wire::Headers for HeaderView<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The checks every control request passes (after v2 is known to be on
/// and the protocol named): no query, no body, each `x-amz-rdma-*` header
/// once and among the SigV4 signed headers (SigV2 names none: v2 needs
/// SigV4).
fn admit(parts: &Parts, verified: &Verified) -> Result<(), V2Error> {
    if parts.uri.query().is_some() {
        return Err(V2Error::invalid("a hipobj-rc-v2 request has no query"));
    }
    let has_body = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || parts.headers.contains_key(http::header::TRANSFER_ENCODING);
    if has_body {
        return Err(V2Error::invalid("a hipobj-rc-v2 request has no body"));
    }
    for name in parts.headers.keys() {
        let n = name.as_str();
        if n.starts_with("x-amz-rdma-") && parts.headers.get_all(name).iter().nth(1).is_some() {
            return Err(V2Error::invalid(format!("{n} comes more than once")));
        }
        if n.starts_with("x-amz-rdma-") && !verified.signed_headers.iter().any(|s| s == n) {
            return Err(V2Error::denied(format!(
                "{n} must be signed: list every x-amz-rdma-* header in SignedHeaders (SigV4)"
            )));
        }
    }
    Ok(())
}

impl RdmaEngine {
    /// Serves one hipobj-rc-v2 control request of `access_key` (verified),
    /// under `policy`.
    pub async fn serve_rc_v2(
        self: &Arc<Self>,
        which: Control,
        parts: Parts,
        verified: &Verified,
        policy: &Policy,
        upstream: &Arc<dyn Upstream>,
        request_id: &str,
    ) -> Response<Body> {
        let v2 = &self.v2;
        if !v2.cfg.enabled {
            return answer::unsupported(request_id, "hipobj-rc-v2 is turned off here");
        }
        match parts.headers.get(wire::H_PROTOCOL).map(|v| v.as_bytes()) {
            Some(p) if p == wire::PROTOCOL.as_bytes() => {}
            _ => {
                return answer::unsupported(
                    request_id,
                    "x-amz-rdma-protocol must be hipobj-rc-v2, the protocol served here",
                )
            }
        }
        if let Err(e) = admit(&parts, verified) {
            return e.into_response(request_id, false);
        }
        let key = verified.access_key.as_str();
        let r = match which {
            Control::Prepare => self.rc_v2_prepare(parts, key, policy, request_id),
            Control::Ready => {
                self.rc_v2_ready(parts, key, policy, upstream, request_id)
                    .await
            }
            Control::Cancel => self.rc_v2_cancel(&parts, key, request_id),
        };
        // A line at info only for a control request refused; a success
        // at debug (the metrics count PREPAREs and the transfers READY
        // runs), as plain requests that succeed are not logged.
        let status = r.status().as_u16();
        if r.status().is_success() {
            tracing::debug!(control = which.name(), status, "hipobj-rc-v2");
        } else {
            tracing::info!(control = which.name(), status, "hipobj-rc-v2");
        }
        r
    }

    /// CANCEL: 200 whether there was a prepared session of this key or
    /// not (a second CANCEL, or one for a session already done, is
    /// answered the same; another key's session is left alone).
    fn rc_v2_cancel(&self, parts: &Parts, key: &str, request_id: &str) -> Response<Body> {
        let id = match parts
            .headers
            .get(wire::H_SESSION)
            .ok_or_else(|| V2Error::invalid("x-amz-rdma-session is missing"))
            .and_then(|v| {
                v.to_str()
                    .map_err(|_| V2Error::invalid("x-amz-rdma-session is not ASCII"))
            })
            .and_then(|s| wire::SessionId::parse(s).map_err(|e| V2Error::invalid(e.to_string())))
        {
            Ok(id) => id,
            Err(e) => return e.into_response(request_id, false),
        };
        let cancelled = self.v2.sessions.cancel(&id, key);
        tracing::info!(session = %sessions::short(&id), cancelled, "hipobj-rc-v2 CANCEL");
        answer::ok(
            StatusCode::OK,
            vec![(wire::H_SESSION, id.to_string())],
            request_id,
            false,
        )
    }

    /// Starts the thread that frees sessions past their timers; it ends
    /// when the engine is dropped.
    pub fn start_reaper(self: &Arc<Self>) -> std::io::Result<()> {
        let engine = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("rc-v2-reaper".into())
            .spawn(move || loop {
                std::thread::sleep(REAP_PERIOD);
                let Some(e) = engine.upgrade() else { return };
                for _ in 0..e.v2.sessions.reap(std::time::Instant::now()) {
                    crate::metrics::rdma_failure("RdmaSessionExpired");
                }
            })
            .map(|_| ())
    }
}
