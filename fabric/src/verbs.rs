//! Owning handles over a provider's objects.
//!
//! Every child holds its parents (a QP holds its PD and CQs, an MR its PD, a
//! PD its device), and each handle's provider object is its first field, so
//! it is destroyed before the parents it holds: teardown order cannot go
//! wrong, whatever order the application drops things in.

use crate::error::{FabricError, Result};
use crate::seam::{CqOps, DctOps, DeviceOps, MrOps, PdOps, Provider, QpInit, QpOps};
use crate::types::{
    AccessFlags, DeviceInfo, GidEntry, PortAttr, QpAttr, QpAttrMask, QpCap, QpState, QpType,
    RecvWr, SendWr, Sge, WorkCompletion,
};
use memmap2::MmapMut;
use std::fmt;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An open RDMA device. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Device {
    ops: Arc<dyn DeviceOps>,
}

impl Device {
    /// Opens `name` with `provider`.
    pub fn open(provider: &dyn Provider, name: &str) -> Result<Device> {
        Ok(Device {
            ops: provider.open_device(name)?,
        })
    }

    /// Wraps a provider's device.
    pub fn from_ops(ops: Arc<dyn DeviceOps>) -> Device {
        Device { ops }
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        self.ops.info()
    }

    /// Queries a port.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.ops.query_port(port)
    }

    /// The port's GID table.
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        self.ops.gid_table(port)
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        Ok(ProtectionDomain {
            ops: self.ops.alloc_pd()?,
            device: self.clone(),
        })
    }

    /// Creates a completion queue.
    pub fn create_cq(&self, cqe: u32) -> Result<CompletionQueue> {
        Ok(CompletionQueue {
            ops: self.ops.create_cq(cqe)?,
            _device: self.clone(),
        })
    }
}

/// A protection domain. Cloning shares it.
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    ops: Arc<dyn PdOps>,
    device: Device,
}

impl ProtectionDomain {
    /// The device it belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Registers caller-owned memory.
    ///
    /// # Safety
    ///
    /// As [`PdOps::reg_mr`]: the memory must stay allocated while the region
    /// lives, and the device may read or write it at any time meanwhile.
    pub unsafe fn reg_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        // SAFETY: the caller upholds reg_mr's contract, which is the same.
        let ops = unsafe { self.ops.reg_mr(addr, len, access)? };
        Ok(MemoryRegion {
            ops,
            _pd: self.clone(),
            _memory: None,
        })
    }

    /// Registers a dma-buf at I/O virtual address `iova`.
    pub fn reg_dmabuf_mr(
        &self,
        fd: RawFd,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        let ops = self.ops.reg_dmabuf_mr(fd, offset, len, iova, access)?;
        Ok(MemoryRegion {
            ops,
            _pd: self.clone(),
            _memory: None,
        })
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them.
    pub fn alloc_buffer(&self, len: usize, access: AccessFlags) -> Result<RegisteredBuffer> {
        let buf = HostBuffer::zeroed(len)?;
        // SAFETY: `buf` is owned by the returned RegisteredBuffer, which drops
        // the region (its first field) before the memory, so the memory stays
        // allocated for as long as the region is registered; its accessors
        // copy through raw pointers and never form references to it.
        let mr = unsafe { self.reg_mr(buf.ptr.as_ptr(), buf.len, access)? };
        Ok(RegisteredBuffer { mr, buf })
    }

    /// Creates a queue pair, in RESET.
    pub fn create_qp(
        &self,
        qp_type: QpType,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        cap: QpCap,
    ) -> Result<QueuePair> {
        let ops = self.ops.create_qp(QpInit {
            qp_type,
            send_cq: &send_cq.ops,
            recv_cq: &recv_cq.ops,
            cap,
        })?;
        Ok(QueuePair {
            ops,
            _pd: self.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
        })
    }

    /// Creates a DC target with the DC access key `dc_key` (a warning is
    /// logged when it is [`CUOBJECT_DC_KEY`](crate::CUOBJECT_DC_KEY), the
    /// public one).
    pub fn create_dct(
        &self,
        cq: &CompletionQueue,
        access: AccessFlags,
        dc_key: u64,
    ) -> Result<DcTarget> {
        let ops = self.ops.create_dct(&cq.ops, access, dc_key)?;
        if dc_key == crate::types::CUOBJECT_DC_KEY {
            tracing::warn!(
                dct_num = ops.dct_num(),
                "DC target created with cuObject's public DC key 0xffeeddcc: any initiator \
                 that learns its number and an rkey can reach this memory; use a private \
                 key unless cuObject peers need this one"
            );
        }
        Ok(DcTarget {
            ops,
            _pd: self.clone(),
            _cq: cq.clone(),
        })
    }
}

