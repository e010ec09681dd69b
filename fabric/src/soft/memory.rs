//! Registered memory: the key table's entries, the checks a key must pass,
//! and moving bytes between a socket and registered memory without a
//! temporary copy.
//!
//! Memory is only ever touched by `recv(2)` into it and `send(2)` out of it,
//! through raw pointers, exactly as a NIC's DMA would: no Rust reference to
//! the application's memory is formed. Every access holds the region's
//! `live` guard for reading, and deregistration takes it for writing, so
//! deregistration waits for placements in flight and nothing touches the
//! memory after it returns.

use crate::types::{AccessFlags, Sge};
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, RwLock};

/// One registered region, shared by the key table and transfers in flight.
#[derive(Debug)]
pub(crate) struct MrInner {
    /// lkey and rkey (the same value, as on most NICs).
    pub key: u32,
    /// The protection domain it was registered in.
    pub pd_id: u64,
    /// Its I/O virtual address (the registered address).
    pub iova: u64,
    /// The host address of its first byte.
    host: usize,
    /// Its length.
    pub len: usize,
    /// What it allows.
    pub access: AccessFlags,
    /// False once deregistered. Held for reading while bytes move.
    live: RwLock<bool>,
}

/// Why a key check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No live region has this key.
    UnknownKey,
    /// The region belongs to another protection domain.
    OtherPd,
    /// The region or the QP does not allow the operation.
    Access,
    /// The range is not inside the region.
    Bounds,
}

impl MrInner {
    pub fn new(key: u32, pd_id: u64, host: *mut u8, len: usize, access: AccessFlags) -> MrInner {
        MrInner {
            key,
            pd_id,
            iova: host as u64,
            host: host as usize,
            len,
            access,
            live: RwLock::new(true),
        }
    }

    /// The host address of `len` bytes at virtual address `va`, if the
    /// range lies inside the region (checked without overflow).
    pub fn host_range(&self, va: u64, len: u64) -> Option<usize> {
        let off = va.checked_sub(self.iova)?;
        let end = off.checked_add(len)?;
        if end > self.len as u64 {
            return None;
        }
        self.host.checked_add(usize::try_from(off).ok()?)
    }

    /// The offset in the region of host address `host` (one of its own).
    #[cfg(feature = "testing")]
    pub fn offset_of(&self, host: usize) -> u64 {
        host.saturating_sub(self.host) as u64
    }

    /// Runs `f` while the region is guaranteed to stay registered; `None`
    /// if it has been deregistered.
    pub fn while_live<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        if *live {
            Some(f())
        } else {
            None
        }
    }

    /// Marks the region dead, waiting for every access in flight.
    pub fn retire(&self) {
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Checks a local or remote access of `len` bytes at `va`.
    pub fn check(
        &self,
        pd_id: u64,
        va: u64,
        len: u64,
        need: AccessFlags,
        qp_access: AccessFlags,
    ) -> Result<usize, KeyError> {
        if self.pd_id != pd_id {
            return Err(KeyError::OtherPd);
        }
        if !self.access.contains(need) || !qp_access.contains(need) {
            return Err(KeyError::Access);
        }
        self.host_range(va, len).ok_or(KeyError::Bounds)
    }
}

/// A local SGE resolved to its region and host address.
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    pub mr: Arc<MrInner>,
    pub host: usize,
    pub len: usize,
}

/// Resolves a work request's SGEs with `lookup`, checking each against its
/// region (protection domain, bounds, and local write when `write`).
pub(crate) fn resolve(
    sges: &[Sge],
    pd_id: u64,
    write: bool,
    lookup: impl Fn(u32) -> Option<Arc<MrInner>>,
) -> Result<Vec<Piece>, KeyError> {
    let need = if write {
        AccessFlags::LOCAL_WRITE
    } else {
        AccessFlags::EMPTY
    };
    sges.iter()
        .filter(|s| s.length > 0)
        .map(|s| {
            let mr = lookup(s.lkey).ok_or(KeyError::UnknownKey)?;
            let host = mr.check(pd_id, s.addr, u64::from(s.length), need, need)?;
            Ok(Piece {
                mr,
                host,
                len: s.length as usize,
            })
        })
        .collect()
}

