//! The safe Rust API: an initialized library handle, and registered
//! buffers that cannot outlive their registration or the library.

use crate::buffer::Direction;
use crate::config::Config;
use crate::error::{Error, OpError, Result};
use crate::instance::Instance;
use crate::options::Options;
use crate::platform::gpu::{HipRuntime, MemoryType};
use crate::platform::system::system_platform;
use crate::platform::Platform;
use crate::transfer::{self, S3Ops, SyncDirection};
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

/// An initialized library of its own (not the process-wide instance the C
/// API uses). Dropping the last handle releases everything.
///
/// ```no_run
/// use hipobj::{Config, Hipobj, S3Ops};
///
/// struct MyS3; // the application's S3 client
/// impl S3Ops for MyS3 {
///     fn send_request(&mut self, token: &str) -> Result<(), i32> {
///         // send the S3 request with `x-amz-rdma-token: <token>`
///         Ok(())
///     }
///     fn recv_reply(&mut self, reply: &mut [u8]) -> Result<usize, i32> {
///         // copy the response's `x-amz-rdma-reply` value into `reply`
///         let v = b"200";
///         reply[..v.len()].copy_from_slice(v);
///         Ok(v.len())
///     }
/// }
///
/// # fn main() -> Result<(), hipobj::Error> {
/// let lib = Hipobj::new(&Config::with_nic("soft0"))?;
/// let mut memory = vec![0u8; 1 << 20];
/// let buf = lib.register_host(&mut memory)?;
/// buf.get(0, 1 << 20, &mut MyS3)?; // the object's bytes are now in `memory`
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Hipobj {
    inst: Arc<Instance>,
}

impl Hipobj {
    /// Initializes with the production platform and the environment's options.
    pub fn new(config: &Config) -> Result<Hipobj> {
        let options = Options::from_env();
        let platform = system_platform(options.provider)?;
        Hipobj::with_platform(platform, options, config)
    }

    /// Initializes with a given platform and options.
    pub fn with_platform(platform: Platform, options: Options, config: &Config) -> Result<Hipobj> {
        Ok(Hipobj {
            inst: Arc::new(Instance::build(platform, options, config)?),
        })
    }

    /// The instance behind the handle.
    pub fn instance(&self) -> &Instance {
        &self.inst
    }

