//! HTTP transport pieces shared by the gateway (`hipobj-gateway`) and the
//! S3 client (`hipobj-s3`):
//!
//! - [`quickack`]: a TCP stream that re-arms `TCP_QUICKACK` after every
//!   read, and its connector for hyper-util's legacy client;
//! - [`sigv4`]: SigV4 signing of an outbound request with aws-sigv4 in
//!   S3's mode.

pub mod quickack;
pub mod sigv4;
