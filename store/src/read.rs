//! An object's bytes: as a response body, 1 MiB positioned reads by
//! blocking tasks, the next one started as each chunk is handed on; and as
//! a [`FileRange`] that a reader in the same process (the gateway's RDMA
//! engine) reads straight into its own memory, without the body stream.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{FutureExt, Stream};
use tokio::task::JoinHandle;

/// How much one read takes.
pub const CHUNK: u64 = 1 << 20;

/// Objects up to this size are read whole by the blocking task that opens
/// them ([`FileRange::with_contents`]), so that their GET needs no second
/// trip to the blocking pool: on a 2-core machine that trip (a thread
/// woken to read, the request's task woken again) cost more than reading
/// the bytes.
pub const READ_WITH_OPEN_MAX: u64 = 256 << 10;

type Pending = JoinHandle<io::Result<Bytes>>;

/// `len` bytes of an open object file from `start`: the bytes a GetObject
/// answer's body carries, the range and part selection applied. The store
/// puts one in the extensions of each GetObject response, sharing the open
/// file with the body (the same version of the object, whatever renames
/// happen meanwhile). Reads are positioned (`pread`), so any number of
/// readers share it.
#[derive(Clone, Debug)]
pub struct FileRange {
    file: Arc<File>,
    start: u64,
    len: u64,
    /// The stored `x-amz-checksum-crc64nvme` (base64) of the whole object,
    /// when the range is the whole object and the store has one.
    object_crc64nvme: Option<String>,
    /// The whole file's bytes, when they were read with the open (small
    /// objects): the range is served from them without another read.
    contents: Option<Bytes>,
}

impl FileRange {
    /// `len` bytes of `file` from `start`.
    pub fn new(file: File, start: u64, len: u64) -> FileRange {
        FileRange {
            file: Arc::new(file),
            start,
            len,
            object_crc64nvme: None,
            contents: None,
        }
    }

    /// The range, whose file holds exactly `contents` (read with the open,
    /// from the same file): its bytes are taken from them.
    #[must_use]
    pub fn with_contents(mut self, contents: Bytes) -> FileRange {
        self.contents = Some(contents);
        self
    }

    /// The range's bytes, when they are already in memory (a small object,
    /// read with its open): a reader takes them without a blocking read.
    pub fn bytes(&self) -> Option<Bytes> {
        let c = self.contents.as_ref()?;
        let start = usize::try_from(self.start).ok()?;
        let end = start.checked_add(usize::try_from(self.len).ok()?)?;
        (end <= c.len()).then(|| c.slice(start..end))
    }

    /// The range, which is the whole object, whose stored CRC-64/NVME
    /// (base64, as `x-amz-checksum-crc64nvme` says it) is `crc`.
    #[must_use]
    pub fn with_object_crc64nvme(mut self, crc: Option<String>) -> FileRange {
        self.object_crc64nvme = crc;
        self
    }

    /// The stored CRC-64/NVME of the object, when the range is all of it
    /// (base64, as `x-amz-checksum-crc64nvme` says it): what a reader that
    /// does not read the bytes itself (it maps them) can name as their
    /// checksum, which the final reader then checks end to end.
    pub fn object_crc64nvme(&self) -> Option<&str> {
        self.object_crc64nvme.as_deref()
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where in the file the range starts.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// How many bytes the range holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `buf` from byte `at` of the range (blocking, unless the bytes
    /// are in memory ([`FileRange::bytes`]): call it from a blocking task).
    /// A read past the range is an `InvalidInput` error; a file shorter
    /// than its record says, `UnexpectedEof`.
    pub fn read_into(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = at.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes at {at} run past the {}-byte range",
                    buf.len(),
                    self.len
                ),
            ));
        }
        if let Some(bytes) = self.bytes() {
            // In range: `at + buf.len() <= len`, checked above.
            let at = at as usize;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            return Ok(());
        }
        let pos = self
            .start
            .checked_add(at)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range offset overflows"))?;
        self.file.read_exact_at(buf, pos).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the object's file is shorter than its record says",
                )
            } else {
                e
            }
        })
    }

    fn read_chunk(&self, at: u64, n: u64) -> io::Result<Bytes> {
        let want = usize::try_from(n).map_err(io::Error::other)?;
        let mut buf = vec![0u8; want];
        self.read_into(at, &mut buf)?;
        Ok(Bytes::from(buf))
    }
}

/// A [`FileRange`] as a stream of chunks of up to [`CHUNK`] bytes. Nothing
/// is read until the stream is first polled, so a reader that takes the
/// range itself and drops the body reads each byte once. A file shorter
/// than its record ends the stream in an error.
#[derive(Debug)]
pub struct FileStream {
    range: FileRange,
    next: Option<Pending>,
    /// Bytes of the range handed to a read so far.
    started: u64,
}

