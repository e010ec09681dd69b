//! The hipobj command: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

mod cli;
mod endpoints;
mod s3_commands;
