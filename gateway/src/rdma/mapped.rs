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
//!
//! Mappings are kept a while for the next GET of the same range
//! ([`MappedCache`]): mapping, faulting the page tables in and unmapping 64
//! MiB cost about a fifth of a same-host GET of it (docs/benchmarks.md),
//! and a NIC's registration pins the pages again each time. An entry is
//! found by the file's identity (device and inode of the file the store
//! opened for this GET) and the range. The store replaces an object by
//! renaming a new file over it, so a new version is another inode; and the
//! kept mapping holds the old inode open, so its number cannot be reused
//! by another file while the entry lives: a GET never gets another
//! version's bytes, nor another object's. The mapping grants no remote
//! access, so GETs of any access key may share it: each has been allowed
//! the object by the store, which opened its file.

use hipobj_fabric::{AccessFlags, MemoryRegion, ProtectionDomain, Sge};
use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Objects (or ranges) smaller than this are read into staging: mapping
/// and registering costs more than the copy saves.
pub const MAP_MIN: u64 = 1 << 20;

/// A file range, mapped and registered. Dropping it deregisters the region,
/// then unmaps the file, on a blocking thread where there is a runtime;
/// a work request that may still name it (never completed or flushed)
/// keeps it alive for good instead ([`MappedSource::leak`]).
#[derive(Debug)]
pub struct MappedSource {
    /// The region and the mapping; taken only by `drop`.
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
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
        Ok(MappedSource {
            held: Some(Held { mr, map }),
        })
    }

    fn held(&self) -> &Held {
        self.held
            .as_ref()
            .unwrap_or_else(|| unreachable!("a mapped source is only emptied by its drop"))
    }

    /// The range's length.
    pub fn len(&self) -> u64 {
        self.held().map.len() as u64
    }

    /// Whether the range is empty (never: an empty one is not mapped).
    pub fn is_empty(&self) -> bool {
        self.held().map.is_empty()
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
        let held = self.held();
        Ok(Sge {
            addr: held.map.as_ptr().wrapping_add(at_usize) as u64,
            length,
            lkey: held.mr.lkey(),
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
        crate::metrics::store_mapped_region(false);
        let Some(held) = self.held.take() else {
            return;
        };
        // Deregistering and unmapping take milliseconds for the ranges
        // mapped here (64 MiB: 3 ms to unmap; a NIC's deregistration
        // unpins every page), which must not stall an async worker's other
        // tasks: the last holder is often a GET's task. A runtime shutting
        // down drops the closure, and so `held`, where it is.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || drop(held))),
            Err(_) => drop(held),
        }
    }
}

/// How long a kept mapping no GET has used stays mapped.
pub const CACHE_IDLE: Duration = Duration::from_secs(30);

/// Which file range an entry maps: the file's device and inode, and the
/// range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    dev: u64,
    ino: u64,
    start: u64,
    len: u64,
}

#[derive(Debug)]
struct Entry {
    key: Key,
    source: Arc<MappedSource>,
    used: Instant,
}

