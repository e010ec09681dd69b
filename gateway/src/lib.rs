//! The RDMA S3 front: one engine behind two binaries.
//!
//! Requests carrying `x-amz-rdma-token` are served by one-sided RDMA (the
//! client's buffer is written for a GET and read for a PUT or UploadPart);
//! everything else is proxied to the upstream S3 store. Every request is
//! authenticated on the way in (SigV4, SigV2, or a browser upload's signed
//! form) and signed again with SigV4 on the way out.

#![deny(unsafe_code)]

pub mod auth;
pub mod body;
pub mod checksum;
pub mod cli;
pub mod config;
pub mod credentials_file;
pub mod engine;
pub mod keys;
pub mod metrics;
pub mod post_object;
pub mod post_spool;
pub mod proxy;
pub mod rdma;
pub mod rechunk;
pub mod s3err;
pub mod s3op;
pub mod server;
pub mod tenancy;
pub mod tls;
pub mod trim;
pub mod upstream;
