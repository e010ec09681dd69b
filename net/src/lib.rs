//! HTTP transport pieces shared by the gateway (`hipobj-gateway`) and the
//! S3 client (`hipobj-s3`):
//!
//! - [`quickack`]: a TCP stream that re-arms `TCP_QUICKACK` after every
//!   read, and its connector for hyper-util's legacy client;
//! - [`sigv4`]: SigV4 signing of an outbound request with aws-sigv4 in
//!   S3's mode;
//! - [`retry`]: the retry policy (attempts, backoff, the loop), the
//!   callers' rules apart;
//! - [`size`]: byte counts as the tools parse and show them;
//! - [`cpu`]: a process's CPU time as the benchmark tools read it.

#![forbid(unsafe_code)]

pub mod cpu;
pub mod quickack;
pub mod retry;
pub mod sigv4;
pub mod size;

/// Hop-by-hop headers (RFC 9110 §7.6.1, plus the legacy `keep-alive` and
/// `proxy-connection`): a proxy neither forwards nor signs them.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];
