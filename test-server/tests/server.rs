//! The test server end to end: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

mod common;
mod rdma_dialects;
mod rdma_e2e;
mod rdma_failures;
mod tenants;
