//! Connecting a QP to its responder: where the responder's device
//! listens, the hello, whether the same-host path is used, and the
//! receiver thread for the connection.

use super::receiver::receive;
use crate::soft::cma;
use crate::soft::memory;
use crate::soft::packet::{self, Hello, HelloAck, HELLO_ACK_LEN};
use crate::soft::shared::{QpCore, QpInner, ReqConn};
use crate::types::QpType;
use std::net::{Shutdown, SocketAddrV4, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Where the responder's device listens: the GID's IPv4 address, and the
/// port in the upper 16 bits of the responder's QP (or DCT) number; and
/// that number.
pub(super) fn endpoint(qp: &QpInner, g: &QpCore) -> Option<(SocketAddrV4, u32)> {
    let (gid, qpn) = match qp.qp_type {
        QpType::Rc => (g.attr.ah_attr.grh?.dgid, g.attr.dest_qp_num),
        QpType::DcInitiator => {
            let t = g.dc_target?;
            (t.gid, t.dct_num)
        }
    };
    let port = (qpn >> 8) as u16;
    (port != 0).then_some((SocketAddrV4::new(gid.ipv4()?, port), qpn))
}

/// Opens a connection from this device's address to `addr` and completes
/// the hello: `None` unless a soft device answered it within `limit`.
fn open_stream(
    qp: &QpInner,
    addr: SocketAddrV4,
    dst_qpn: u32,
    limit: Duration,
) -> Option<(TcpStream, HelloAck)> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        tracing::debug!(qpn = format_args!("{:#x}", qp.qpn), %addr, error = %e, "soft requester: {what}");
    };
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| fail("socket", &e))
        .ok()?;
    // From the device's own address, which the responder checks against
    // the GID the hello claims. The port is left to connect(), which picks
    // one free for this destination from the connection hash; a bind to
    // port 0 searches the whole bind table under its locks instead, and
    // with one connection per hipobj-rc-v2 transfer that search took 40%
    // of the machine's CPU under 16 clients of 4 KiB objects.
    bind_address_no_port(&sock)
        .map_err(|e| fail("IP_BIND_ADDRESS_NO_PORT", &e))
        .ok()?;
    sock.bind(&SocketAddrV4::new(qp.dev.ip, 0).into())
        .map_err(|e| fail("bind", &e))
        .ok()?;
    sock.connect_timeout(&addr.into(), limit)
        .map_err(|e| fail("cannot reach its peer", &e))
        .ok()?;
    let stream: TcpStream = sock.into();
    let _ = stream.set_nodelay(true);
    let hello = Hello {
        src_gid: qp.dev.gid,
        src_qpn: qp.qpn,
        dst_qpn,
    };
    memory::send_bytes(&stream, &hello.encode(), false)
        .map_err(|e| fail("hello not sent", &e))
        .ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    let ack = memory::read_header::<HELLO_ACK_LEN>(&stream);
    let ack = match ack {
        Ok(Some(b)) if HelloAck::decode(&b).is_some() => HelloAck::decode(&b)?,
        Ok(Some(b)) if packet::foreign_version(&b).is_some() => {
            tracing::warn!(
                qpn = format_args!("{:#x}", qp.qpn),
                %addr,
                theirs = packet::foreign_version(&b),
                ours = packet::VERSION,
                "soft requester: the responder speaks another soft wire version \
                 (another hipobj release: run the same one on both ends); its requests \
                 end in RETRY_EXC_ERR"
            );
            let _ = stream.shutdown(Shutdown::Both);
            return None;
        }
        other => {
            fail(
                "the peer did not answer the hello",
                &format_args!("{other:?}"),
            );
            let _ = stream.shutdown(Shutdown::Both);
            return None;
        }
    };
    stream.set_read_timeout(None).ok()?;
    Some((stream, ack))
}

/// Sets `IP_BIND_ADDRESS_NO_PORT` on `sock` (Linux 4.2 and later): a bind
/// to an address with port 0 takes the address only, and connect() chooses
/// the port.
fn bind_address_no_port(sock: &socket2::Socket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let on: libc::c_int = 1;
    // SAFETY: `sock` is an open socket for the whole call; the option value
    // is a valid c_int on the stack, passed with its exact size, which the
    // kernel only reads.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The responder's process for the same-host path, if it offered the path,
/// this device uses it, and the process passes `cma::verify_peer`.
fn cma_peer(qp: &QpInner, stream: &TcpStream, ack: HelloAck) -> Option<cma::PeerProcess> {
    if !ack.cma || !qp.dev.config.cma || qp.qp_type != QpType::Rc {
        return None;
    }
    let local = stream
        .peer_addr()
        .is_ok_and(|p| cma::is_local(p.ip(), std::net::IpAddr::V4(qp.dev.ip)));
    if !local {
        return None;
    }
    match cma::verify_peer(stream, ack.pid, ack.fd, qp.dev.config.cma_privileged) {
        Ok(peer) => Some(peer),
        Err(why) => {
            tracing::debug!(
                qpn = format_args!("{:#x}", qp.qpn),
                pid = ack.pid,
                ?why,
                "soft requester: same-host path not used"
            );
            None
        }
    }
}

pub(super) fn connect(
    qp: &Arc<QpInner>,
    gen: u64,
    addr: SocketAddrV4,
    dst_qpn: u32,
    limit: Duration,
) -> Option<Arc<ReqConn>> {
    let (stream, ack) = open_stream(qp, addr, dst_qpn, limit)?;
    let reader = stream.try_clone().ok()?;
    let cma_peer = cma_peer(qp, &stream, ack);
    let conn = Arc::new(ReqConn {
        id: qp.dev.next_id(),
        stream,
        cma_live: std::sync::atomic::AtomicBool::new(cma_peer.is_some()),
        cma_peer,
    });
    let (q, c) = (qp.clone(), conn.clone());
    std::thread::Builder::new()
        .name(format!("soft-qp-{:x}-rx", qp.qpn))
        .spawn(move || receive(q, gen, c, reader))
        .ok()?;
    Some(conn)
}
