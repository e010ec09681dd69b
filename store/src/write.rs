//! A request body streamed into a temporary file: gathered into large
//! batches; each batch's MD5 is computed by one blocking task while
//! another computes the checksums asked for and writes it through a 1 MiB
//! buffer, and the next batch arrives meanwhile.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

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

/// The MD5 of the bytes so far: the ETag, and the slowest of a batch's
/// work (one core hashes MD5 at about a fifth of the rate it copies).
struct Etag {
    md5: Md5,
}

impl Etag {
    fn absorb(mut self, batch: &[Bytes]) -> Etag {
        for b in batch {
            self.md5.update(b);
        }
        self
    }
}

/// The file and the checksums the client asked for.
struct Sink {
    file: BufWriter<File>,
    sums: ChecksumHasher,
}

impl Sink {
    fn absorb(mut self, batch: &[Bytes]) -> io::Result<Sink> {
        for b in batch {
            self.sums.update(b);
            self.file.write_all(b)?;
        }
        Ok(self)
    }
}

/// One batch's work in flight: the MD5 on one blocking thread, the
/// checksums and the file write on another, so that where there are two
/// cores the write and the checksums cost a PUT no time beside the MD5.
/// Both hold the same batch (the chunks are reference-counted).
struct Batch {
    etag: JoinHandle<Etag>,
    sink: JoinHandle<io::Result<Sink>>,
}

impl Batch {
    fn start(etag: Etag, sink: Sink, chunks: Vec<Bytes>) -> Batch {
        let chunks: Arc<[Bytes]> = chunks.into();
        let for_etag = chunks.clone();
        Batch {
            etag: tokio::task::spawn_blocking(move || etag.absorb(&for_etag)),
            sink: tokio::task::spawn_blocking(move || sink.absorb(&chunks)),
        }
    }

    /// Both halves, once both are done.
    async fn finish(self) -> io::Result<(Etag, Sink)> {
        let sink = join(self.sink).await;
        let etag = self.etag.await.map_err(io::Error::other)?;
        Ok((etag, sink?))
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
    let sink = join(tokio::task::spawn_blocking(move || {
        Ok(Sink {
            file: BufWriter::with_capacity(BATCH, File::create_new(path)?),
            sums,
        })
    }))
    .await?;
    let mut idle = Some((
        Etag {
            md5: Md5::default(),
        },
        sink,
    ));
    let mut busy: Option<Batch> = None;
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
            let (etag, sink) = match busy.take() {
                Some(b) => b.finish().await?,
                None => idle.take().ok_or_else(|| io::Error::other("no sink"))?,
            };
            batch_len = 0;
            busy = Some(Batch::start(etag, sink, std::mem::take(&mut batch)));
        }
    }
    let (etag, sink) = match busy.take() {
        Some(b) => b.finish().await?,
        None => idle.take().ok_or_else(|| io::Error::other("no sink"))?,
    };
    let (etag, sink) = Batch::start(etag, sink, batch).finish().await?;
    let checksums = join(tokio::task::spawn_blocking(move || {
        let file = sink.file.into_inner().map_err(|e| e.into_error())?;
        if fsync {
            file.sync_all()?;
        }
        Ok(sink.sums.finalize())
    }))
    .await?;
    Ok(Written {
        tmp,
        size,
        md5: etag.md5.finalize(),
        checksums,
    })
}