    /// Registers host memory; the memory is borrowed for as long as the
    /// registration lives, and read or written through the returned handle.
    ///
    /// The handle and its clones cannot leave the borrow, so they cannot be
    /// given to a thread or task that may outlive it: use
    /// [`register_owned`](Self::register_owned) for memory that must go
    /// there (the S3 client's transfers need it).
    pub fn register_host<'b>(&self, memory: &'b mut [u8]) -> Result<Registered<'_, 'b>> {
        let (addr, size) = (memory.as_mut_ptr() as usize, memory.len());
        // SAFETY: `memory` is mutably borrowed for 'b, which the returned
        // handle and all its clones carry, and the last of them deregisters
        // on drop: the memory stays allocated and untouched by other Rust
        // code while registered.
        unsafe {
            self.inst
                .buffers
                .register_host(&self.inst.device, addr, size)?
        };
        Ok(Registered::new(self, addr, size, Owned::Nothing, None))
    }

    /// Registers host memory that the registration owns: it is freed only
    /// after the last clone of the returned handle is dropped and the
    /// buffer is deregistered, so a clone may be moved to any thread and
    /// the memory outlives everything that uses it. Read and write it
    /// through the handle ([`Registered::read`], [`Registered::write`],
    /// [`Registered::to_vec`]).
    pub fn register_owned(&self, memory: Vec<u8>) -> Result<Registered<'static, 'static>> {
        let mut memory = memory;
        let (addr, size) = (memory.as_mut_ptr() as usize, memory.len());
        // SAFETY: `[addr, addr + size)` is the vector's heap allocation,
        // which moving the `Vec` into `Owned` does not move; it is dropped
        // only with the registration, and nothing else touches it.
        unsafe { self.register_owning(addr, size, Owned::Host { _memory: memory }) }
    }

    /// Allocates `size` bytes of zeroed host memory, page-aligned (an
    /// anonymous mapping of its own, apart from the heap), and registers
    /// it; the registration owns the memory as
    /// [`register_owned`](Self::register_owned)'s does.
    ///
    /// The host buffer to use for large transfers: where the source and
    /// the destination of a copy sit at different offsets within a 64-byte
    /// cache line, the copy itself runs slower (the same-host path's
    /// kernel copy at half speed, measured in docs/benchmarks.md), and a
    /// heap `Vec` of a megabyte or more starts 16 bytes into its page
    /// where an object's file, a staging buffer or GPU memory starts on a
    /// page boundary.
    pub fn alloc_host(&self, size: usize) -> Result<Registered<'static, 'static>> {
        // The mapping is lazy: a size registration refuses (0, over 4 GiB)
        // is refused by `register_owning` below and the mapping dropped.
        let memory = hipobj_fabric::HostBuffer::zeroed(size)?;
        let addr = memory.as_ptr() as usize;
        // SAFETY: `[addr, addr + size)` is the mapping, which moving the
        // `HostBuffer` into `Owned` does not move; it is unmapped only with
        // the registration, and nothing else touches it.
        unsafe { self.register_owning(addr, size, Owned::Mapped { _memory: memory }) }
    }

    /// Registers `[addr, addr + size)` as host memory that `owned` holds;
    /// the registration keeps `owned` and drops it only after it has
    /// deregistered the buffer (`Registration::drop` runs before its
    /// fields drop).
    ///
    /// # Safety
    ///
    /// `owned` must own `[addr, addr + size)`, keep it in place when moved,
    /// and nothing but the returned handle's methods may touch it.
    unsafe fn register_owning(
        &self,
        addr: usize,
        size: usize,
        owned: Owned,
    ) -> Result<Registered<'static, 'static>> {
        // SAFETY: the caller's promise; `owned` moves into the handle's
        // shared state, which outlives the registration.
        unsafe {
            self.inst
                .buffers
                .register_host(&self.inst.device, addr, size)?
        };
        Ok(Registered::new(self, addr, size, owned, None))
    }

    /// Allocates `size` bytes of device memory on GPU `device` (numbered
    /// as `gpuDevice`: HIP's devices first, then CUDA's) and registers it
    /// through the three registration paths; the registration owns the
    /// memory and frees it after the last handle is dropped.
    /// [`Registered::read`] and [`Registered::write`] copy through the GPU
    /// runtime.
    pub fn register_device(
        &self,
        device: i32,
        size: usize,
    ) -> Result<Registered<'static, 'static>> {
        let gpus = &self.inst.platform.hip;
        let addr = gpus.device_alloc(device, size).map_err(|h| {
            Error::hip(
                OpError::InvalidValue,
                h,
                format!("allocating {size} bytes of device memory on GPU {device} failed"),
            )
        })?;
        let gpu = gpus.owner(addr).unwrap_or_else(|| gpus.clone());
        let memory = DeviceMemory {
            gpu: gpu.clone(),
            addr,
        };
        // SAFETY: the device memory moves into the handle's shared state
        // and is freed only after that state has deregistered the buffer
        // (or, on failure here, when `memory` drops).
        unsafe { self.register_gpu(addr, size)? };
        Ok(Registered::new(
            self,
            addr,
            size,
            Owned::Device { _memory: memory },
            Some(gpu),
        ))
    }

    /// Registers `[addr, addr + size)` and answers the runtime that owns it
    /// if it was registered as GPU memory.
    ///
    /// # Safety
    ///
    /// As [`register`](Self::register).
    unsafe fn register_gpu(&self, addr: usize, size: usize) -> Result<Option<Arc<dyn HipRuntime>>> {
        let i = &self.inst;
        // SAFETY: the caller's promise.
        unsafe {
            i.buffers
                .register(&i.device, &i.platform.hip, &i.options, addr, size)?
        };
        Ok(i.buffers.find(addr)?.gpu().cloned())
    }

    /// The GPU runtime and device that own `[addr, addr + size)`, if a GPU
    /// runtime the library loaded (HIP or CUDA, whichever knows the
    /// pointer) reports the whole range as device memory of one
    /// allocation. [`register`](Self::register) takes memory no runtime
    /// knows as host memory; a caller that holds a device pointer (a DLPack
    /// tensor on `kDLCUDA` or `kDLROCM`) checks here first, so such a
    /// pointer is never registered, read or written as host memory.
    pub fn device_memory(&self, addr: usize, size: usize) -> Option<(&'static str, i32)> {
        let gpus = &self.inst.platform.hip;
        let gpu = gpus.owner(addr).unwrap_or_else(|| gpus.clone());
        let a = gpu.pointer_attributes(addr).ok()?;
        let inside = addr >= a.base
            && (addr - a.base)
                .checked_add(size)
                .is_some_and(|end| end <= a.size);
        (a.memory_type == MemoryType::Device && inside).then(|| (gpu.name(), a.device))
    }

    /// Registers GPU (or host) memory by address, through hipObject's three
    /// registration paths.
    ///
    /// # Safety
    ///
    /// `[addr, addr + size)` must stay allocated while the returned handle
    /// or any clone of it lives (a transfer may hold a clone until it
    /// ends) and until any staging copy that timed out has finished, and
    /// must not be accessed by the CPU during transfers.
    ///
    /// [`Registered::read`] and [`Registered::write`] of a buffer
    /// registered as GPU memory copy through its GPU runtime.
    pub unsafe fn register(&self, addr: usize, size: usize) -> Result<Registered<'_, 'static>> {
        // SAFETY: the caller's promise.
        let gpu = unsafe { self.register_gpu(addr, size)? };
        Ok(Registered::new(self, addr, size, Owned::Nothing, gpu))
    }

    /// Application-driven transfers, step 1: a handshake token for the
    /// token connection.
    pub fn handshake_token(&self) -> Result<String> {
        transfer::handshake_token(&self.inst)
    }

    /// Application-driven transfers, step 2: connect to the server QP the
    /// handshake's `x-amz-rdma-reply` names.
    pub fn complete_handshake(&self, reply: &str) -> Result<()> {
        transfer::complete_handshake(&self.inst, reply.as_bytes())
    }

    /// Disconnects every connection that is connected to a server and not
    /// in use by a transfer (the pool's and the token connection), and
    /// returns, for each, the handshake-form token that names its QP and
    /// the GID of the server it was paired with: what the application's
    /// goodbye requests carry (`x-amz-rdma-goodbye`, docs/protocol.md), so
    /// that the servers release their side of the pairs at once instead of
    /// probing for them later. A later transfer connects again.
    pub fn take_pairs(&self) -> Vec<PairGoodbye> {
        let mut pairs = self.inst.pool.disconnect_free();
        if let Ok(mut conn) = self.inst.token_conn.try_lock() {
            if let (true, Some(peer)) = (conn.is_connected(), conn.peer) {
                pairs.push((conn.qp.qp_num(), peer));
                let _ = conn.reset(&self.inst.device);
            }
        }
        pairs
            .into_iter()
            .map(|(qp_num, peer)| PairGoodbye {
                token: transfer::handshake_token_for(&self.inst, qp_num),
                server_gid: peer.gid,
            })
            .collect()
    }
}

