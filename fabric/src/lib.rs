//! The RDMA seam and its providers.
//!
//! [`seam`] is what a provider implements, shaped like libibverbs and
//! hipObject's `Verbs` interface; [`verbs`] holds the owning handles the
//! rest of the project uses; [`rc`] moves an RC queue pair through its
//! states with hipObject's attributes; [`soft`] is the software provider,
//! which runs RC and DC over TCP with the rules a NIC enforces.

pub mod dc;
pub mod error;
pub mod gid_table;
pub mod ibverbs;
pub mod pattern;
pub mod rc;
pub mod seam;
pub mod soft;
pub mod types;
pub mod verbs;

pub use error::{FabricError, Result};
pub use hipobj_wire::Gid;
pub use types::*;
pub use verbs::{
    CompletionQueue, DcTarget, Device, HostBuffer, MemoryRegion, ProtectionDomain, QueuePair,
    RegisteredBuffer,
};
