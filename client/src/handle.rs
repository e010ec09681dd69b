//! The safe Rust API: an initialized library handle, and registered
//! buffers that cannot outlive their registration or the library.

use crate::buffer::Direction;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::options::Options;
use crate::platform::system::system_platform;
use crate::platform::Platform;
use crate::transfer::{self, S3Ops, SyncDirection};
use std::marker::PhantomData;
use std::sync::Arc;

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
    pub fn register_host<'b>(&self, memory: &'b mut [u8]) -> Result<Registered<'_, 'b>> {
        let (addr, size) = (memory.as_mut_ptr() as usize, memory.len());
        // SAFETY: `memory` is mutably borrowed for 'b, which the returned
        // handle carries, and the handle deregisters on drop: the memory
        // stays allocated and untouched by Rust code while registered.
        unsafe {
            self.inst
                .buffers
                .register_host(&self.inst.device, addr, size)?
        };
        Ok(Registered {
            lib: self,
            addr,
            size,
            _memory: PhantomData,
        })
    }

    /// Registers GPU (or host) memory by address, through hipObject's three
    /// registration paths.
    ///
    /// # Safety
    ///
    /// `[addr, addr + size)` must stay allocated while the returned handle
    /// lives and until any staging copy that timed out has finished, and
    /// must not be accessed by the CPU during transfers.
    pub unsafe fn register(&self, addr: usize, size: usize) -> Result<Registered<'_, 'static>> {
        let i = &self.inst;
        // SAFETY: the caller's promise.
        unsafe {
            i.buffers
                .register(&i.device, &i.platform.hip, &i.options, addr, size)?
        };
        Ok(Registered {
            lib: self,
            addr,
            size,
            _memory: PhantomData,
        })
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
}

/// A registered buffer; deregistered on drop.
#[derive(Debug)]
pub struct Registered<'h, 'b> {
    lib: &'h Hipobj,
    addr: usize,
    size: usize,
    _memory: PhantomData<&'b mut [u8]>,
}

impl Registered<'_, '_> {
    /// Its address.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Its size.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether it is empty (never: registration needs a size).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    fn offset(offset: u64) -> Result<i64> {
        i64::try_from(offset).map_err(|_| Error::invalid(format!("offset {offset} is too large")))
    }

    /// GET: the server writes `size` bytes of the object at `offset` into
    /// the buffer.
    pub fn get(&self, offset: u64, size: usize, ops: &mut dyn S3Ops) -> Result<()> {
        transfer::transfer(
            &self.lib.inst,
            Direction::Get,
            self.addr,
            size,
            Self::offset(offset)?,
            ops,
        )
    }

    /// PUT: the server reads `size` bytes at `offset` from the buffer.
    pub fn put(&self, offset: u64, size: usize, ops: &mut dyn S3Ops) -> Result<()> {
        transfer::transfer(
            &self.lib.inst,
            Direction::Put,
            self.addr,
            size,
            Self::offset(offset)?,
            ops,
        )
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
        transfer::Stepwise::start(&self.lib.inst, dir, self.addr, size, Self::offset(offset)?)
    }

    /// A token for an application-driven transfer of `size` bytes at `offset`.
    pub fn token(&self, dir: Direction, offset: u64, size: usize) -> Result<String> {
        transfer::rdma_token(&self.lib.inst, self.addr, Self::offset(offset)?, size, dir)
    }

    /// The staging copy of an application-driven transfer (nothing unless
    /// the buffer is staged).
    pub fn sync(&self, dir: SyncDirection, offset: u64, size: usize) -> Result<()> {
        transfer::buf_sync(&self.lib.inst, self.addr, size, Self::offset(offset)?, dir)
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::invalid(format!(
                "{len} bytes at {offset} exceed the {}-byte buffer",
                self.size
            ))),
        }
    }

    /// Copies out of a registered host buffer.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: for host registrations the memory is the borrowed slice,
        // in bounds by the check; no transfer runs during `&self` calls of
        // this thread, and other threads' transfers are the application's
        // protocol to order, as with DMA.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr + offset) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// Calls `f` with `len` bytes of a registered host buffer at `offset`,
    /// in place: checksums and other reads of large buffers need no copy.
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
        // SAFETY: as in `read`: for host registrations the memory is the
        // borrowed slice (the handle holds its `&'b mut` borrow, so no
        // other Rust reference to it exists), in bounds by the check, and
        // the slice lives only for this call, during which no transfer of
        // this thread runs.
        let bytes = unsafe { std::slice::from_raw_parts((self.addr + offset) as *const u8, len) };
        Ok(f(bytes))
    }

    /// Copies into a registered host buffer.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.addr + offset) as *mut u8,
                data.len(),
            )
        };
        Ok(())
    }
}

impl Drop for Registered<'_, '_> {
    fn drop(&mut self) {
        let inst = &self.lib.inst;
        inst.abandoned.prune();
        if inst.buffers.deregister(self.addr).is_err() {
            // Only a staging copy that is still running can hold it now (no
            // call can: they borrow the handle). The entry leaves the map;
            // the abandoned list keeps its regions and staging memory alive
            // until the copy is done.
            tracing::warn!(
                addr = format_args!("{:#x}", self.addr),
                "deregistered with a staging copy still running"
            );
            inst.buffers.remove(self.addr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::gpu::NoHip;
    use crate::platform::topology::FakeTopology;
    use hipobj_fabric::soft::{SoftConfig, SoftProvider};

    fn lib() -> Hipobj {
        let platform = Platform {
            hip: Arc::new(NoHip),
            rdma: Arc::new(SoftProvider::new(
                vec![std::net::Ipv4Addr::LOCALHOST],
                SoftConfig { timeout_scale: 0.1 },
            )),
            topology: Arc::new(FakeTopology::default()),
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
}