/// A pair the library has let go of ([`Hipobj::take_pairs`]): the token
/// to say goodbye with, and the server it was paired with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairGoodbye {
    /// The handshake-form token naming the client QP.
    pub token: String,
    /// The server's GID (which server to say it to).
    pub server_gid: hipobj_wire::Gid,
}

/// A registered buffer; deregistered when the last clone is dropped.
///
/// Cloning is cheap (a reference count): every clone is a handle to the
/// same registration, which stays registered, together with memory it
/// owns ([`Hipobj::register_owned`]), until the last clone is gone. A
/// handle of `Registered<'_, 'static>` (owned or `'static` memory) can be
/// turned into a `Registered<'static, 'static>` ([`Registered::handle`])
/// and moved to a thread that may outlive the caller's borrow of it.
#[derive(Debug, Clone)]
pub struct Registered<'h, 'b> {
    inner: Arc<Registration>,
    _lib: PhantomData<&'h Hipobj>,
    _memory: PhantomData<&'b mut [u8]>,
}

/// What the clones of a [`Registered`] share.
#[derive(Debug)]
struct Registration {
    lib: Hipobj,
    addr: usize,
    size: usize,
    /// Orders the CPU accesses of all clones (`read`/`with_bytes` against
    /// `write`), which may run on several threads.
    cpu: RwLock<()>,
    /// The GPU runtime of a buffer registered as GPU memory: CPU accesses
    /// copy through it.
    gpu: Option<Arc<dyn HipRuntime>>,
    /// The memory of an owned registration; freed after the buffer is
    /// deregistered (`drop` runs before the fields are dropped).
    owned: Owned,
}

