//! The staging pool: registered host buffers that RDMA moves bytes through.
//!
//! A pool is one device's RDMA memory (registered in that device's PD),
//! shared by every transfer on the device and waited for fairly (a FIFO
//! semaphore); its size is `chunk_size × buffers`. No access key holds
//! more than its share (`per_key` buffers): a tenant whose transfers stall
//! cannot starve the others. The pools of several devices can share one
//! set of shares ([`StagingPool::sharing`]): the limit is then the key's
//! over all of them.
//! The buffers allow peers nothing: only the engine's own work requests
//! touch them, as the source of a WRITE or the target of a READ.

use super::shares::KeyShares;
use hipobj_fabric::{AccessFlags, ProtectionDomain, RegisteredBuffer, Sge};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why no buffer was had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Every buffer stayed busy for the whole wait.
    #[error("no staging buffer was free within {0:?}")]
    Timeout(Duration),
    /// The pool could not be built.
    #[error("registering the staging pool failed: {0}")]
    Register(#[from] hipobj_fabric::FabricError),
}

#[derive(Debug)]
struct Shared {
    free: Mutex<Vec<RegisteredBuffer>>,
    permits: Arc<Semaphore>,
    chunk: usize,
    total: usize,
    shares: Arc<KeyShares>,
    quarantined: AtomicUsize,
    /// The PD the buffers are registered in (that of the rail's QPs).
    pd: ProtectionDomain,
}

/// An access key's share of the pool.
#[derive(Debug, Clone)]
pub struct Share(Arc<Semaphore>);

/// The pool.
#[derive(Debug, Clone)]
pub struct StagingPool {
    shared: Arc<Shared>,
}

/// One buffer, returned to the pool on drop.
#[derive(Debug)]
pub struct Staging {
    buf: Option<RegisteredBuffer>,
    shared: Arc<Shared>,
    permit: Option<OwnedSemaphorePermit>,
    _share: OwnedSemaphorePermit,
}

impl StagingPool {
    /// Registers `count` buffers of `chunk` bytes, of which one access key
    /// may hold `per_key` at a time (at least one, at most all).
    pub fn new(
        pd: &ProtectionDomain,
        chunk: usize,
        count: usize,
        per_key: usize,
    ) -> Result<StagingPool, PoolError> {
        let count = count.max(1);
        let shares = Arc::new(KeyShares::new(per_key.clamp(1, count)));
        StagingPool::sharing(pd, chunk, count, shares)
    }

    /// Registers `count` buffers of `chunk` bytes (at least one), whose
    /// holders count against `shares` (shared with other pools).
    pub fn sharing(
        pd: &ProtectionDomain,
        chunk: usize,
        count: usize,
        shares: Arc<KeyShares>,
    ) -> Result<StagingPool, PoolError> {
        let mut free = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            free.push(pd.alloc_buffer(chunk, AccessFlags::LOCAL_WRITE)?);
        }
        let n = free.len();
        Ok(StagingPool {
            shared: Arc::new(Shared {
                free: Mutex::new(free),
                permits: Arc::new(Semaphore::new(n)),
                chunk,
                total: n,
                shares,
                quarantined: AtomicUsize::new(0),
                pd: pd.clone(),
            }),
        })
    }

    /// The protection domain of the buffers, which is that of the rail's
    /// QPs: memory a transfer registers beside them goes there.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.shared.pd
    }

    /// The share of `access_key`.
    pub fn share(&self, access_key: &str) -> Share {
        Share(self.shared.shares.of(access_key))
    }

    /// Buffers one access key may hold at a time.
    pub fn per_key(&self) -> usize {
        self.shared.shares.per_key()
    }

    /// Buffers withdrawn because their work requests were never flushed.
    pub fn quarantined(&self) -> usize {
        self.shared.quarantined.load(Ordering::Relaxed)
    }

    /// Bytes per buffer.
    pub fn chunk(&self) -> usize {
        self.shared.chunk
    }

    /// Buffers in the pool.
    pub fn total(&self) -> usize {
        self.shared.total
    }

    /// Buffers free now.
    pub fn available(&self) -> usize {
        self.shared.permits.available_permits()
    }

    /// A buffer if one is free now (and `share` has room).
    pub fn try_acquire(&self, share: &Share) -> Option<Staging> {
        let mine = share.0.clone().try_acquire_owned().ok()?;
        let permit = self.shared.permits.clone().try_acquire_owned().ok()?;
        Some(self.take(permit, mine))
    }

    fn take(&self, permit: OwnedSemaphorePermit, mine: OwnedSemaphorePermit) -> Staging {
        let buf = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        Staging {
            buf,
            shared: self.shared.clone(),
            permit: Some(permit),
            _share: mine,
        }
    }

    /// Waits (in FIFO order with other transfers) for a buffer, within
    /// `share`; `wait` bounds both waits together.
    pub async fn acquire(&self, share: &Share, wait: Duration) -> Result<Staging, PoolError> {
        let both = async {
            let mine = share.0.clone().acquire_owned().await.ok()?;
            let permit = self.shared.permits.clone().acquire_owned().await.ok()?;
            Some((permit, mine))
        };
        let (permit, mine) = tokio::time::timeout(wait, both)
            .await
            .map_err(|_| PoolError::Timeout(wait))?
            .ok_or(PoolError::Timeout(wait))?;
        Ok(self.take(permit, mine))
    }
}