/// Calls `f(piece, host, len)` for each part of `[off, off + len)` of the
/// message that `pieces` describe, in order. Fails with `Bounds` if the
/// pieces are shorter than the range.
pub(crate) fn walk(
    pieces: &[Piece],
    mut off: usize,
    mut len: usize,
    mut f: impl FnMut(&Piece, usize, usize) -> io::Result<()>,
) -> Result<(), WalkError> {
    for p in pieces {
        if len == 0 {
            break;
        }
        if off >= p.len {
            off -= p.len;
            continue;
        }
        let n = (p.len - off).min(len);
        f(p, p.host + off, n).map_err(WalkError::Io)?;
        off = 0;
        len -= n;
    }
    if len == 0 {
        Ok(())
    } else {
        Err(WalkError::Short)
    }
}

/// Why a walk failed.
#[derive(Debug)]
pub(crate) enum WalkError {
    /// The pieces were shorter than the range.
    Short,
    /// The socket failed, or a region was deregistered (`NotFound`).
    Io(io::Error),
}

/// The error a walk step returns when its region was deregistered.
pub(crate) fn dead_region() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "memory region was deregistered")
}

/// Receives exactly `len` bytes from `stream` into `host`.
///
/// # Safety
///
/// `host..host + len` must be writable memory that stays allocated for the
/// call (a live region's range, with its guard held).
pub(crate) unsafe fn recv_into(stream: &TcpStream, host: usize, len: usize) -> io::Result<()> {
    let fd: RawFd = stream.as_raw_fd();
    let mut done = 0usize;
    while done < len {
        // SAFETY: the caller guarantees the range is writable; `done < len`
        // keeps the pointer and count inside it.
        let n = unsafe { libc::recv(fd, (host + done) as *mut libc::c_void, len - done, 0) };
        match n {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => done += n as usize,
        }
    }
    Ok(())
}

/// Sends exactly `len` bytes at `host` on `stream`; `more` says another
/// write follows at once (MSG_MORE), so a header and its payload share packets.
///
/// # Safety
///
/// `host..host + len` must be readable memory that stays allocated for the call.
pub(crate) unsafe fn send_from(
    stream: &TcpStream,
    host: usize,
    len: usize,
    more: bool,
) -> io::Result<()> {
    let fd: RawFd = stream.as_raw_fd();
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    let mut done = 0usize;
    while done < len {
        // SAFETY: the caller guarantees the range is readable; `done < len`
        // keeps the pointer and count inside it.
        let n = unsafe { libc::send(fd, (host + done) as *const libc::c_void, len - done, flags) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            done += n as usize;
        }
    }
    Ok(())
}

/// Sends a small buffer owned by the caller (a header).
pub(crate) fn send_bytes(stream: &TcpStream, bytes: &[u8], more: bool) -> io::Result<()> {
    // SAFETY: `bytes` is a live slice for the duration of the call.
    unsafe { send_from(stream, bytes.as_ptr() as usize, bytes.len(), more) }
}

/// Reads and discards `len` bytes: a dropped packet's payload.
pub(crate) fn drain(stream: &TcpStream, len: usize) -> io::Result<()> {
    let mut scratch = [0u8; 16 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(scratch.len());
        // SAFETY: `scratch` is a local array of at least `n` bytes.
        unsafe { recv_into(stream, scratch.as_mut_ptr() as usize, n)? };
        left -= n;
    }
    Ok(())
}

/// Reads a fixed-size header; `Ok(None)` on a clean end of stream.
pub(crate) fn read_header<const N: usize>(stream: &TcpStream) -> io::Result<Option<[u8; N]>> {
    let mut b = [0u8; N];
    let fd = stream.as_raw_fd();
    let mut done = 0usize;
    while done < N {
        // SAFETY: `b` is a local array of N bytes and `done < N`.
        let n = unsafe {
            libc::recv(
                fd,
                b.as_mut_ptr().add(done) as *mut libc::c_void,
                N - done,
                0,
            )
        };
        match n {
            0 if done == 0 => return Ok(None),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => done += n as usize,
        }
    }
    Ok(Some(b))
}