/// A registered memory region; deregistered on drop.
#[derive(Debug)]
pub struct MemoryRegion {
    // Fields drop in order: the region is deregistered, then the memory it
    // keeps alive (if any) is released.
    ops: Box<dyn MrOps>,
    _pd: ProtectionDomain,
    /// The memory the region covers, where the region owns a share of it
    /// ([`RegisteredBuffer::into_parts`]): released only after the
    /// deregistration, whoever drops last.
    _memory: Option<Arc<HostBuffer>>,
}

impl MemoryRegion {
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.ops.lkey()
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.ops.rkey()
    }
    /// Start address.
    pub fn addr(&self) -> u64 {
        self.ops.addr()
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.ops.length()
    }
    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.length() == 0
    }
    /// What it allows.
    pub fn access(&self) -> AccessFlags {
        self.ops.access()
    }

    /// An SGE for `len` bytes at `offset` into the region, checked against
    /// its bounds without overflow.
    pub fn sge(&self, offset: u64, len: u32) -> Result<Sge> {
        let in_bounds = offset
            .checked_add(u64::from(len))
            .is_some_and(|end| end <= self.len() as u64);
        let addr = self
            .addr()
            .checked_add(offset)
            .filter(|_| in_bounds)
            .ok_or_else(|| {
                FabricError::invalid(
                    "sge",
                    format!(
                        "{len} bytes at offset {offset} exceed the {}-byte region",
                        self.len()
                    ),
                )
            })?;
        Ok(Sge {
            addr,
            length: len,
            lkey: self.lkey(),
        })
    }
}

/// A completion queue. Cloning shares it.
#[derive(Clone, Debug)]
pub struct CompletionQueue {
    ops: Arc<dyn CqOps>,
    _device: Device,
}

impl CompletionQueue {
    /// Moves up to `max` ready completions into `out`; never waits.
    pub fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize> {
        self.ops.poll(out, max)
    }

    /// The completion channel's descriptor, if the provider has one (see
    /// [`CqOps::event_fd`]): readable after [`arm`](Self::arm) once a
    /// completion arrives. It lives as long as the CQ.
    pub fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        self.ops.event_fd()
    }

    /// Requests one channel event for the next completion.
    pub fn arm(&self) -> Result<()> {
        self.ops.arm()
    }

    /// Asks for one event for the next completion added from now on
    /// ([`CqOps::arm_next`]).
    pub fn arm_next(&self) -> Result<()> {
        self.ops.arm_next()
    }

    /// Takes the events waiting on the channel without blocking.
    pub fn take_events(&self) -> Result<u32> {
        self.ops.take_events()
    }

    /// Waits up to `timeout` for one completion.
    pub fn wait_one(&self, timeout: Duration) -> Result<Option<WorkCompletion>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::with_capacity(1);
        loop {
            if self.ops.poll(&mut out, 1)? == 1 {
                return Ok(out.pop());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            if self.ops.wait(deadline - now) {
                // A provider that cannot block says "maybe" at once: poll
                // again after a short pause instead of spinning.
                if self.ops.poll(&mut out, 1)? == 1 {
                    return Ok(out.pop());
                }
                std::thread::sleep(
                    Duration::from_micros(200).min(deadline - Instant::now().min(deadline)),
                );
            }
        }
    }

    /// Waits up to `timeout` for `n` completions, returning those that came.
    pub fn wait_n(&self, n: usize, timeout: Duration) -> Result<Vec<WorkCompletion>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.wait_one(left)? {
                Some(wc) => out.push(wc),
                None => break,
            }
        }
        Ok(out)
    }
}