impl Staging {
    fn buf(&self) -> &RegisteredBuffer {
        // A permit guarantees a buffer: there are as many permits as buffers.
        self.buf
            .as_ref()
            .unwrap_or_else(|| unreachable!("a staging permit without a buffer"))
    }

    /// An SGE over the first `len` bytes.
    pub fn sge(&self, len: usize) -> hipobj_fabric::Result<Sge> {
        self.buf().sge(0, len as u32)
    }

    /// Copies `data` in at `at`.
    pub fn write_at(&mut self, at: usize, data: &[u8]) -> hipobj_fabric::Result<()> {
        self.buf
            .as_mut()
            .unwrap_or_else(|| unreachable!("a staging permit without a buffer"))
            .buf_mut()
            .write_at(at, data)
    }

    /// The first `len` bytes, to fill in place (the store reading an
    /// object straight into the buffer). Only a buffer no posted work
    /// request names is in a [`Staging`] the caller holds mutably.
    pub fn slice_mut(&mut self, len: usize) -> hipobj_fabric::Result<&mut [u8]> {
        self.buf
            .as_mut()
            .unwrap_or_else(|| unreachable!("a staging permit without a buffer"))
            .buf_mut()
            .slice_mut(0, len)
    }

    /// Withdraws the buffer from the pool for good: a work request that was
    /// never completed or flushed may still name it, so it is neither
    /// reused nor deregistered (its memory stays allocated and registered
    /// for the life of the process), and the pool is one buffer smaller.
    pub fn quarantine(mut self) {
        if let Some(b) = self.buf.take() {
            std::mem::forget(b);
        }
        if let Some(p) = self.permit.take() {
            p.forget();
        }
        self.shared.quarantined.fetch_add(1, Ordering::Relaxed);
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.chunk
    }

    /// The first `len` bytes, to hand to the upstream without a copy. The
    /// buffer returns to the pool when the last `Bytes` referring to it drops.
    pub fn into_bytes(self, len: usize) -> bytes::Bytes {
        let len = len.min(self.capacity());
        bytes::Bytes::from_owner(Filled { staging: self, len })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.shared
                .free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(b);
        }
    }
}

/// A staging buffer whose first `len` bytes hold data read by RDMA.
struct Filled {
    staging: Staging,
    len: usize,
}

impl AsRef<[u8]> for Filled {
    fn as_ref(&self) -> &[u8] {
        // `len` is capped at the buffer's capacity, so the slice is always
        // there. Nothing writes the bytes while it lives: the buffer allows
        // peers no access, the READ that filled it has completed, and it is
        // out of the pool until this owner drops.
        self.staging
            .buf()
            .buf()
            .slice(0, self.len)
            .unwrap_or_default()
    }
}
