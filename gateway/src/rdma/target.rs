//! Where a token aims: the handshake of the connect-first RC flow, or a
//! transfer to an RC client QP or a DC target with the client's buffer;
//! and the buffers a token may name for an operation ([`check_buffer`]).
//! Pure: no I/O, no engine state but the configured DC key.

use hipobj_fabric::{DcAddr, Gid};
use hipobj_wire::{Detected, Token, TokenValue, Transport};

use http::StatusCode;

use super::mover::RemoteBuffer;
use crate::s3err::S3Error;
use crate::s3op::Operation;

/// Where a transfer token points.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// A connected RC client QP.
    Rc {
        /// The client's GID.
        gid: Gid,
        /// The client QP.
        qp_num: u32,
    },
    /// A DC target.
    Dc(DcAddr),
}

impl Target {
    /// The host the bytes would go to or come from.
    pub fn gid(&self) -> Gid {
        match self {
            Target::Rc { gid, .. } => *gid,
            Target::Dc(to) => to.gid,
        }
    }
}

/// What a token asks for.
#[derive(Debug)]
pub enum Aim {
    /// The RC handshake (a token without a buffer).
    Handshake(Token),
    /// A transfer.
    Transfer {
        /// The client QP or DC target.
        target: Target,
        /// The client's buffer.
        remote: RemoteBuffer,
        /// The dialect, for logs.
        dialect: &'static str,
    },
    /// A token this gateway cannot serve (answered 501).
    Decline {
        /// The metric's reason label.
        reason: &'static str,
        /// What the client is told.
        why: &'static str,
    },
}

/// What `detected` aims at; DC targets are keyed with `dc_key`.
pub fn aim(detected: Detected, dc_key: u64) -> Aim {
    let (target, mut remote, dialect) = match detected.value {
        TokenValue::HipObj(t) if t.transport == Transport::Rc && t.is_handshake() => {
            return Aim::Handshake(t);
        }
        TokenValue::HipObj(t) => {
            let (target, dialect) = if t.transport == Transport::Rc {
                let target = Target::Rc {
                    gid: t.gid,
                    qp_num: t.qp_num,
                };
                (target, "hipobj-rc")
            } else {
                let target = Target::Dc(DcAddr {
                    gid: t.gid,
                    lid: t.lid,
                    dct_num: t.qp_num,
                    dc_key,
                });
                (target, "hipobj-dc")
            };
            let remote = RemoteBuffer {
                addr: t.addr,
                len: t.len,
                rkey: t.rkey,
            };
            (target, remote, dialect)
        }
        TokenValue::CuObj(d) => {
            let Some(gid) = d.gid else {
                return Aim::Decline {
                    reason: "cuobj_without_gid",
                    why: "a cuObject descriptor without a GID cannot be reached on RoCE",
                };
            };
            let to = DcAddr {
                gid,
                lid: d.lid,
                dct_num: d.dct_num,
                dc_key,
            };
            let remote = RemoteBuffer {
                addr: d.addr,
                len: u64::from(d.size),
                rkey: d.rkey,
            };
            (Target::Dc(to), remote, "cuobj-dc")
        }
    };
    if let Some(s) = detected.suffix {
        // The legacy suffix overrides the buffer's address and size, as
        // MinIO AIStor treats it.
        remote.addr = s.addr;
        remote.len = s.len;
    }
    Aim::Transfer {
        target,
        remote,
        dialect,
    }
}

/// The largest object S3 stores (5 TiB): no GET needs a larger buffer.
pub const MAX_GET_BUFFER: u64 = 5 << 40;
/// The largest PutObject or UploadPart S3 accepts (5 GiB).
pub const MAX_PUT_LEN: u64 = 5 << 30;

/// Refuses a token whose buffer no real request can have: an address range
/// that wraps, a GET buffer beyond the largest object, a PUT beyond S3's
/// largest single upload.
pub(super) fn check_buffer(op: Operation, remote: &RemoteBuffer) -> Result<(), S3Error> {
    if remote.addr.checked_add(remote.len).is_none() {
        return Err(S3Error::invalid_token(format!(
            "the RDMA buffer's address plus its length ({}) overflows",
            remote.len
        )));
    }
    match op {
        Operation::GetObject if remote.len > MAX_GET_BUFFER => {
            Err(S3Error::invalid_token(format!(
                "an RDMA buffer of {} bytes is larger than any object (5 TiB)",
                remote.len
            )))
        }
        Operation::PutObject | Operation::UploadPart if remote.len > MAX_PUT_LEN => {
            Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "EntityTooLarge",
                format!(
                    "{} bytes: a single upload is at most 5 GiB (use a multipart upload)",
                    remote.len
                ),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipobj_wire::detect;

    fn token(transport: Transport, len: u64) -> String {
        Token {
            transport,
            qp_num: 0x1234,
            gid: Gid([7; 16]),
            rkey: 0x55,
            addr: 0x1000,
            len,
            port: 1,
            lid: 9,
        }
        .encode()
    }

    #[test]
    fn handshake_rc_and_dc() {
        let d = detect(&token(Transport::Rc, 0)).unwrap();
        assert!(matches!(aim(d, 1), Aim::Handshake(t) if t.qp_num == 0x1234));
        let d = detect(&token(Transport::Rc, 64)).unwrap();
        match aim(d, 1) {
            Aim::Transfer {
                target: Target::Rc { qp_num, .. },
                remote,
                dialect,
            } => {
                assert_eq!(qp_num, 0x1234);
                assert_eq!(
                    remote,
                    RemoteBuffer {
                        addr: 0x1000,
                        len: 64,
                        rkey: 0x55
                    }
                );
                assert_eq!(dialect, "hipobj-rc");
            }
            other => panic!("{other:?}"),
        }
        let d = detect(&token(Transport::Dc, 64)).unwrap();
        match aim(d, 0xabc) {
            Aim::Transfer {
                target: Target::Dc(to),
                dialect,
                ..
            } => {
                assert_eq!((to.dct_num, to.lid, to.dc_key), (0x1234, 9, 0xabc));
                assert_eq!(dialect, "hipobj-dc");
            }
            other => panic!("{other:?}"),
        }
    }
}