/// Memory a registration owns.
#[derive(Debug)]
enum Owned {
    /// None (borrowed, or the caller's).
    Nothing,
    /// Host memory (held to be freed last).
    Host { _memory: Vec<u8> },
    /// Host memory mapped by [`Hipobj::alloc_host`] (unmapped last).
    Mapped { _memory: hipobj_fabric::HostBuffer },
    /// Device memory from [`Hipobj::register_device`] (freed on drop).
    Device { _memory: DeviceMemory },
}

/// Device memory from a GPU runtime, freed on drop.
#[derive(Debug)]
struct DeviceMemory {
    gpu: Arc<dyn HipRuntime>,
    addr: usize,
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        self.gpu.device_free(self.addr);
    }
}

impl<'h, 'b> Registered<'h, 'b> {
    fn new(
        lib: &Hipobj,
        addr: usize,
        size: usize,
        owned: Owned,
        gpu: Option<Arc<dyn HipRuntime>>,
    ) -> Registered<'h, 'b> {
        Registered {
            inner: Arc::new(Registration {
                lib: lib.clone(),
                addr,
                size,
                cpu: RwLock::new(()),
                gpu,
                owned,
            }),
            _lib: PhantomData,
            _memory: PhantomData,
        }
    }

    /// Another handle to the same registration that does not borrow the
    /// library (it holds a reference of its own): with `'b = 'static` it
    /// may be moved to any thread, and it keeps the registration, and
    /// owned memory, alive until it is dropped.
    pub fn handle(&self) -> Registered<'static, 'b> {
        Registered {
            inner: self.inner.clone(),
            _lib: PhantomData,
            _memory: PhantomData,
        }
    }

    /// How many handles to the registration exist (this one included).
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }
}

impl Registered<'_, '_> {
    /// Its address.
    pub fn addr(&self) -> usize {
        self.inner.addr
    }

    /// Its size.
    pub fn len(&self) -> usize {
        self.inner.size
    }

    /// Whether it is empty (never: registration needs a size).
    pub fn is_empty(&self) -> bool {
        self.inner.size == 0
    }

    fn offset(offset: u64) -> Result<i64> {
        i64::try_from(offset).map_err(|_| Error::invalid(format!("offset {offset} is too large")))
    }

    /// GET: the server writes `size` bytes of the object at `offset` into
    /// the buffer.
    pub fn get(&self, offset: u64, size: usize, ops: &mut dyn S3Ops) -> Result<()> {
        transfer::transfer(
            &self.inner.lib.inst,
            Direction::Get,
            self.inner.addr,
            size,
            Self::offset(offset)?,
            ops,
        )
    }

    /// PUT: the server reads `size` bytes at `offset` from the buffer.
    pub fn put(&self, offset: u64, size: usize, ops: &mut dyn S3Ops) -> Result<()> {
        transfer::transfer(
            &self.inner.lib.inst,
            Direction::Put,
            self.inner.addr,
            size,
            Self::offset(offset)?,
            ops,
        )
    }

    /// A hipobj-rc-v2 GET (`crate::v2`): `t.size` bytes of the object (or
    /// part) `t.target` names, from `t.object_offset`, into the buffer at
    /// `t.buffer_offset`, through the application's control requests.
    pub fn get_v2(
        &self,
        t: &crate::v2::V2Transfer,
        ops: &mut dyn crate::v2::V2Ops,
    ) -> Result<hipobj_wire::rc_v2::Final> {
        crate::v2::get(&self.inner.lib.inst, self.inner.addr, t, ops)
    }

