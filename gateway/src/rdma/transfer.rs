//! What a GET or PUT transfer works with: the engine's pool and timers,
//! the access key's share, the store.

use std::sync::Arc;
use std::time::Duration;

use super::mapped::MappedCache;
use super::staging::{Share, StagingPool};
use crate::upstream::Upstream;

/// What a GET or PUT transfer works with.
pub(crate) struct Transfer<'a> {
    /// The staging pool of the device the transfer is on.
    pub pool: &'a StagingPool,
    /// That device's name, for metrics.
    pub device: &'a str,
    /// Chunks in flight per transfer.
    pub depth: usize,
    /// The progress deadline of a transfer.
    pub progress_timeout: Duration,
    /// Whether a GET from the embedded store may send from the mapped file.
    pub map_files: bool,
    /// The device's kept mappings, in the pool's PD.
    pub mapped: &'a MappedCache,
    /// How long a transfer waits for a staging buffer.
    pub pool_timeout: Duration,
    /// The access key's share of the staging pool.
    pub share: &'a Share,
    /// The store.
    pub upstream: &'a Arc<dyn Upstream>,
    /// The request's id, for the answer.
    pub request_id: &'a str,
    /// A hipobj-rc-v2 GET: exactly this many bytes, the last piece written
    /// with this immediate, and their checksum in the answer.
    pub v2: Option<V2Get>,
}

/// What a hipobj-rc-v2 GET asks of the data phase beyond a v1 GET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct V2Get {
    /// The bytes the client expects (the object or range must be exactly
    /// these).
    pub size: u64,
    /// The immediate of the last WRITE (the cookie).
    pub imm: u32,
}
