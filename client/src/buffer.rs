//! Registered buffers: the map from the address a buffer was registered at
//! to its entry, and the three ways a buffer is registered.
//!
//! Each buffer gets two memory regions, one per direction, each with only
//! the access that direction needs: a GET token names the region peers may
//! write (local write, remote write), a PUT token the one they may only read
//! (remote read). A server given a PUT token cannot write the buffer.

use crate::device::RdmaDevice;
use crate::error::{Error, OpError, Result};
use crate::options::Options;
use crate::platform::gpu::{HipRuntime, MemoryType};
use hipobj_fabric::{AccessFlags, MemoryRegion};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, RwLock};

/// Buffers the map holds at most.
pub const MAX_BUFFERS: usize = 256;
/// Largest buffer: 4 GiB.
pub const MAX_BUFFER_SIZE: usize = 1 << 32;

/// Which way the bytes go in a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The server writes the buffer (S3 GET).
    Get,
    /// The server reads the buffer (S3 PUT).
    Put,
}

impl Direction {
    /// What a peer needs through the QP.
    pub fn qp_access(self) -> AccessFlags {
        match self {
            Direction::Get => AccessFlags::REMOTE_WRITE,
            Direction::Put => AccessFlags::REMOTE_READ,
        }
    }
}

/// How a buffer was registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// Host memory, registered as it is (`hipObjBufRegisterHost`).
    Host,
    /// GPU memory registered directly, as a dma-buf or a plain MR; transfers
    /// end with a device synchronize.
    GpuDirect {
        /// Whether it went through dma-buf.
        dmabuf: bool,
    },
    /// GPU memory the NIC cannot reach: a pinned host staging buffer of the
    /// same size is registered instead, and transfers copy through it.
    Staged,
}

/// Pinned host memory from the GPU runtime, freed on drop.
#[derive(Debug)]
pub(crate) struct Pinned {
    ptr: usize,
    hip: Arc<dyn HipRuntime>,
}

impl Pinned {
    /// Its address.
    pub fn addr(&self) -> usize {
        self.ptr
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.hip.host_free(self.ptr);
    }
}

/// One registered buffer. The regions are declared before the staging
/// memory, so they are deregistered before it is freed.
#[derive(Debug)]
pub struct BufEntry {
    /// The address it was registered at.
    pub addr: usize,
    /// Its size.
    pub size: usize,
    /// How.
    pub kind: Registration,
    mr_get: MemoryRegion,
    mr_put: MemoryRegion,
    staging: Option<Pinned>,
    /// The GPU runtime whose device memory it is (GPU registrations):
    /// its copies and synchronizes serve this buffer.
    gpu: Option<Arc<dyn HipRuntime>>,
}

impl BufEntry {
    /// The runtime that owns a GPU buffer's memory.
    pub fn gpu(&self) -> Option<&Arc<dyn HipRuntime>> {
        self.gpu.as_ref()
    }

    /// The address tokens carry: the staging buffer's, or the buffer's own.
    pub fn token_addr(&self) -> u64 {
        match &self.staging {
            Some(p) => p.addr() as u64,
            None => self.addr as u64,
        }
    }

    /// The staging buffer, for a staged registration.
    pub fn staging(&self) -> Option<usize> {
        self.staging.as_ref().map(Pinned::addr)
    }

    /// The region for a direction.
    pub fn mr(&self, dir: Direction) -> &MemoryRegion {
        match dir {
            Direction::Get => &self.mr_get,
            Direction::Put => &self.mr_put,
        }
    }

    /// Checks `[offset, offset + size)` against the buffer without
    /// computing a sum that could overflow.
    pub fn check_range(&self, offset: u64, size: u64) -> Result<()> {
        let fits = offset <= self.size as u64 && size <= self.size as u64 - offset;
        if size == 0 || !fits {
            return Err(Error::invalid(format!(
                "{size} bytes at offset {offset} do not fit the {}-byte buffer",
                self.size
            )));
        }
        Ok(())
    }
}

fn get_access() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE
}

fn put_access() -> AccessFlags {
    AccessFlags::REMOTE_READ
}

/// Registers `[addr, addr + size)` twice, once per direction.
///
/// # Safety
///
/// The memory must stay allocated until both regions are dropped.
unsafe fn reg_pair(
    dev: &RdmaDevice,
    addr: usize,
    size: usize,
) -> Result<(MemoryRegion, MemoryRegion)> {
    // SAFETY: the caller keeps the memory allocated while the regions live.
    let get = unsafe { dev.pd.reg_mr(addr as *mut u8, size, get_access())? };
    // SAFETY: as above.
    let put = unsafe { dev.pd.reg_mr(addr as *mut u8, size, put_access())? };
    Ok((get, put))
}