    /// A hipobj-rc-v2 PUT (or UploadPart, by the target's query) of
    /// `t.size` bytes at `t.buffer_offset` of the buffer.
    pub fn put_v2(
        &self,
        t: &crate::v2::V2Transfer,
        ops: &mut dyn crate::v2::V2Ops,
    ) -> Result<hipobj_wire::rc_v2::Final> {
        crate::v2::put(&self.inner.lib.inst, self.inner.addr, t, ops)
    }

    /// Starts a GET (`Direction::Get`) or PUT of `size` bytes at `offset`
    /// that the caller drives request by request (see
    /// [`transfer::Stepwise`]); `Ok(None)` when it must go through
    /// [`Registered::get`]/[`Registered::put`] instead.
    pub fn start_stepwise(
        &self,
        dir: Direction,
        offset: u64,
        size: usize,
    ) -> Result<Option<(transfer::Stepwise<'_>, String)>> {
        transfer::Stepwise::start(
            &self.inner.lib.inst,
            dir,
            self.inner.addr,
            size,
            Self::offset(offset)?,
        )
    }

    /// A token for an application-driven transfer of `size` bytes at `offset`.
    pub fn token(&self, dir: Direction, offset: u64, size: usize) -> Result<String> {
        transfer::rdma_token(
            &self.inner.lib.inst,
            self.inner.addr,
            Self::offset(offset)?,
            size,
            dir,
        )
    }

    /// The staging copy of an application-driven transfer (nothing unless
    /// the buffer is staged).
    pub fn sync(&self, dir: SyncDirection, offset: u64, size: usize) -> Result<()> {
        transfer::buf_sync(
            &self.inner.lib.inst,
            self.inner.addr,
            size,
            Self::offset(offset)?,
            dir,
        )
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.size => Ok(()),
            _ => Err(Error::invalid(format!(
                "{len} bytes at {offset} exceed the {}-byte buffer",
                self.inner.size
            ))),
        }
    }

    /// Copies out of a registered buffer (through the GPU runtime for GPU
    /// memory).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        let _cpu = self.inner.cpu_read();
        if let Some(gpu) = &self.inner.gpu {
            if out.is_empty() {
                return Ok(());
            }
            return gpu
                .copy_sync(
                    out.as_mut_ptr() as usize,
                    self.inner.addr + offset,
                    out.len(),
                )
                .map_err(|h| {
                    Error::hip(
                        OpError::InvalidValue,
                        h,
                        format!("{} copy from device memory failed", gpu.name()),
                    )
                });
        }
        // SAFETY: for host registrations the memory is the borrowed or owned
        // allocation, in bounds by the check, and alive while the handle is;
        // CPU writers of it (`write`) are excluded by the lock. Transfers
        // (device writes) are the application's protocol to order, as with
        // DMA: they are not Rust accesses.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.inner.addr + offset) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// The whole buffer, copied out.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.len()];
        self.read(0, &mut v)?;
        Ok(v)
    }

    /// Calls `f` with `len` bytes of a registered host buffer at `offset`,
    /// in place: checksums and other reads of large buffers need no copy.
    /// [`write`](Self::write)s through any clone of the handle wait until
    /// `f` returns.
    pub fn with_bytes<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(f(&[]));
        }
        if self.inner.gpu.is_some() {
            let mut copy = vec![0u8; len];
            self.read(offset, &mut copy)?;
            return Ok(f(&copy));
        }
        let _cpu = self.inner.cpu_read();
        // SAFETY: as in `read`: the memory is the handle's borrowed or owned
        // allocation (no other Rust reference to it exists), in bounds by
        // the check, and no CPU write can happen while the read lock is
        // held, which outlives the slice (it lives only for this call).
        let bytes =
            unsafe { std::slice::from_raw_parts((self.inner.addr + offset) as *const u8, len) };
        Ok(f(bytes))
    }

    /// Copies into a registered buffer (through the GPU runtime for GPU
    /// memory).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        let _cpu = self.inner.cpu_write();
        if let Some(gpu) = &self.inner.gpu {
            if data.is_empty() {
                return Ok(());
            }
            return gpu
                .copy_sync(self.inner.addr + offset, data.as_ptr() as usize, data.len())
                .map_err(|h| {
                    Error::hip(
                        OpError::InvalidValue,
                        h,
                        format!("{} copy to device memory failed", gpu.name()),
                    )
                });
        }
        // SAFETY: as in `read`, with the write lock excluding every other
        // CPU access (reads and `with_bytes` slices) through any clone.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.inner.addr + offset) as *mut u8,
                data.len(),
            )
        };
        Ok(())
    }
}

