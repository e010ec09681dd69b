//! Where a browser-based upload's file waits until its length is known
//! (the store's PUT needs a `Content-Length`, which a form does not give),
//! and the bounds on it.
//!
//! Up to [`MAX_IN_MEMORY`] the file is kept in memory; beyond it in an
//! unnamed temporary file in the spool directory (`--post-spool-dir`,
//! default `$TMPDIR`). Every byte written there is first reserved from the
//! process-wide [`SpoolBudget`] (`--post-spool-mib`): an upload that would
//! go past it fails at once with 503 `SlowDown`, so that uploads trickled
//! in under the body timeout on many connections cannot fill the disk.
//! The reservation is held until the file is closed, after the store's
//! answer. Each form upload also has a total deadline
//! (`--post-upload-timeout`), enforced by the engine.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};

use crate::body::Body;
use crate::s3err::S3Error;

/// The most of a file kept in memory; a larger one is spooled to an
/// unnamed temporary file.
pub const MAX_IN_MEMORY: usize = 1 << 20;

/// The chunks a spooled file is sent to the store in.
const READ_CHUNK: usize = 256 << 10;

/// The spool's settings, shared by every form upload of the engine.
#[derive(Debug, Clone)]
pub struct SpoolSettings {
    /// The bytes of spooled files.
    pub budget: Arc<SpoolBudget>,
    /// Where the temporary files go (`None`: `$TMPDIR`).
    pub dir: Option<PathBuf>,
    /// How long one form upload may take, from its head to the store's
    /// answer.
    pub deadline: Duration,
}

/// The bytes all form uploads together may hold in temporary files.
#[derive(Debug)]
pub struct SpoolBudget {
    limit: u64,
    used: AtomicU64,
}

impl SpoolBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<SpoolBudget> {
        Arc::new(SpoolBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Reserves `n` more bytes for `held`; false (nothing reserved) when
    /// the budget has not that much left.
    fn reserve(&self, held: &mut Reservation, n: u64) -> bool {
        let mut now = self.used.load(Ordering::Acquire);
        loop {
            let Some(next) = now.checked_add(n).filter(|v| *v <= self.limit) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(now, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    held.bytes += n;
                    crate::metrics::post_spool_bytes(next);
                    return true;
                }
                Err(v) => now = v,
            }
        }
    }
}

/// Bytes of the budget one upload holds, given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<SpoolBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let after = self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel) - self.bytes;
        crate::metrics::post_spool_bytes(after);
    }
}

/// Where the file part was kept until its length is known.
#[derive(Debug)]
pub enum Spooled {
    /// Up to [`MAX_IN_MEMORY`] bytes.
    Memory(Vec<u8>),
    /// Beyond: an unnamed temporary file (gone when closed), read from
    /// its start, and its share of the budget.
    File(tokio::fs::File, Reservation),
}

impl Spooled {
    /// The request body of `len` bytes, read from the file in chunks of
    /// `READ_CHUNK`; the file and its reservation go when the body is
    /// dropped.
    pub fn into_body(self, len: u64) -> Body {
        match self {
            Spooled::Memory(v) => Body::from(v),
            Spooled::File(f, held) => {
                let chunks =
                    futures::stream::unfold((f, len, held), |(mut f, left, held)| async move {
                        if left == 0 {
                            return None;
                        }
                        let n = usize::try_from(left.min(READ_CHUNK as u64)).unwrap_or(READ_CHUNK);
                        let mut buf = vec![0u8; n];
                        match f.read_exact(&mut buf).await {
                            Ok(_) => Some((
                                Ok::<Bytes, std::io::Error>(Bytes::from(buf)),
                                (f, left - n as u64, held),
                            )),
                            Err(e) => Some((Err(e), (f, 0, held))),
                        }
                    });
                Body::from_stream(chunks)
            }
        }
    }
}

