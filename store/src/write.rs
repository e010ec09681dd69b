//! A request body streamed into a temporary file: gathered into large
//! batches, each hashed (MD5 and the checksums asked for) and written by a
//! blocking task through a 1 MiB buffer while the next batch arrives.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use bytes::Bytes;
use futures::StreamExt;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::StreamingBlob;
use tokio::task::JoinHandle;

use crate::fsio::TmpPath;

/// How many bytes are gathered before a blocking task writes them, and
/// the size of the file buffer.
pub const BATCH: usize = 1 << 20;

/// A body written aside.
#[derive(Debug)]
pub struct Written {
    /// The file, removed unless renamed into place.
    pub tmp: TmpPath,
    /// How many bytes it holds.
    pub size: u64,
    /// Their MD5.
    pub md5: [u8; 16],
    /// The checksums asked for.
    pub checksums: s3s::dto::Checksum,
}

/// Why a body was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The body ended in an error (the client went away, a chunk's
    /// signature or the payload hash did not match).
    #[error("request body: {0}")]
    Body(s3s::StdError),
    /// The body is longer than allowed.
    #[error("the body is longer than {0} bytes")]
    TooLarge(u64),
    /// The file could not be written.
    #[error("writing the object: {0}")]
    Io(#[from] io::Error),
}

struct Sink {
    file: BufWriter<File>,
    md5: Md5,
    sums: ChecksumHasher,
}

impl Sink {
    fn absorb(&mut self, batch: &[Bytes]) -> io::Result<()> {
        for b in batch {
            self.md5.update(b);
            self.sums.update(b);
            self.file.write_all(b)?;
        }
        Ok(())
    }
}

async fn join<T>(h: JoinHandle<io::Result<T>>) -> io::Result<T> {
    h.await.map_err(io::Error::other)?
}

/// Streams `body` into a new temporary file in `tmp_dir`, at most `limit`
/// bytes, hashing MD5 and the checksums `sums` was set up for; flushed to
/// disk when `fsync`. On any error the file is removed.
pub async fn write_body(
    tmp_dir: &Path,
    mut body: StreamingBlob,
    sums: ChecksumHasher,
    limit: u64,
    fsync: bool,
) -> Result<Written, WriteError> {
    let tmp = TmpPath::new_in(tmp_dir)?;
    let path = tmp.path().to_owned();
    let mut idle = Some(
        join(tokio::task::spawn_blocking(move || {
            Ok(Sink {
                file: BufWriter::with_capacity(BATCH, File::create_new(path)?),
                md5: Md5::default(),
                sums,
            })
        }))
        .await?,
    );
    let mut busy: Option<JoinHandle<io::Result<Sink>>> = None;
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batch_len = 0usize;
    let mut size: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(WriteError::Body)?;
        size = size
            .checked_add(chunk.len() as u64)
            .filter(|s| *s <= limit)
            .ok_or(WriteError::TooLarge(limit))?;
        batch_len += chunk.len();
        batch.push(chunk);
        if batch_len >= BATCH {
            let mut sink = match busy.take() {
                Some(h) => join(h).await?,
                None => idle.take().ok_or_else(|| io::Error::other("no sink"))?,
            };
            let full = std::mem::take(&mut batch);
            batch_len = 0;
            busy = Some(tokio::task::spawn_blocking(move || {
                sink.absorb(&full)?;
                Ok(sink)
            }));
        }
    }
    let mut sink = match busy.take() {
        Some(h) => join(h).await?,
        None => idle.take().ok_or_else(|| io::Error::other("no sink"))?,
    };
    let (md5, checksums) = join(tokio::task::spawn_blocking(move || {
        sink.absorb(&batch)?;
        let file = sink.file.into_inner().map_err(|e| e.into_error())?;
        if fsync {
            file.sync_all()?;
        }
        Ok((sink.md5.finalize(), sink.sums.finalize()))
    }))
    .await?;
    Ok(Written {
        tmp,
        size,
        md5,
        checksums,
    })
}
