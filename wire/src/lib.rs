//! Wire formats of S3 over RDMA.
//!
//! Everything a peer puts on the wire is untrusted: every parser here is
//! total (never panics), checks lengths before it reads, and rejects anything
//! the formats do not allow instead of guessing.

#![forbid(unsafe_code)]

pub mod gid;
mod hex;

pub use gid::Gid;