/// The map of registered buffers.
#[derive(Debug, Default)]
pub struct BufferMap {
    map: RwLock<BTreeMap<usize, Arc<BufEntry>>>,
}

impl BufferMap {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<usize, Arc<BufEntry>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<usize, Arc<BufEntry>>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry registered at exactly `addr`.
    pub fn find(&self, addr: usize) -> Result<Arc<BufEntry>> {
        self.read().get(&addr).cloned().ok_or_else(|| {
            Error::new(
                OpError::BufNotRegistered,
                format!("{addr:#x} is not a registered buffer address"),
            )
        })
    }

    /// Buffers registered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether none is registered.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn precheck(&self, addr: usize, size: usize) -> Result<()> {
        if addr == 0 || size == 0 || addr.checked_add(size).is_none() {
            return Err(Error::invalid(
                "a buffer needs a non-null address, a non-zero size, and must not wrap",
            ));
        }
        if size > MAX_BUFFER_SIZE {
            return Err(Error::new(
                OpError::SizeTooLarge,
                format!("{size} bytes exceeds the 4 GiB registration limit"),
            ));
        }
        let m = self.read();
        if m.contains_key(&addr) {
            return Err(Error::new(
                OpError::BufAlreadyRegistered,
                format!("{addr:#x} is already registered"),
            ));
        }
        if m.len() >= MAX_BUFFERS {
            return Err(Error::busy(format!(
                "{MAX_BUFFERS} buffers are registered already"
            )));
        }
        Ok(())
    }

    fn insert(&self, entry: BufEntry) -> Result<()> {
        let mut m = self.write();
        if m.contains_key(&entry.addr) {
            drop(m);
            // The loser of a race: its registration is released after the lock.
            return Err(Error::new(
                OpError::BufAlreadyRegistered,
                format!("{:#x} is already registered", entry.addr),
            ));
        }
        if m.len() >= MAX_BUFFERS {
            drop(m);
            return Err(Error::busy(format!(
                "{MAX_BUFFERS} buffers are registered already"
            )));
        }
        m.insert(entry.addr, Arc::new(entry));
        Ok(())
    }

    /// `hipObjBufRegisterHost`: host memory, registered as it is.
    ///
    /// # Safety
    ///
    /// The memory must stay allocated until the buffer is deregistered (or
    /// the instance is destroyed).
    pub(crate) unsafe fn register_host(
        &self,
        dev: &RdmaDevice,
        addr: usize,
        size: usize,
    ) -> Result<()> {
        self.precheck(addr, size)?;
        // SAFETY: the caller's promise covers both regions.
        let (mr_get, mr_put) = unsafe { reg_pair(dev, addr, size)? };
        self.insert(BufEntry {
            addr,
            size,
            kind: Registration::Host,
            mr_get,
            mr_put,
            staging: None,
            gpu: None,
        })
    }

    /// `hipObjBufRegister`: GPU memory through the seed's three paths
    /// (dma-buf, plain MR, pinned staging), or host memory if no GPU
    /// runtime calls the pointer device memory. With several runtimes the
    /// one that owns the pointer serves it ([`HipRuntime::owner`]).
    ///
    /// # Safety
    ///
    /// As [`register_host`](Self::register_host).
    pub(crate) unsafe fn register(
        &self,
        dev: &RdmaDevice,
        hip: &Arc<dyn HipRuntime>,
        options: &Options,
        addr: usize,
        size: usize,
    ) -> Result<()> {
        self.precheck(addr, size)?;
        let hip = &hip.owner(addr).unwrap_or_else(|| hip.clone());
        let attrs = match hip.pointer_attributes(addr) {
            Ok(a) if a.memory_type == MemoryType::Device => a,
            // Memory no runtime knows, or host memory: register it as it is.
            // SAFETY: the caller's promise.
            _ => return unsafe { self.register_host(dev, addr, size) },
        };
        let end_ok =
            addr >= attrs.base && (addr - attrs.base) as u64 + size as u64 <= attrs.size as u64;
        if !end_ok {
            return Err(Error::invalid(format!(
                "{size} bytes at {addr:#x} run past the end of the {} allocation ({} bytes at {:#x})",
                hip.name(),
                attrs.size,
                attrs.base
            )));
        }
        // 1. dma-buf.
        if options.dmabuf && dev.device.info().supports_dmabuf {
            match Self::reg_dmabuf_pair(dev, hip, addr, size) {
                Ok((mr_get, mr_put)) => {
                    return self.insert(BufEntry {
                        addr,
                        size,
                        kind: Registration::GpuDirect { dmabuf: true },
                        mr_get,
                        mr_put,
                        staging: None,
                        gpu: Some(hip.clone()),
                    });
                }
                Err(e) => {
                    if options.rdma_debug {
                        tracing::warn!(addr = format_args!("{addr:#x}"), size, error = %e, "dma-buf registration failed");
                    }
                }
            }
        }
        // 2. A plain MR over the device memory.
        // SAFETY: the caller's promise.
        if let Ok((mr_get, mr_put)) = unsafe { reg_pair(dev, addr, size) } {
            return self.insert(BufEntry {
                addr,
                size,
                kind: Registration::GpuDirect { dmabuf: false },
                mr_get,
                mr_put,
                staging: None,
                gpu: Some(hip.clone()),
            });
        }
        // 3. Pinned host staging.
        if options.require_gpu_direct {
            return Err(Error::rdma(format!(
                "GPU buffer {addr:#x} cannot be registered directly, and HIPOBJ_REQUIRE_GPU_DIRECT forbids staging"
            )));
        }
        tracing::warn!(
            addr = format_args!("{addr:#x}"),
            size,
            runtime = hip.name(),
            "GPU buffer is not GPU-direct: registering a pinned host staging buffer instead"
        );
        let staging = hip.host_alloc(size).map_err(|h| {
            Error::hip(
                OpError::RdmaError,
                h,
                format!(
                    "pinned host allocation ({} hipHostMalloc/cuMemHostAlloc) of {size} bytes for staging failed",
                    hip.name()
                ),
            )
        })?;
        let pinned = Pinned {
            ptr: staging,
            hip: hip.clone(),
        };
        // SAFETY: `pinned` is stored in the entry after the regions, so it
        // is freed only after both are deregistered.
        let (mr_get, mr_put) = unsafe { reg_pair(dev, staging, size)? };
        self.insert(BufEntry {
            addr,
            size,
            kind: Registration::Staged,
            mr_get,
            mr_put,
            staging: Some(pinned),
            gpu: Some(hip.clone()),
        })
    }

    fn reg_dmabuf_pair(
        dev: &RdmaDevice,
        hip: &Arc<dyn HipRuntime>,
        addr: usize,
        size: usize,
    ) -> Result<(MemoryRegion, MemoryRegion)> {
        let reg = |access| -> Result<MemoryRegion> {
            let (fd, offset) = hip.export_dmabuf(addr, size).map_err(|h| {
                Error::hip(
                    OpError::DmabufNotSupported,
                    h,
                    format!("{} dma-buf export failed", hip.name()),
                )
            })?;
            // The fd is closed when `fd` drops: the MR keeps its own reference.
            Ok(dev
                .pd
                .reg_dmabuf_mr(fd.as_raw_fd(), offset, size, addr as u64, access)?)
        };
        Ok((reg(get_access())?, reg(put_access())?))
    }

    /// Removes the entry at `addr`, unless a call or an abandoned copy
    /// holds it (`Busy`). Its regions and staging memory are released after
    /// the lock.
    pub(crate) fn deregister(&self, addr: usize) -> Result<()> {
        let removed = {
            let mut m = self.write();
            let entry = m.get(&addr).ok_or_else(|| {
                Error::new(
                    OpError::BufNotRegistered,
                    format!("{addr:#x} is not a registered buffer address"),
                )
            })?;
            // Copies of the Arc are only made under this lock, so the count
            // cannot miss one.
            if Arc::strong_count(entry) > 1 {
                return Err(Error::busy(format!(
                    "{addr:#x} is in use by a transfer or a staging copy"
                )));
            }
            m.remove(&addr)
        };
        drop(removed);
        Ok(())
    }

    /// Removes the entry at `addr` even if something else holds it: a
    /// timed-out copy's hold keeps the regions and the staging memory alive
    /// until the copy is done. Returns whether there was one.
    pub(crate) fn remove(&self, addr: usize) -> bool {
        let removed = self.write().remove(&addr);
        removed.is_some()
    }
}