impl Registration {
    fn cpu_read(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.cpu.read().unwrap_or_else(|e| e.into_inner())
    }

    fn cpu_write(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.cpu.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let inst = &self.lib.inst;
        inst.abandoned.prune();
        if inst.buffers.deregister(self.addr).is_err() {
            // Only a staging copy that is still running can hold it now (no
            // call can: each borrows a handle, and this is the last). The
            // entry leaves the map; the abandoned list keeps its regions and
            // staging memory alive until the copy is done.
            tracing::warn!(
                addr = format_args!("{:#x}", self.addr),
                "deregistered with a staging copy still running"
            );
            inst.buffers.remove(self.addr);
            // Something still holds the entry, so its regions stay
            // registered (a staging copy, or a stepwise transfer that was
            // leaked): owned memory is leaked with them rather than freed
            // under a region a peer may still reach.
            std::mem::forget(std::mem::replace(&mut self.owned, Owned::Nothing));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::gpu::NoHip;
    use crate::platform::topology::NoTopology;
    use crate::OpError;
    use hipobj_fabric::soft::{SoftConfig, SoftProvider};

    fn lib() -> Hipobj {
        let platform = Platform {
            hip: Arc::new(NoHip),
            rdma: Arc::new(SoftProvider::new(
                vec![std::net::Ipv4Addr::LOCALHOST],
                SoftConfig {
                    timeout_scale: 0.1,
                    ..SoftConfig::from_env()
                },
            )),
            topology: Arc::new(NoTopology),
        };
        Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
    }

    #[test]
    fn with_bytes_sees_the_buffer_in_place() {
        let lib = lib();
        let mut mem: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        let buf = lib.register_host(&mut mem).unwrap();
        buf.write(100, b"hello").unwrap();
        let (first, len, sum) = buf
            .with_bytes(100, 300, |b| {
                (
                    b[..5].to_vec(),
                    b.len(),
                    b.iter().map(|x| u64::from(*x)).sum::<u64>(),
                )
            })
            .unwrap();
        assert_eq!(first, b"hello");
        assert_eq!(len, 300);
        let mut copy = vec![0u8; 300];
        buf.read(100, &mut copy).unwrap();
        assert_eq!(sum, copy.iter().map(|x| u64::from(*x)).sum::<u64>());
        assert_eq!(buf.with_bytes(4096, 0, |b| b.len()).unwrap(), 0);
        assert!(buf.with_bytes(4000, 97, |b| b.len()).is_err());
        assert!(buf.with_bytes(usize::MAX, 2, |b| b.len()).is_err());
    }

    #[test]
    fn a_clone_keeps_the_registration_and_the_owned_memory_alive() {
        let lib = lib();
        let buf = lib.register_owned(vec![3u8; 8192]).unwrap();
        let addr = buf.addr();
        let held = std::thread::scope(|s| {
            // The handle moves to a thread of its own, as a transfer's does.
            let h = buf.handle();
            drop(buf);
            let l = &lib;
            s.spawn(move || {
                assert_eq!(l.instance().buffers.len(), 1);
                assert!(l.instance().buffers.find(addr).is_ok());
                h.write(10, b"still here").unwrap();
                let mut out = [0u8; 12];
                h.read(9, &mut out).unwrap();
                assert_eq!(&out, b"\x03still here\x03");
                h.handles()
            })
            .join()
            .unwrap()
        });
        assert_eq!(held, 1);
        // The last handle is gone: deregistered.
        assert_eq!(lib.instance().buffers.len(), 0);
        assert!(lib.instance().buffers.find(addr).is_err());
    }

    #[test]
    fn alloc_host_gives_zeroed_page_aligned_memory_owned_by_the_registration() {
        let lib = lib();
        let page = 4096;
        // Over 4 GiB is refused as register's is, before anything is mapped
        // for good.
        let e = lib.alloc_host((4usize << 30) + 1).unwrap_err();
        assert_eq!(e.op, OpError::SizeTooLarge);
        assert_eq!(lib.instance().buffers.len(), 0);
        let len = 3 * page + 100;
        let buf = lib.alloc_host(len).unwrap();
        let addr = buf.addr();
        assert_eq!(addr % page, 0, "page-aligned");
        assert_eq!(buf.len(), len);
        assert!(buf.to_vec().unwrap().iter().all(|&b| b == 0), "zeroed");
        assert!(lib.instance().buffers.find(addr).is_ok());
        // Owned: a clone on another thread keeps it registered and mapped.
        let h = buf.handle();
        drop(buf);
        std::thread::spawn(move || {
            h.write(len - 5, b"tail!").unwrap();
            let mut out = [0u8; 6];
            h.read(len - 6, &mut out).unwrap();
            assert_eq!(&out, b"\0tail!");
        })
        .join()
        .unwrap();
        // The last handle is gone: deregistered (and then unmapped).
        assert_eq!(lib.instance().buffers.len(), 0);
        assert!(lib.instance().buffers.find(addr).is_err());
        // Two allocations never share a page.
        let (a, b) = (lib.alloc_host(10).unwrap(), lib.alloc_host(10).unwrap());
        assert!(a.addr().abs_diff(b.addr()) >= page);
    }

    #[test]
    fn clones_share_one_registration() {
        let lib = lib();
        let mut mem = vec![0u8; 4096];
        let a = lib.register_host(&mut mem).unwrap();
        let b = a.clone();
        assert_eq!((a.addr(), a.handles()), (b.addr(), 2));
        b.write(0, b"xy").unwrap();
        drop(b);
        assert_eq!(lib.instance().buffers.len(), 1);
        assert_eq!(&a.to_vec().unwrap()[..2], b"xy");
        drop(a);
        assert_eq!(lib.instance().buffers.len(), 0);
        assert_eq!(&mem[..2], b"xy");
    }

    #[test]
    fn buffer_rules() {
        let lib = lib();
        // Over 4 GiB is refused before anything is registered.
        // SAFETY: refused by the size check before the memory is touched.
        let e = unsafe { lib.register(0x1000, (4usize << 30) + 1) }.unwrap_err();
        assert_eq!(e.op, OpError::SizeTooLarge);
        // SAFETY: refused by the argument checks.
        let r = unsafe { lib.register(0, 16) };
        assert_eq!(r.unwrap_err().op, OpError::InvalidValue);
        // SAFETY: as above.
        let r = unsafe { lib.register(usize::MAX - 4, 16) };
        assert_eq!(r.unwrap_err().op, OpError::InvalidValue);
        let mut mem = vec![0u8; 256 * 64];
        let mut regs = Vec::new();
        let base = mem.as_mut_ptr() as usize;
        for i in 0..256 {
            // SAFETY: `mem` outlives `regs` (dropped first below).
            regs.push(unsafe { lib.register(base + i * 64, 64) }.unwrap());
        }
        // SAFETY: refused: the map is full.
        let r = unsafe { lib.register(base + 1, 8) };
        assert_eq!(r.unwrap_err().op, OpError::Busy);
        // SAFETY: refused: already registered.
        let r = unsafe { lib.register(base, 64) };
        assert_eq!(r.unwrap_err().op, OpError::BufAlreadyRegistered);
        assert_eq!(
            lib.inst.buffers.deregister(base + 1).unwrap_err().op,
            OpError::BufNotRegistered
        );
        drop(regs);
        assert!(lib.inst.buffers.is_empty());
        drop(mem);
    }

    #[test]
    fn deregistration_is_busy_while_a_call_holds_the_buffer() {
        let lib = lib();
        let mut mem = vec![0u8; 64];
        let addr = mem.as_mut_ptr() as usize;
        let _buf = lib.register_host(&mut mem).unwrap();
        let held = lib.inst.buffers.find(addr).unwrap();
        assert_eq!(
            lib.inst.buffers.deregister(addr).unwrap_err().op,
            OpError::Busy
        );
        drop(held);
    }
}