/// What [`spool`] reads the file part from.
pub trait FilePart {
    /// The next chunk, `None` at the end.
    fn next_chunk(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<Bytes>, S3Error>> + Send;
}

/// Reads the `file` part whole into memory, or into a temporary file past
/// [`MAX_IN_MEMORY`], its length held within `min..=max` (the policy's
/// `content-length-range`, and S3's 5 GiB): past `max` it stops at once
/// with 400 `EntityTooLarge`; short of `min` at its end, 400
/// `EntityTooSmall`; past the spool's budget, 503 `SlowDown`. The store
/// has seen nothing either way.
pub async fn spool(
    file: &mut impl FilePart,
    min: u64,
    max: u64,
    settings: &SpoolSettings,
) -> Result<(Spooled, u64), S3Error> {
    let mut len: u64 = 0;
    let mut memory: Vec<u8> = Vec::new();
    let mut disk: Option<(tokio::fs::File, Reservation)> = None;
    while let Some(chunk) = file.next_chunk().await? {
        len = len
            .checked_add(chunk.len() as u64)
            .filter(|l| *l <= max)
            .ok_or_else(|| {
                S3Error::new(
                    StatusCode::BAD_REQUEST,
                    "EntityTooLarge",
                    "Your proposed upload exceeds the maximum allowed size",
                )
            })?;
        if disk.is_none() && memory.len() + chunk.len() > MAX_IN_MEMORY {
            let mut held = Reservation {
                budget: Arc::clone(&settings.budget),
                bytes: 0,
            };
            if !settings.budget.reserve(&mut held, memory.len() as u64) {
                return Err(spool_full());
            }
            let dir = settings.dir.clone();
            let f = tokio::task::spawn_blocking(move || match dir {
                Some(d) => tempfile::tempfile_in(d),
                None => tempfile::tempfile(),
            })
            .await
            .map_err(|_| S3Error::internal("the upload could not be spooled"))?
            .map_err(|e| spool_failed(&e))?;
            let mut f = tokio::fs::File::from_std(f);
            f.write_all(&memory).await.map_err(|e| spool_failed(&e))?;
            memory = Vec::new();
            disk = Some((f, held));
        }
        match &mut disk {
            Some((f, held)) => {
                if !settings.budget.reserve(held, chunk.len() as u64) {
                    return Err(spool_full());
                }
                f.write_all(&chunk).await.map_err(|e| spool_failed(&e))?
            }
            None => memory.extend_from_slice(&chunk),
        }
    }
    if len < min {
        return Err(S3Error::new(
            StatusCode::BAD_REQUEST,
            "EntityTooSmall",
            "Your proposed upload is smaller than the minimum allowed size",
        ));
    }
    match disk {
        None => Ok((Spooled::Memory(memory), len)),
        Some((mut f, held)) => {
            f.flush().await.map_err(|e| spool_failed(&e))?;
            f.seek(std::io::SeekFrom::Start(0))
                .await
                .map_err(|e| spool_failed(&e))?;
            Ok((Spooled::File(f, held), len))
        }
    }
}

fn spool_full() -> S3Error {
    crate::metrics::post_spool_refused();
    tracing::warn!("a form upload was refused: the spool's budget is spent");
    S3Error::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "SlowDown",
        "Please reduce your request rate: the gateway's spool for form uploads is full",
    )
}

fn spool_failed(e: &std::io::Error) -> S3Error {
    tracing::warn!(error = %e, "the POST upload could not be spooled to a temporary file");
    S3Error::internal("the upload could not be spooled")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file part of `n` chunks of `size` bytes each.
    struct Chunks {
        n: usize,
        size: usize,
    }

    impl FilePart for Chunks {
        async fn next_chunk(&mut self) -> Result<Option<Bytes>, S3Error> {
            if self.n == 0 {
                return Ok(None);
            }
            self.n -= 1;
            Ok(Some(Bytes::from(vec![7u8; self.size])))
        }
    }

    fn settings(limit: u64, dir: &std::path::Path) -> SpoolSettings {
        SpoolSettings {
            budget: SpoolBudget::new(limit),
            dir: Some(dir.to_path_buf()),
            deadline: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn the_budget_bounds_every_upload_together() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(5 << 20, dir.path());
        // Small files stay in memory and take nothing.
        let (small, len) = spool(&mut Chunks { n: 4, size: 1000 }, 0, u64::MAX, &s)
            .await
            .unwrap();
        assert!(matches!(small, Spooled::Memory(_)) && len == 4000);
        assert_eq!(s.budget.used(), 0);
        // 3 MiB spooled: held until its body is dropped.
        let (one, len) = spool(
            &mut Chunks {
                n: 3,
                size: 1 << 20,
            },
            0,
            u64::MAX,
            &s,
        )
        .await
        .unwrap();
        assert_eq!((len, s.budget.used()), (3 << 20, 3 << 20));
        // A second 3 MiB one does not fit beside it: 503 SlowDown, and
        // what it had reserved is given back.
        let e = spool(
            &mut Chunks {
                n: 3,
                size: 1 << 20,
            },
            0,
            u64::MAX,
            &s,
        )
        .await
        .err()
        .unwrap();
        assert_eq!((e.status.as_u16(), e.code), (503, "SlowDown"));
        assert_eq!(s.budget.used(), 3 << 20);
        // The first one's body read and dropped: the budget is whole again.
        use http_body_util::BodyExt as _;
        let body = one.into_body(len).collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 3 << 20);
        assert_eq!(s.budget.used(), 0);
        let (_again, _) = spool(
            &mut Chunks {
                n: 3,
                size: 1 << 20,
            },
            0,
            u64::MAX,
            &s,
        )
        .await
        .unwrap();
        assert_eq!(s.budget.used(), 3 << 20);
        // The files were in the spool directory and are unnamed: nothing
        // is left there.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
