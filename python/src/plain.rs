//! Transfers without the client library: plain HTTP straight into or out
//! of the caller's memory.

use hipobj_s3::{Error, S3Client, Selection};

use crate::types::Moved;

/// GET over plain HTTP into the `room` bytes at `addr`.
///
/// # Safety
///
/// `[addr, addr + room)` must be writable memory that stays allocated, and
/// that nothing else reads or writes, until the returned future is done or
/// dropped.
pub async unsafe fn get_into(
    s3: &S3Client,
    bucket: &str,
    key: &str,
    addr: usize,
    room: usize,
    range: Option<(u64, u64)>,
) -> Result<Moved, Error> {
    let sel = match range {
        Some((first, last)) => Selection::Range { first, last },
        None => Selection::Whole,
    };
    let mut w = Bounded {
        addr,
        room,
        pos: 0,
        overflow: false,
    };
    let r = s3.get_object_http(bucket, key, sel, &mut w).await;
    match r {
        Err(_) if w.overflow => Err(Error::BufferTooSmall {
            needed: None,
            available: room as u64,
        }),
        r => Ok(r?.into()),
    }
}

/// An `AsyncWrite` into `room` bytes at `addr` (a caller's buffer, exported
/// for the duration of the GET): more bytes than room are an error.
/// (The caller of [`get_into`] promised the memory.)
struct Bounded {
    addr: usize,
    room: usize,
    pos: usize,
    /// Set when the object did not fit.
    overflow: bool,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        if buf.len() > me.room - me.pos {
            me.overflow = true;
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the object does not fit in the {} bytes from the offset",
                me.room
            ))));
        }
        // SAFETY: `[addr, addr + room)` is exported writable for the whole
        // GET (the caller holds the view), and `pos + len <= room`.
        unsafe {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), (me.addr + me.pos) as *mut u8, buf.len())
        };
        me.pos += buf.len();
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
