//! What a GET or PUT transfer works with: the engine's pool and timers,
//! the access key's share, the store.

use std::sync::Arc;
use std::time::Duration;

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
    /// How long a transfer waits for a staging buffer.
    pub pool_timeout: Duration,
    /// The access key's share of the staging pool.
    pub share: &'a Share,
    /// The store.
    pub upstream: &'a Arc<dyn Upstream>,
    /// The request's id, for the answer.
    pub request_id: &'a str,
}
