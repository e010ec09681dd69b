//! The TCP peer a request came from, as the server loop records it.
//!
//! A leaf module: it depends on `std` only.

use std::net::SocketAddr;

/// The TCP peer of the HTTP connection a request came on, put into the
/// request's extensions by the server loop ([`crate::server`]). The RDMA
/// handshake checks the client's GID against it (a handshake may only aim
/// the gateway at the host that made the request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);
