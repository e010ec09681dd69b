//! Checksums of the real bytes an RDMA PUT reads, checked against the
//! `x-amz-checksum-*` header the client sent: the shared
//! [`crate::checksum`] helpers, re-exported under their RDMA path.

pub use crate::checksum::{expected, Algorithm, Expected, Hasher};