/// A queue pair; destroyed on drop.
#[derive(Debug)]
pub struct QueuePair {
    ops: Box<dyn QpOps>,
    _pd: ProtectionDomain,
    _send_cq: CompletionQueue,
    _recv_cq: CompletionQueue,
}

impl QueuePair {
    /// Its QP number.
    pub fn qp_num(&self) -> u32 {
        self.ops.qp_num()
    }
    /// Its transport.
    pub fn qp_type(&self) -> QpType {
        self.ops.qp_type()
    }
    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.ops.modify(attr, mask)
    }
    /// `ibv_query_qp`.
    pub fn query(&self) -> Result<QpAttr> {
        self.ops.query()
    }
    /// The current state.
    pub fn state(&self) -> Result<QpState> {
        Ok(self.ops.query()?.qp_state)
    }
    /// `ibv_post_send`.
    pub fn post_send(&self, wr: &SendWr) -> Result<()> {
        self.ops.post_send(wr)
    }
    /// `ibv_post_recv`.
    pub fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        self.ops.post_recv(wr)
    }
}

/// A DC target; destroyed on drop.
#[derive(Debug)]
pub struct DcTarget {
    ops: Box<dyn DctOps>,
    _pd: ProtectionDomain,
    _cq: CompletionQueue,
}

impl DcTarget {
    /// The DCT number.
    pub fn dct_num(&self) -> u32 {
        self.ops.dct_num()
    }
    /// Requests dropped for presenting a wrong DC key.
    pub fn key_violations(&self) -> u64 {
        self.ops.key_violations()
    }
}

/// Page-aligned, zeroed host memory that is only ever touched through raw
/// pointers, so a device may write it while the owner holds no reference.
///
/// Each buffer is an anonymous memory mapping of its own, not memory of the
/// process's heap: memory a device may access shares no page with the
/// allocator's other objects (a NIC's registration pins whole pages, and a
/// page the heap shared with a registered buffer would stay pinned, or be
/// copied on `fork`, with it); its pages come from the kernel zeroed and
/// resident only once touched; and it goes back to the kernel the moment
/// the buffer is dropped (`munmap`), where an allocator would keep a freed
/// staging region resident until it purges. Its resident pages show in
/// `/proc/<pid>/smaps` as a mapping of the buffer's size, apart from the heap.
///
/// Rust code writes it only through `&mut self` ([`write_at`](Self::write_at),
/// [`fill`](Self::fill)), so no two Rust accesses race; reads take `&self`.
/// The device's accesses (an RDMA WRITE landing, an RDMA READ or SEND being
/// served, done by the NIC's DMA or by the software provider's kernel
/// socket calls) are outside Rust and are the application's to order with
/// completions: bytes read while a device write of them is in flight, or
/// written while a device read of them is, have unspecified values, as with
/// any DMA buffer.
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// The mapping `ptr` points into, unmapped on drop. Never dereferenced
    /// after `ptr` was taken from it: every access goes through `ptr`.
    _map: MmapMut,
}

// SAFETY: HostBuffer owns its mapping exclusively (like a Box<[u8]>) and
// all access goes through raw-pointer copies whose ranges are checked.
unsafe impl Send for HostBuffer {}
// SAFETY: shared (`&self`) access only reads, by raw-pointer copies; every
// Rust write takes `&mut self`, so a Rust write never races another Rust
// access (device accesses are outside Rust, see the type's documentation).
unsafe impl Sync for HostBuffer {}

/// Buffers of at least this size are advised to use transparent huge
/// pages (x86-64's 2 MiB).
const HUGE_PAGE: usize = 2 << 20;

