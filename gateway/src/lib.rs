//! The RDMA S3 front: one engine behind two binaries.
//!
//! Requests carrying `x-amz-rdma-token` are served by one-sided RDMA (the
//! client's buffer is written for a GET and read for a PUT or UploadPart);
//! everything else is proxied to the upstream S3 store. Every request is
//! authenticated on the way in (SigV4, SigV2, or a browser upload's signed
//! form) and signed again with SigV4 on the way out.

// No unsafe code but in `rdma::completions`, which must register a file
// descriptor with tokio's reactor (an unsafe call): `forbid` cannot be
// lifted for one module, so the crate denies it and that module alone
// allows it.
#![deny(unsafe_code)]

pub mod auth;
pub mod body;
pub mod checksum;
pub mod cli;
pub mod client_addr;
pub mod config;
pub mod credentials_file;
pub mod engine;
pub mod header_filter;
pub mod keys;
pub mod metrics;
pub mod plain;
pub mod rdma;
pub mod s3err;
pub mod s3op;
pub mod server;
pub mod tenancy;
pub mod tls;
pub mod upstream;
