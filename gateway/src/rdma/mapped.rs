//! An object's file mapped and registered as the source of a GET's RDMA
//! WRITEs, so that its bytes go from the page cache to the client's
//! memory in one copy (the same-host path's `process_vm_writev`, or a NIC's
//! DMA), the way `sendfile` serves HTTP, instead of a `pread` into a
//! staging buffer first and a second copy out of it.
//!
//! The mapping is read-only and shared; the region allows no remote access
//! (a WRITE's source needs only the local read every region allows). The
//! gateway never reads the mapping itself: only the provider does, through
//! the kernel or the NIC, so a file cut short under it by someone else
//! fails the copy (`EFAULT`, a local protection error) instead of raising
//! `SIGBUS` in the gateway; and the file's length is checked against the
//! range before it is mapped. The store replaces an object's file by
//! renaming a new one over it, so the mapped inode itself never changes.
//!
//! Where the provider cannot register the mapping (a NIC's driver that
//! refuses file-backed memory, a locked-memory limit), the caller reads
//! into staging buffers as before.

use hipobj_fabric::{AccessFlags, MemoryRegion, ProtectionDomain, Sge};
use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::io;

/// Objects (or ranges) smaller than this are read into staging: mapping
/// and registering costs more than the copy saves.
pub const MAP_MIN: u64 = 1 << 20;

/// A file range, mapped and registered. Dropping it deregisters the region,
/// then unmaps the file; a work request that may still name it (never
/// completed or flushed) keeps it alive for good instead
/// ([`MappedSource::leak`]).
#[derive(Debug)]
pub struct MappedSource {
    // Fields drop in order: the region is deregistered before the mapping
    // goes.
    mr: MemoryRegion,
    /// The mapping. Never read through a reference (only its address is
    /// taken): the provider alone reads it.
    map: Mmap,
}

impl MappedSource {
    /// Maps `len` bytes of `file` from `start` and registers them in `pd`
    /// (blocking: call it from a blocking task).
    pub fn map(pd: &ProtectionDomain, file: &File, start: u64, len: u64) -> io::Result<Self> {
        let end = start
            .checked_add(len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the range overflows"))?;
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty range",
            ));
        }
        if file.metadata()?.len() < end {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the object's file is shorter than its record says",
            ));
        }
        let n = usize::try_from(len).map_err(io::Error::other)?;
        // SAFETY: a new read-only shared mapping of an open file. The
        // store never writes or truncates an object's file once it is in
        // place (a new version is renamed over it), and the gateway never
        // reads the mapping through a reference: only the provider reads
        // it, through the kernel or a NIC, where a page cut off by someone
        // else fails the copy rather than the process.
        let map = unsafe { MmapOptions::new().offset(start).len(n).map(file)? };
        // SAFETY: the mapping lives as long as the region (declared after
        // it, dropped after it, and a leaked source keeps both); the region
        // grants no remote access and the provider only reads a WRITE's
        // source, which the read-only mapping allows.
        let mr = unsafe { pd.reg_mr(map.as_ptr().cast_mut(), n, AccessFlags::EMPTY) }
            .map_err(io::Error::other)?;
        crate::metrics::store_mapped_region(true);
        Ok(MappedSource { mr, map })
    }

    /// The range's length.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Whether the range is empty (never: an empty one is not mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// An SGE over `len` bytes at `at` in the range.
    pub fn sge(&self, at: u64, len: usize) -> hipobj_fabric::Result<Sge> {
        let end = at.checked_add(len as u64);
        let (Some(end), Ok(length), Ok(at_usize)) = (end, u32::try_from(len), usize::try_from(at))
        else {
            return Err(hipobj_fabric::FabricError::Invalid {
                verb: "mapped source",
                why: format!("{len} bytes at {at} do not make an SGE"),
            });
        };
        if end > self.len() {
            return Err(hipobj_fabric::FabricError::Invalid {
                verb: "mapped source",
                why: format!("{len} bytes at {at} run past the {}-byte range", self.len()),
            });
        }
        Ok(Sge {
            addr: self.map.as_ptr().wrapping_add(at_usize) as u64,
            length,
            lkey: self.mr.lkey(),
        })
    }

    /// Keeps the mapping and its registration for the life of the process:
    /// a work request that was never completed or flushed may still name it.
    pub fn leak(self: std::sync::Arc<Self>) {
        std::mem::forget(self);
    }
}

impl Drop for MappedSource {
    fn drop(&mut self) {
        // The fields drop next: the region, then the mapping.
        crate::metrics::store_mapped_region(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn device() -> hipobj_fabric::Device {
        let p = hipobj_fabric::soft::SoftProvider::from_env().unwrap();
        hipobj_fabric::Device::open(&p, "soft0").unwrap()
    }

    #[test]
    fn a_range_maps_with_its_skew_and_bounds() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let dev = device();
        let pd = dev.alloc_pd().unwrap();
        let m = MappedSource::map(&pd, &f, 5000, 7000).unwrap();
        assert_eq!(m.len(), 7000);
        let sge = m.sge(100, 50).unwrap();
        // SAFETY: the test reads the mapping it made, which lives for the
        // read; nothing writes the file meanwhile.
        let seen = unsafe { std::slice::from_raw_parts(sge.addr as *const u8, 50) };
        assert_eq!(seen, &data[5100..5150]);
        assert!(m.sge(6990, 11).is_err(), "past the range");
        assert!(m.sge(u64::MAX, 2).is_err(), "overflow");
        // A range past the file's end, or empty, is not mapped.
        let e = MappedSource::map(&pd, &f, 5000, 70_000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(MappedSource::map(&pd, &f, 0, 0).is_err());
    }
}
