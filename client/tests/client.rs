//! The client library: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

mod common;
mod exports;
mod gpu_buffers;
mod header_layout;
mod select;
mod topology;
mod transfers;
