//! PREPARE: a session for one transfer. Everything is checked before any
//! resource is made (the request, the object's authorization, the peer,
//! the limits); the resources are then made in the order that undoes
//! cleanly (a failure drops what was made).

use std::sync::Arc;
use std::time::Instant;

use http::request::Parts;
use http::{Response, StatusCode};

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::{AccessFlags, QpCap, QpType, RecvWr};
use hipobj_wire::rc_v2::{Op, Part, Prepare, PrepareAnswer, Psn, SessionId, Staging};
use hipobj_wire::{Token, Transport};

use super::answer::{self, V2Error};
use super::budget::BudgetError;
use super::sessions::{self, PutRegion, Session, SessionLimit};
use crate::body::Body;
use crate::client_addr::ClientAddr;
use crate::rdma::completions::AsyncCq;
use crate::rdma::pairs::Pair;
use crate::rdma::RdmaEngine;
use crate::tenancy::Policy;

/// The work request id of a PUT session's receive.
pub(super) const RECV_ID: u64 = 0x7632_7265_6376; // "v2recv"

/// 16 bytes from the OS, as a session id.
fn new_session_id() -> Result<SessionId, V2Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| V2Error::internal(format!("no randomness: {e}")))?;
    Ok(SessionId(b))
}

/// A PSN from the OS: 24 bits, not 0.
fn new_psn() -> Result<Psn, V2Error> {
    loop {
        let mut b = [0u8; 4];
        getrandom::fill(&mut b).map_err(|e| V2Error::internal(format!("no randomness: {e}")))?;
        if let Some(p) = Psn::new(u32::from_le_bytes(b) & 0xff_ffff) {
            return Ok(p);
        }
    }
}

impl From<hipobj_fabric::FabricError> for V2Error {
    fn from(e: hipobj_fabric::FabricError) -> V2Error {
        V2Error::internal(format!("setting up the session's QP failed: {e}"))
    }
}

impl RdmaEngine {
    pub(in crate::rdma) fn rc_v2_prepare(
        &self,
        parts: Parts,
        key: &str,
        policy: &Policy,
        request_id: &str,
    ) -> Response<Body> {
        match self.try_prepare(&parts, key, policy) {
            Ok(a) => answer::ok(StatusCode::OK, a.headers(), request_id, false),
            Err(e) => {
                tracing::info!(code = e.code(), "hipobj-rc-v2 PREPARE refused");
                e.into_response(request_id, false)
            }
        }
    }

