//! The software provider: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

#[macro_use]
mod common;
mod soft_connect;
mod soft_dc;
mod soft_errors;
mod soft_transfer;
mod soft_two_processes;
mod soft_versions;