/// Mapped and registered ranges kept for the next GET of the same range,
/// at most `capacity` bytes of them, each until [`CACHE_IDLE`] has passed
/// without a GET (checked at the next GET) or a newer range needs its room.
/// Cloning shares it.
#[derive(Debug, Clone)]
pub struct MappedCache {
    pd: ProtectionDomain,
    capacity: u64,
    idle: Duration,
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl MappedCache {
    /// A cache of at most `capacity` mapped bytes registered in `pd`; 0
    /// keeps nothing (every GET maps and unmaps its range).
    pub fn new(pd: &ProtectionDomain, capacity: u64) -> MappedCache {
        MappedCache::with_idle(pd, capacity, CACHE_IDLE)
    }

    /// [`new`](Self::new), entries dropped after `idle` unused.
    pub fn with_idle(pd: &ProtectionDomain, capacity: u64, idle: Duration) -> MappedCache {
        MappedCache {
            pd: pd.clone(),
            capacity,
            idle,
            entries: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The mapped bytes kept now.
    pub fn bytes(&self) -> u64 {
        self.lock().iter().map(|e| e.key.len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `len` bytes of `file` from `start`, mapped and registered: the kept
    /// mapping of that very file and range, or a new one, kept if it fits
    /// (blocking: call it from a blocking task; what it lets go is unmapped
    /// here, not on the caller's runtime).
    pub fn map(&self, file: &File, start: u64, len: u64) -> io::Result<Arc<MappedSource>> {
        let meta = file.metadata()?;
        // A file cut short under a kept mapping is refused as a new one
        // would be (the copy from it would fail).
        if start.checked_add(len).is_none_or(|end| meta.len() < end) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the object's file is shorter than its record says",
            ));
        }
        let key = Key {
            dev: meta.dev(),
            ino: meta.ino(),
            start,
            len,
        };
        let now = Instant::now();
        let mut gone = Vec::new();
        let found = {
            let mut entries = self.lock();
            let idle = self.idle;
            let (keep, old): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut *entries)
                .into_iter()
                .partition(|e| now.duration_since(e.used) < idle);
            *entries = keep;
            gone.extend(old);
            entries.iter_mut().find(|e| e.key == key).map(|e| {
                e.used = now;
                e.source.clone()
            })
        };
        if let Some(source) = found {
            drop(gone);
            return Ok(source);
        }
        let source = Arc::new(MappedSource::map(&self.pd, file, start, len)?);
        if len <= self.capacity {
            let mut entries = self.lock();
            // Another GET of the same range may have kept its own meanwhile:
            // this one is then used once and let go.
            if !entries.iter().any(|e| e.key == key) {
                while entries.iter().map(|e| e.key.len).sum::<u64>() + len > self.capacity {
                    let Some(lru) = (0..entries.len()).min_by_key(|&i| entries[i].used) else {
                        break;
                    };
                    gone.push(entries.swap_remove(lru));
                }
                entries.push(Entry {
                    key,
                    source: source.clone(),
                    used: now,
                });
            }
        }
        drop(gone);
        Ok(source)
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

    /// A file of `len` bytes of pattern `seed`, in `dir` at `name`
    /// (replacing what was there by a rename, as the store does).
    fn object(dir: &std::path::Path, name: &str, len: usize, seed: u8) -> File {
        let tmp = dir.join(format!("{name}.tmp"));
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(seed)).collect();
        std::fs::write(&tmp, &data).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
        File::open(dir.join(name)).unwrap()
    }

    fn first_byte(m: &MappedSource) -> u8 {
        let sge = m.sge(0, 1).unwrap();
        // SAFETY: the test reads one byte of a mapping it holds; nothing
        // truncates the file meanwhile.
        unsafe { *(sge.addr as *const u8) }
    }

    /// The same range of the same file is mapped once; a new version of
    /// the object (a new file renamed over it) gets a mapping of its own,
    /// with its own bytes; room is made by letting the least recently used
    /// go; a range larger than the cache, or a cache of 0, keeps nothing;
    /// an entry unused for the idle time is let go.
    #[test]
    fn kept_mappings_are_found_by_file_and_range_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let dev = device();
        let pd = dev.alloc_pd().unwrap();
        let cache = MappedCache::new(&pd, 3 * 8192);
        let a1 = object(dir.path(), "a", 8192, 1);
        let m1 = cache.map(&a1, 0, 8192).unwrap();
        let again = cache
            .map(&File::open(dir.path().join("a")).unwrap(), 0, 8192)
            .unwrap();
        assert!(Arc::ptr_eq(&m1, &again), "the same file and range: kept");
        let part = cache.map(&a1, 4096, 4096).unwrap();
        assert!(!Arc::ptr_eq(&m1, &part), "another range");
        assert_eq!(cache.bytes(), 8192 + 4096);
        // A new version: another inode (the kept mapping holds the old one).
        let a2 = object(dir.path(), "a", 8192, 2);
        let m2 = cache.map(&a2, 0, 8192).unwrap();
        assert!(!Arc::ptr_eq(&m1, &m2));
        assert_eq!((first_byte(&m1), first_byte(&m2)), (1, 2));
        assert_eq!(cache.bytes(), 2 * 8192 + 4096);
        // Full: the least recently used (the old version's whole range)
        // goes for `b`; the rest stay.
        let b = object(dir.path(), "b", 8192, 3);
        let mb = cache.map(&b, 0, 8192).unwrap();
        assert_eq!(cache.bytes(), 2 * 8192 + 4096);
        assert!(Arc::ptr_eq(&part, &cache.map(&a1, 4096, 4096).unwrap()));
        assert!(Arc::ptr_eq(&m2, &cache.map(&a2, 0, 8192).unwrap()));
        assert!(!Arc::ptr_eq(&m1, &cache.map(&a1, 0, 8192).unwrap()));
        // Larger than the cache: mapped, not kept.
        let big = object(dir.path(), "big", 4 * 8192, 4);
        let m_big = cache.map(&big, 0, 4 * 8192).unwrap();
        assert!(!Arc::ptr_eq(&m_big, &cache.map(&big, 0, 4 * 8192).unwrap()));
        assert!(cache.bytes() <= 3 * 8192);
        drop((m1, m2, mb, part, again));
        // A cache of 0 keeps nothing.
        let none = MappedCache::new(&pd, 0);
        let x = none.map(&b, 0, 8192).unwrap();
        assert!(!Arc::ptr_eq(&x, &none.map(&b, 0, 8192).unwrap()));
        assert_eq!(none.bytes(), 0);
        // Idle entries go at the next GET.
        let brief = MappedCache::with_idle(&pd, 1 << 20, Duration::from_millis(20));
        let y = brief.map(&b, 0, 8192).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let z = brief.map(&a2, 0, 8192).unwrap();
        assert_eq!(brief.bytes(), 8192, "the idle entry went");
        assert!(!Arc::ptr_eq(&y, &brief.map(&b, 0, 8192).unwrap()));
        drop(z);
    }

    /// Whether this process maps the file at `path`.
    fn maps(path: &std::path::Path) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let p = path.to_str().unwrap();
        maps.lines().any(|l| l.ends_with(p))
    }

    /// Dropped on an async worker, a mapping is let go by a blocking
    /// thread, and is gone soon after; dropped outside a runtime, at once.
    #[tokio::test]
    async fn a_dropped_mapping_is_let_go_off_the_async_worker() {
        let dir = tempfile::tempdir().unwrap();
        let dev = device();
        let pd = dev.alloc_pd().unwrap();
        object(dir.path(), "on-worker", 8192, 1);
        object(dir.path(), "no-runtime", 8192, 2);
        let (on_worker, no_runtime) = (
            dir.path().join("on-worker").canonicalize().unwrap(),
            dir.path().join("no-runtime").canonicalize().unwrap(),
        );
        let m = MappedSource::map(&pd, &File::open(&on_worker).unwrap(), 0, 8192).unwrap();
        assert!(maps(&on_worker));
        drop(m);
        let deadline = Instant::now() + Duration::from_secs(10);
        while maps(&on_worker) {
            assert!(Instant::now() < deadline, "the mapping was never let go");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let m = MappedSource::map(&pd, &File::open(&no_runtime).unwrap(), 0, 8192).unwrap();
        assert!(maps(&no_runtime));
        std::thread::spawn(move || drop(m)).join().unwrap();
        assert!(!maps(&no_runtime));
    }
}
