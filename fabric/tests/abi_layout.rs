//! The verbs and mlx5dv ABI layouts: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

mod abi;
mod ibverbs_abi;
mod mlx5dv_abi;
