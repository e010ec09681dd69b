//! The staging pool: registered host buffers that RDMA moves bytes through.
//!
//! The pool is the engine's RDMA memory, shared by every transfer and
//! waited for fairly (a FIFO semaphore); its size is `chunk_size × buffers`.
//! The buffers allow peers nothing: only the engine's own work requests
//! touch them, as the source of a WRITE or the target of a READ.

use hipobj_fabric::{AccessFlags, ProtectionDomain, RegisteredBuffer, Sge};
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
}

/// Why `acquire_for` failed.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// The pool stayed empty.
    #[error(transparent)]
    Pool(PoolError),
    /// Retiring a work request failed.
    #[error(transparent)]
    Move(super::mover::MoveError),
}

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
    _permit: OwnedSemaphorePermit,
}

impl StagingPool {
    /// Registers `count` buffers of `chunk` bytes.
    pub fn new(
        pd: &ProtectionDomain,
        chunk: usize,
        count: usize,
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
            }),
        })
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

    /// A buffer if one is free now.
    pub fn try_acquire(&self) -> Option<Staging> {
        let permit = self.shared.permits.clone().try_acquire_owned().ok()?;
        let buf = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        Some(Staging {
            buf,
            shared: self.shared.clone(),
            _permit: permit,
        })
    }

    /// A buffer for a transfer whose completed work needs nothing more (the
    /// WRITEs of a GET): if none is free, the oldest work request is retired
    /// first (which frees one) rather than waiting on the pool while holding
    /// buffers, so transfers sharing the pool cannot wait for each other in
    /// a circle. A READ's completed buffer holds data: PUT must deliver it,
    /// not use this.
    pub async fn acquire_for(
        &self,
        mover: &mut super::mover::Mover,
        write: bool,
        wait: Duration,
    ) -> Result<Staging, AcquireError> {
        loop {
            if let Some(s) = self.try_acquire() {
                return Ok(s);
            }
            if mover.inflight() == 0 {
                return self.acquire(wait).await.map_err(AcquireError::Pool);
            }
            mover
                .complete_oldest(write)
                .await
                .map_err(AcquireError::Move)?;
        }
    }

    /// Waits (in FIFO order with other transfers) for a buffer.
    pub async fn acquire(&self, wait: Duration) -> Result<Staging, PoolError> {
        let permit = tokio::time::timeout(wait, self.shared.permits.clone().acquire_owned())
            .await
            .map_err(|_| PoolError::Timeout(wait))?
            .map_err(|_| PoolError::Timeout(wait))?;
        let buf = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        Ok(Staging {
            buf,
            shared: self.shared.clone(),
            _permit: permit,
        })
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

#[allow(unsafe_code)] // the slice over the staging memory
impl AsRef<[u8]> for Filled {
    fn as_ref(&self) -> &[u8] {
        let b = self.staging.buf().buf();
        // SAFETY: the memory is the staging buffer's own allocation of at
        // least `len` bytes (len is capped at its capacity). Nothing writes
        // it while this exists: the buffer allows peers no access, the READ
        // that filled it has completed, and it is out of the pool until this
        // owner drops.
        unsafe { std::slice::from_raw_parts(b.as_ptr(), self.len) }
    }
}
