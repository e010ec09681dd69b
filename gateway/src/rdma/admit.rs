//! Whether a transfer may start and on which QP ([`Admission`]): the
//! gateway connects only to the caller, an RC pair serves only the access
//! key that made it, DC initiators come from a bounded pool; and the
//! answers that refuse.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use http::{Response, StatusCode};

use hipobj_fabric::Gid;

use super::dci::{self, DciError};
use super::mover::Initiator;
use super::rail::Rail;
use super::reply::with_reply;
use super::target::Target;
use crate::body::Body;
use crate::client_addr::ClientAddr;
use crate::config::RdmaConfig;
use crate::s3err::S3Error;

/// What admission needs of the configuration: the networks a token may
/// aim at besides the caller, the DC key, and how long a DC initiator is
/// waited for.
#[derive(Debug, Clone)]
pub(super) struct Admission {
    /// The operator's allowed networks (`--rdma-allow-peers`).
    allowed_peers: Vec<ipnet::IpNet>,
    /// The DC key from the configuration; `None`: DC is declined.
    dc_key: Option<u64>,
    /// The longest a DC request waits for an initiator.
    pool_timeout: Duration,
}

/// The answer to a transfer whose client QP has no pair (any more): 421,
/// repeat the handshake.
pub(super) fn reconnect(request_id: &str) -> Response<Body> {
    crate::metrics::rdma_fallback("reconnect");
    with_reply(
        S3Error::new(
            StatusCode::MISDIRECTED_REQUEST,
            "RDMAConnectionUnknown",
            "no RDMA connection to this client QP: repeat the handshake (reply 421)".to_string(),
        )
        .into_response(request_id),
        "421",
    )
}

impl Admission {
    /// The configuration's part that admission needs.
    pub(super) fn new(cfg: &RdmaConfig) -> Admission {
        Admission {
            allowed_peers: cfg.allowed_peers.clone(),
            dc_key: cfg.dc_key,
            pool_timeout: cfg.pool_timeout,
        }
    }

    /// The DC key from the configuration; `None`: DC is declined.
    pub(super) fn dc_key(&self) -> Option<u64> {
        self.dc_key
    }

    /// Whether a token's GID may be aimed at: the address of the HTTP peer
    /// the request came from, or one in the operator's allowed networks.
    /// The gateway connects only to the caller.
    pub(super) fn peer_allowed(&self, gid: Gid, client: Option<ClientAddr>) -> bool {
        let gid_ip = match gid.ipv4() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(gid.0)),
        };
        let from_caller = client.is_some_and(|c| match c.0.ip() {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map_or(IpAddr::V6(v6), IpAddr::V4)
                .eq(&gid_ip),
            ip => ip == gid_ip,
        });
        from_caller || self.allowed_peers.iter().any(|n| n.contains(&gid_ip))
    }

    /// The QP of `rail` that will move the bytes to or from
    /// `target`: the RC pair this access key made there, or a DC initiator
    /// leased from its pool.
    pub(super) async fn initiator(
        &self,
        rail: &Rail,
        target: Target,
        access_key: &str,
        request_id: &str,
    ) -> Result<Initiator, Response<Body>> {
        let initiator = match target {
            Target::Rc { gid, qp_num } => match rail.pairs.get(gid, qp_num) {
                None => return Err(reconnect(request_id)),
                Some(p) if p.access_key != access_key => {
                    crate::metrics::rdma_failure("AccessDenied");
                    return Err(with_reply(
                        S3Error::access_denied(
                            "the RDMA connection belongs to another access key".to_string(),
                        )
                        .into_response(request_id),
                        "403",
                    ));
                }
                Some(p) => Initiator::Rc(p),
            },
            Target::Dc(to) => {
                if let Some((reason, why)) = dci::refusal(rail.device.info(), self.dc_key) {
                    return Err(decline(reason, &why, request_id));
                }
                match rail
                    .dcis
                    .lease(
                        access_key,
                        self.pool_timeout,
                        &rail.device,
                        &rail.pd,
                        &rail.params,
                    )
                    .await
                {
                    Ok(lease) => Initiator::Dc {
                        lease: Box::new(lease),
                        to,
                    },
                    Err(e @ DciError::Busy(..)) => {
                        crate::metrics::rdma_failure("SlowDown");
                        return Err(with_reply(
                            S3Error::pool_timeout(e.to_string()).into_response(request_id),
                            "503",
                        ));
                    }
                    Err(e) => {
                        return Err(decline(
                            "dc_unavailable",
                            &format!("DC is not available here: {e}"),
                            request_id,
                        ))
                    }
                }
            }
        };
        Ok(initiator)
    }
}

/// The answer when the token aims at another host than the caller.
pub(super) fn refuse_peer(
    gid: Gid,
    client: Option<ClientAddr>,
    request_id: &str,
) -> Response<Body> {
    tracing::warn!(
        gid = ?gid,
        client = ?client.map(|c| c.0.ip()),
        "RDMA refused: the token's GID is not the requesting host's"
    );
    crate::metrics::rdma_failure("PeerNotAllowed");
    with_reply(
        S3Error::access_denied(
            "the RDMA token names another host than the one this request came from".to_string(),
        )
        .into_response(request_id),
        "403",
    )
}

/// The 501 for what this gateway does not serve over RDMA.
pub(super) fn decline(reason: &'static str, why: &str, request_id: &str) -> Response<Body> {
    tracing::info!(why, "RDMA declined");
    crate::metrics::rdma_declined(reason);
    with_reply(
        S3Error::rdma_declined(why.to_string()).into_response(request_id),
        "501",
    )
}
