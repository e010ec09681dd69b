//! An object's bytes as a response body: 1 MiB reads by blocking tasks,
//! the next one started as each chunk is handed on.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{FutureExt, Stream};
use tokio::task::JoinHandle;

/// How much one read takes.
pub const CHUNK: u64 = 1 << 20;

type Pending = JoinHandle<io::Result<(File, Bytes)>>;

/// `len` bytes of a file from an offset, as a stream of chunks of up to
/// [`CHUNK`] bytes. A file shorter than that ends the stream in an error.
#[derive(Debug)]
pub struct FileStream {
    next: Option<Pending>,
    remaining: u64,
}

fn read_chunk(mut file: File, seek: Option<u64>, n: u64) -> io::Result<(File, Bytes)> {
    if let Some(at) = seek {
        file.seek(SeekFrom::Start(at))?;
    }
    let want = usize::try_from(n).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(want);
    (&mut file).take(n).read_to_end(&mut buf)?;
    if buf.len() != want {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the object's file is shorter than its record says",
        ));
    }
    Ok((file, Bytes::from(buf)))
}

impl FileStream {
    /// `len` bytes of `file` from `start`. Must be called within a Tokio
    /// runtime.
    pub fn new(file: File, start: u64, len: u64) -> FileStream {
        let next = (len > 0).then(|| {
            let n = len.min(CHUNK);
            tokio::task::spawn_blocking(move || read_chunk(file, Some(start), n))
        });
        FileStream {
            next,
            remaining: len,
        }
    }
}

impl Stream for FileStream {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(pending) = self.next.as_mut() else {
            return Poll::Ready(None);
        };
        let done = match pending.poll_unpin(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        self.next = None;
        match done {
            Err(e) => Poll::Ready(Some(Err(io::Error::other(e)))),
            Ok(Err(e)) => Poll::Ready(Some(Err(e))),
            Ok(Ok((file, bytes))) => {
                self.remaining = self.remaining.saturating_sub(bytes.len() as u64);
                if self.remaining > 0 {
                    let n = self.remaining.min(CHUNK);
                    self.next = Some(tokio::task::spawn_blocking(move || {
                        read_chunk(file, None, n)
                    }));
                }
                Poll::Ready(Some(Ok(bytes)))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn reads_ranges_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..(3 * CHUNK as usize + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let s = FileStream::new(File::open(&p).unwrap(), 5, data.len() as u64 - 5);
        let chunks: Vec<Bytes> = s.map(|c| c.unwrap()).collect().await;
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[0].len() as u64, CHUNK);
        assert_eq!(chunks.concat(), &data[5..]);

        let s = FileStream::new(File::open(&p).unwrap(), 0, data.len() as u64 + 1);
        let all: Vec<io::Result<Bytes>> = s.collect().await;
        assert!(all.last().unwrap().is_err());

        let s = FileStream::new(File::open(&p).unwrap(), 0, 0);
        assert_eq!(s.collect::<Vec<_>>().await.len(), 0);
    }
}