impl HostBuffer {
    /// Maps `len` zeroed bytes (at least one page is mapped, so that a
    /// zero-length buffer still has a valid address).
    pub fn zeroed(len: usize) -> Result<HostBuffer> {
        if isize::try_from(len).is_err() {
            return Err(FabricError::invalid(
                "alloc_buffer",
                format!("{len} bytes is too large"),
            ));
        }
        let mut map = MmapMut::map_anon(len.max(1))
            .map_err(|e| FabricError::no_resources("alloc_buffer", format!("{len} bytes: {e}")))?;
        if len >= HUGE_PAGE {
            // Transparent huge pages where the system gives them on
            // request (`madvise` mode): a 64 MiB buffer is 32 pages to
            // fault in, zero, pin and map instead of 16384. Only advice: a
            // system that refuses keeps 4 KiB pages.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        let ptr = NonNull::new(map.as_mut_ptr())
            .ok_or_else(|| FabricError::no_resources("alloc_buffer", format!("{len} bytes")))?;
        Ok(HostBuffer {
            ptr,
            len,
            _map: map,
        })
    }

    /// Start address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(FabricError::invalid(
                "buffer access",
                format!(
                    "{len} bytes at offset {offset} exceed the {}-byte buffer",
                    self.len
                ),
            )),
        }
    }

    /// Copies `data` into the buffer at `offset`.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: the range was checked to lie inside the allocation, the
        // source is a distinct Rust slice, so the copy cannot overlap it,
        // and `&mut self` excludes every other Rust access to the memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` out of the buffer.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: the range was checked to lie inside the allocation, the
        // target is a distinct Rust slice, and Rust writes of the memory
        // need `&mut self`, which cannot exist while `&self` does.
        unsafe {
            std::ptr::copy_nonoverlapping(self.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// `len` bytes at `offset`, to read in place (bytes an RDMA READ
    /// filled, handed on without a copy). The owner takes it only once the
    /// device accesses that write these bytes have completed, and starts no
    /// new one while the slice lives, as for [`read_at`](Self::read_at).
    pub fn slice(&self, offset: usize, len: usize) -> Result<&[u8]> {
        self.check(offset, len)?;
        // SAFETY: the range was checked to lie inside the allocation, which
        // lives as long as `self`; the slice borrows `self`, so no Rust
        // write (each needs `&mut self`) can happen while it lives. Device
        // accesses are the owner's to order, as documented on the type: the
        // slice is taken after the work requests writing these bytes have
        // completed, and none is posted over them while it lives.
        Ok(unsafe { std::slice::from_raw_parts(self.as_ptr().add(offset), len) })
    }

    /// `len` bytes at `offset`, to write in place (a file read straight
    /// into a staging buffer).
    pub fn slice_mut(&mut self, offset: usize, len: usize) -> Result<&mut [u8]> {
        self.check(offset, len)?;
        // SAFETY: the range was checked to lie inside the allocation, which
        // lives as long as `self`; the slice borrows `self` mutably, which
        // excludes every other Rust access to the memory while it lives.
        // Device accesses are the owner's to order, as for `write_at`: a
        // buffer is written by the CPU only while no work request names it.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.as_ptr().add(offset), len) })
    }

    /// Sets every byte to `byte`.
    pub fn fill(&mut self, byte: u8) {
        // SAFETY: the whole allocation of `len` bytes is ours, and `&mut
        // self` excludes every other Rust access to it.
        unsafe { std::ptr::write_bytes(self.as_ptr(), byte, self.len) };
    }

    /// The whole buffer copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // Cannot fail: the range is the whole buffer.
        let _ = self.read_at(0, &mut v);
        v
    }
}

impl fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// Host memory registered as one memory region. The region is deregistered
/// before the memory is freed.
#[derive(Debug)]
pub struct RegisteredBuffer {
    mr: MemoryRegion,
    buf: HostBuffer,
}

impl RegisteredBuffer {
    /// The region.
    pub fn mr(&self) -> &MemoryRegion {
        &self.mr
    }
    /// The memory, to read.
    pub fn buf(&self) -> &HostBuffer {
        &self.buf
    }
    /// The memory, to write.
    pub fn buf_mut(&mut self) -> &mut HostBuffer {
        &mut self.buf
    }
    /// An SGE over `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Result<Sge> {
        self.mr.sge(offset, len)
    }
    /// Splits into the region and a shared handle on the memory. The region
    /// keeps a share of the memory, so that the memory is freed only once
    /// the region has been deregistered, whichever of the two is dropped
    /// first: a device access can never land in freed memory.
    pub fn into_parts(self) -> (MemoryRegion, Arc<HostBuffer>) {
        let RegisteredBuffer { mut mr, buf } = self;
        let memory = Arc::new(buf);
        mr._memory = Some(Arc::clone(&memory));
        (mr, memory)
    }
}