    fn try_prepare(
        &self,
        parts: &Parts,
        key: &str,
        policy: &Policy,
    ) -> Result<PrepareAnswer, V2Error> {
        let p = Prepare::read(&super::HeaderView(&parts.headers))?;
        let part = p
            .target
            .part(p.op)
            .map_err(|e| V2Error::invalid(e.to_string()))?;
        match (p.op, &part) {
            (Op::Get, Part::Number(_)) if p.span.offset != 0 => {
                return Err(V2Error::invalid(
                    "a part GET starts at the part's first byte (offset 0)",
                ))
            }
            (Op::Put, _) if p.span.offset != 0 => {
                return Err(V2Error::invalid(
                    "a PUT sends the whole object or part: offset 0",
                ))
            }
            _ => {}
        }
        let op_name = match (p.op, &part) {
            (Op::Get, _) => "GetObject",
            (Op::Put, Part::Upload { .. }) => "UploadPart",
            (Op::Put, _) => "PutObject",
        };
        crate::metrics::request(op_name, crate::metrics::PATH_RDMA);
        // The object, as the request it stands for would be authorized.
        super::authorize(policy, p.op, &p.target, &part)?;
        // Connect only to the caller.
        let client_addr = parts.extensions.get::<ClientAddr>().copied();
        if !self.admission.peer_allowed(p.token.gid, client_addr) {
            tracing::warn!(
                client = ?client_addr.map(|c| c.0),
                "hipobj-rc-v2 PREPARE refused: the token's GID is not the caller's"
            );
            return Err(V2Error::denied(
                "the token's GID is not the address this request came from",
            ));
        }
        let v2 = &self.v2;
        v2.sessions.admits(key).map_err(limit)?;
        let reservation = match p.op {
            Op::Put => Some(v2.budget.reserve(key, p.span.size).map_err(|e| match e {
                BudgetError::TooLarge(n) => V2Error::too_large(n),
                BudgetError::Busy => V2Error::limit(e.to_string()),
            })?),
            Op::Get => None,
        };
        let rail_index = self.rail_for(p.token.gid);
        let rail = &self.rails[rail_index];
        let client = RcPeer {
            qp_num: p.token.qp_num,
            gid: p.token.gid,
            lid: p.token.lid,
        };
        let server_psn = new_psn()?;
        let params = RcParams {
            rq_psn: p.psn.0,
            sq_psn: server_psn.0,
            ..rail.params
        };
        // A PUT's region lives in a PD of its own with the session's QP:
        // no other QP can reach it, whatever rkey it is told.
        let (region, cq, qp, access) = match reservation {
            Some(reservation) => {
                let pd = rail.device.alloc_pd()?;
                let len = usize::try_from(p.span.size)
                    .map_err(|_| V2Error::invalid("the size does not fit this host"))?;
                let buf =
                    pd.alloc_buffer(len, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
                let cq = rail.device.create_cq(4)?;
                let cap = QpCap {
                    max_send_wr: 1,
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                };
                let qp = pd.create_qp(QpType::Rc, &cq, &cq, cap)?;
                let region = PutRegion {
                    buf,
                    pd,
                    reservation,
                };
                (Some(region), cq, qp, AccessFlags::REMOTE_WRITE)
            }
            None => {
                let cq = rail.device.create_cq(64)?;
                let depth = u32::try_from(self.depth()).unwrap_or(u32::MAX);
                let cap = QpCap {
                    max_send_wr: depth.saturating_add(1).min(64),
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                };
                let qp = rail.pd.create_qp(QpType::Rc, &cq, &cq, cap)?;
                // A GET's server QP only requests: peers may do nothing.
                (None, cq, qp, AccessFlags::EMPTY)
            }
        };
        rc::to_init(&qp, params.port, access)?;
        if region.is_some() {
            // The client's WRITE_WITH_IMM consumes it; it names no memory.
            qp.post_recv(&RecvWr {
                wr_id: RECV_ID,
                sg_list: Vec::new(),
            })?;
        }
        // RTR now: a PUT's client may write as soon as it has this answer
        // (it connects first), before or after its READY.
        rc::to_rtr(&qp, &client, &params)?;
        let staging = region.as_ref().map(|r| Staging {
            addr: r.buf.mr().addr(),
            rkey: r.buf.mr().rkey(),
        });
        let server = Token {
            transport: Transport::Rc,
            qp_num: qp.qp_num(),
            gid: rail.gid,
            rkey: 0,
            addr: 0,
            len: 0,
            port: rail.params.port,
            lid: 0,
        };
        let pair = Pair::standalone(key, qp, AsyncCq::new(cq));
        let id = new_session_id()?;
        let session = Arc::new(Session::new(
            id,
            key,
            &p,
            client,
            server_psn,
            rail_index,
            pair,
            region,
            Instant::now() + v2.cfg.prepare_timeout,
        ));
        v2.sessions.insert(session).map_err(limit)?;
        tracing::debug!(
            session = %sessions::short(&id),
            op = op_name,
            size = p.span.size,
            device = %rail.name,
            client_qp = format_args!("{:#x}", client.qp_num),
            "hipobj-rc-v2 PREPARE"
        );
        Ok(PrepareAnswer {
            server,
            session: id,
            psn: server_psn,
            staging,
        })
    }
}

fn limit(e: SessionLimit) -> V2Error {
    V2Error::limit(e.to_string())
}