impl FileStream {
    /// The bytes of `range`. Must be polled within a Tokio runtime.
    pub fn new(range: FileRange) -> FileStream {
        FileStream {
            range,
            next: None,
            started: 0,
        }
    }

    /// Starts the read of the next chunk, if any is left.
    fn start_next(&mut self) {
        let left = self.range.len - self.started;
        if left == 0 {
            return;
        }
        let (at, n) = (self.started, left.min(CHUNK));
        self.started += n;
        let range = self.range.clone();
        self.next = Some(tokio::task::spawn_blocking(move || range.read_chunk(at, n)));
    }
}

impl Stream for FileStream {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.next.is_none() && self.started == 0 && self.range.len > 0 {
            if let Some(bytes) = self.range.bytes() {
                self.started = self.range.len;
                return Poll::Ready(Some(Ok(bytes)));
            }
            self.start_next();
        }
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
            Ok(Err(e)) => {
                // Nothing after an error.
                self.started = self.range.len;
                Poll::Ready(Some(Err(e)))
            }
            Ok(Ok(bytes)) => {
                self.start_next();
                Poll::Ready(Some(Ok(bytes)))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.range.len - self.started).unwrap_or(usize::MAX);
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
        let s = FileStream::new(FileRange::new(
            File::open(&p).unwrap(),
            5,
            data.len() as u64 - 5,
        ));
        let chunks: Vec<Bytes> = s.map(|c| c.unwrap()).collect().await;
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[0].len() as u64, CHUNK);
        assert_eq!(chunks.concat(), &data[5..]);

        let s = FileStream::new(FileRange::new(
            File::open(&p).unwrap(),
            0,
            data.len() as u64 + 1,
        ));
        let all: Vec<io::Result<Bytes>> = s.collect().await;
        assert!(all.last().unwrap().is_err());

        let s = FileStream::new(FileRange::new(File::open(&p).unwrap(), 0, 0));
        assert_eq!(s.collect::<Vec<_>>().await.len(), 0);
    }

    #[test]
    fn a_range_reads_in_place_and_only_inside_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let r = FileRange::new(File::open(&p).unwrap(), 1000, 5000);
        let mut buf = vec![0u8; 3000];
        r.read_into(2000, &mut buf).unwrap();
        assert_eq!(buf, &data[3000..6000]);
        let e = r.read_into(2001, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = r.read_into(u64::MAX, &mut buf[..1]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // A record longer than the file.
        let long = FileRange::new(File::open(&p).unwrap(), 9000, 2000);
        let mut tail = vec![0u8; 2000];
        let e = long.read_into(0, &mut tail).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn nothing_is_read_before_the_first_poll() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 3 * CHUNK as usize]).unwrap();
        let s = FileStream::new(FileRange::new(File::open(&p).unwrap(), 0, 3 * CHUNK));
        assert!(s.next.is_none() && s.started == 0);
        let chunks: Vec<Bytes> = s.map(|c| c.unwrap()).collect().await;
        assert_eq!(chunks.len(), 3);
    }

    #[tokio::test]
    async fn a_range_of_contents_read_with_the_open_is_served_from_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        // The file is emptied after the open: whatever is served below can
        // only have come from the contents handed over.
        let file = File::open(&p).unwrap();
        std::fs::write(&p, b"").unwrap();
        let r = FileRange::new(file, 1000, 5000).with_contents(Bytes::from(data.clone()));
        assert_eq!(r.bytes().unwrap(), &data[1000..6000]);
        let mut buf = vec![0u8; 3000];
        r.read_into(2000, &mut buf).unwrap();
        assert_eq!(buf, &data[3000..6000]);
        let e = r.read_into(2001, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let chunks: Vec<Bytes> = FileStream::new(r).map(|c| c.unwrap()).collect().await;
        assert_eq!(chunks.concat(), &data[1000..6000]);
        // Contents shorter than the range are not used: the file is read,
        // and here it has nothing left.
        let short = FileRange::new(File::open(&p).unwrap(), 0, 100)
            .with_contents(Bytes::from_static(b"12345"));
        assert!(short.bytes().is_none());
        let all: Vec<io::Result<Bytes>> = FileStream::new(short).collect().await;
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].as_ref().unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        // An empty range ends at once.
        let empty = FileRange::new(File::open(&p).unwrap(), 0, 0).with_contents(Bytes::new());
        assert_eq!(FileStream::new(empty).collect::<Vec<_>>().await.len(), 0);
    }
}
