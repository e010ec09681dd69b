//! The connect-first RC handshake: a token without a buffer asks for a
//! server QP connected to the client's; the answer's reply carries the
//! server's token (`200:<token>`).

use http::{HeaderValue, Response, StatusCode};

use hipobj_fabric::rc::RcPeer;
use hipobj_wire::{headers, Token, Transport};

use super::pairs::{Elsewhere, PairError};
use super::rail::Rail;
use super::reply::{set_request_id, with_reply};
use crate::body::Body;
use crate::s3err::S3Error;

/// The goodbye (`x-amz-rdma-goodbye` with a handshake-form token): the
/// client let go of the QP `t` names; its pair on `rail` is
/// released at once. 200 (reply `200`) whether there was one or not;
/// 403 when the pair is another access key's, which it leaves alone.
pub(super) fn goodbye(
    rail: &Rail,
    access_key: &str,
    t: &Token,
    request_id: &str,
) -> Response<Body> {
    match rail.pairs.goodbye(t.gid, t.qp_num, access_key) {
        Ok(released) => {
            crate::metrics::pairs_released(&rail.name, "goodbye", usize::from(released));
            tracing::info!(
                device = %rail.name,
                client_qp = format_args!("{:#x}", t.qp_num),
                released,
                "RDMA goodbye"
            );
            let mut r = Response::new(Body::empty());
            r.headers_mut()
                .insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
            set_request_id(&mut r, request_id);
            with_reply(r, "200")
        }
        Err(e) => with_reply(
            S3Error::access_denied(e.to_string()).into_response(request_id),
            "403",
        ),
    }
}

/// Connects a server QP of `rail` to the client QP `t` names, for
/// `access_key`, within its pair limits (`elsewhere`: its pairs on the
/// other devices); the answer's token names that device's GID.
pub(super) fn connect(
    rail: &Rail,
    elsewhere: Elsewhere,
    access_key: &str,
    t: &Token,
    request_id: &str,
) -> Response<Body> {
    let client = RcPeer {
        qp_num: t.qp_num,
        gid: t.gid,
        lid: t.lid,
    };
    let device = rail.name.as_str();
    match rail.pairs.connect(
        &rail.device,
        &rail.pd,
        access_key,
        client,
        &rail.params,
        elsewhere,
    ) {
        Ok(pair) => {
            crate::metrics::handshake(device, "ok");
            let server = Token {
                transport: Transport::Rc,
                qp_num: pair.qp.qp_num(),
                gid: rail.gid,
                rkey: 0,
                addr: 0,
                len: 0,
                port: rail.params.port,
                lid: 0,
            };
            tracing::info!(
                device,
                client_qp = format_args!("{:#x}", t.qp_num),
                server_qp = format_args!("{:#x}", pair.qp.qp_num()),
                "RDMA handshake"
            );
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::OK;
            let h = r.headers_mut();
            h.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
            if let Ok(v) = HeaderValue::from_str(&format!("200:{}", server.encode())) {
                h.insert(headers::RDMA_REPLY, v);
            }
            set_request_id(&mut r, request_id);
            r
        }
        Err(e @ (PairError::PerKey(_) | PairError::Total(_))) => {
            crate::metrics::handshake(device, "limit");
            with_reply(
                S3Error::pool_timeout(e.to_string()).into_response(request_id),
                "503",
            )
        }
        Err(e @ PairError::OtherKey) => {
            crate::metrics::handshake(device, "other_key");
            tracing::warn!(
                device,
                client_qp = format_args!("{:#x}", t.qp_num),
                "RDMA handshake refused: the client QP is paired under another access key"
            );
            with_reply(
                S3Error::access_denied(e.to_string()).into_response(request_id),
                "403",
            )
        }
        Err(e) => {
            crate::metrics::handshake(device, "error");
            with_reply(
                S3Error::transfer_failed(e.to_string()).into_response(request_id),
                "500",
            )
        }
    }
}