#[cfg(test)]
mod tests {
    use super::HostBuffer;

    #[test]
    fn a_slice_reads_what_was_written_within_bounds() {
        let mut b = HostBuffer::zeroed(64).unwrap();
        b.write_at(8, b"staging").unwrap();
        assert_eq!(b.slice(8, 7).unwrap(), b"staging");
        assert_eq!(b.slice(0, 8).unwrap(), &[0u8; 8]);
        assert_eq!(b.slice(64, 0).unwrap(), b"");
        assert_eq!(b.slice(0, 64).unwrap().len(), 64);
        assert!(b.slice(60, 5).is_err(), "past the end");
        assert!(b.slice(usize::MAX, 2).is_err(), "the range wraps");
        let empty = HostBuffer::zeroed(0).unwrap();
        assert_eq!(empty.slice(0, 0).unwrap(), b"");
        assert!(empty.slice(0, 1).is_err());
    }

    /// The address range a `/proc/self/maps` (or `smaps` header) line
    /// starts with.
    fn range_of(line: &str) -> Option<(usize, usize)> {
        let (a, b) = line.split_whitespace().next()?.split_once('-')?;
        Some((
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        ))
    }

    /// The `/proc/self/maps` range that contains `addr`, and its path
    /// column (empty for an anonymous mapping).
    fn mapping_of(addr: usize) -> Option<(usize, usize, String)> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().find_map(|line| {
            let (a, b) = range_of(line)?;
            let path = line.split_whitespace().nth(5).unwrap_or("").to_string();
            (a <= addr && addr < b).then_some((a, b, path))
        })
    }

    #[test]
    fn each_buffer_is_zeroed_anonymous_memory_mapped_apart_from_the_heap() {
        const LEN: usize = 3 * 4096 + 100;
        let mut b = HostBuffer::zeroed(LEN).unwrap();
        let addr = b.as_ptr() as usize;
        assert_eq!(addr % 4096, 0, "page-aligned");
        assert!(b.slice(0, LEN).unwrap().iter().all(|&x| x == 0));
        b.fill(0xa5);
        assert!(b.slice(0, LEN).unwrap().iter().all(|&x| x == 0xa5));
        // An anonymous mapping that covers the whole buffer (the kernel may
        // merge it with a neighbouring one), not `[heap]`. Whether drop
        // unmaps it is not checked here: another test's thread may map the
        // freed range again at once.
        let (start, end, path) = mapping_of(addr).expect("the buffer is mapped");
        assert!(start <= addr && addr + LEN <= end);
        assert_eq!(path, "", "an anonymous mapping");
    }

    /// The `VmFlags` of the `/proc/self/smaps` mapping that contains
    /// `addr`.
    fn vm_flags_of(addr: usize) -> Option<Vec<String>> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((a, b)) = range_of(line) {
                inside = a <= addr && addr < b;
                continue;
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.split_whitespace().map(str::to_string).collect());
                }
            }
        }
        None
    }

    /// Buffers of 2 MiB and more are advised to use transparent huge
    /// pages (`hg` in smaps: fewer pages to fault in, pin and copy
    /// through); smaller ones are not.
    #[test]
    fn large_buffers_ask_for_huge_pages() {
        let big = HostBuffer::zeroed(4 << 20).unwrap();
        let small = HostBuffer::zeroed(1 << 20).unwrap();
        let flags = vm_flags_of(big.as_ptr() as usize).expect("mapped");
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("no transparent huge pages in this kernel: {flags:?}");
            return;
        }
        assert!(flags.iter().any(|f| f == "hg"), "{flags:?}");
        let flags = vm_flags_of(small.as_ptr() as usize).expect("mapped");
        assert!(!flags.iter().any(|f| f == "hg"), "{flags:?}");
    }
}
