//! [`VerbsProvider`]: the seam over libibverbs, listing and opening
//! devices. Each verbs object has its file, as in the soft provider:
//! [`super::device`], [`super::pd`], [`super::mr`], [`super::cq`],
//! [`super::qp`], over the owned context and PD in [`super::inner`].
//!
//! Each object owns one libibverbs object and holds an `Arc` of its
//! parents (a QP its PD and CQs, an MR and a PD their PD or device, a
//! device the loaded library), and releases its own object in `Drop`
//! before those `Arc`s are released, so children are always destroyed
//! before their parents, whatever order the caller drops them in.
//!
//! libibverbs' verbs are thread safe, and so are the providers' data-path
//! entries (they lock their queues), which is what makes the `Send` and
//! `Sync` implementations in those files sound.

use super::abi::{ibv_device, ibv_device_attr};
use super::convert;
use super::device::VerbsDevice;
use super::inner::DeviceInner;
use super::loader::{self, IbvLib};
use super::mlx5dv::{self, Mlx5Lib};
use super::os::{check, errno, os_err, PROVIDER};
use super::sysfs;
use crate::error::{FabricError, Result};
use crate::seam::{DeviceOps, Provider};
use crate::types::DeviceInfo;
use std::ffi::{c_int, CStr};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

/// Where the provider gets libibverbs from.
#[derive(Clone)]
pub(super) enum LibSource {
    /// [`loader::libibverbs`]: the soname, loaded once per process.
    Default,
    /// A chosen soname or path, loaded once per provider (and its clones).
    Path {
        path: String,
        cell: Arc<OnceLock<std::result::Result<Arc<IbvLib>, String>>>,
    },
}

/// Where the provider gets libmlx5 (for DC) from.
#[derive(Clone)]
pub(super) enum Mlx5Source {
    /// [`mlx5dv::libmlx5`]: the soname, loaded once per process.
    Default,
    /// A chosen soname or path, loaded once per provider (and its clones).
    Path {
        path: String,
        cell: Arc<OnceLock<std::result::Result<Arc<Mlx5Lib>, String>>>,
    },
    /// None: DC is unavailable, for the reason given.
    Off(String),
}

/// The libibverbs provider: real RDMA devices (mlx5, bnxt_re, ionic, rxe,
/// ...) through `libibverbs.so.1`, loaded on first use, and DC on mlx5
/// devices through `libmlx5.so.1`.
#[derive(Clone)]
pub struct VerbsProvider {
    pub(super) source: LibSource,
    pub(super) mlx5: Mlx5Source,
    pub(super) sysfs_root: PathBuf,
}

impl fmt::Debug for VerbsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lib = match &self.source {
            LibSource::Default => loader::SONAME,
            LibSource::Path { path, .. } => path.as_str(),
        };
        let mlx5 = match &self.mlx5 {
            Mlx5Source::Default => mlx5dv::SONAME,
            Mlx5Source::Path { path, .. } => path.as_str(),
            Mlx5Source::Off(_) => "none",
        };
        f.debug_struct("VerbsProvider")
            .field("lib", &lib)
            .field("mlx5", &mlx5)
            .field("sysfs_root", &self.sysfs_root)
            .finish()
    }
}

impl Default for VerbsProvider {
    fn default() -> VerbsProvider {
        VerbsProvider::new()
    }
}

impl VerbsProvider {
    /// The provider over the system's `libibverbs.so.1`, with GID types
    /// read from `/sys/class/infiniband`. Nothing is loaded until a device
    /// is listed or opened.
    pub fn new() -> VerbsProvider {
        VerbsProvider {
            source: LibSource::Default,
            mlx5: Mlx5Source::Default,
            sysfs_root: PathBuf::from(sysfs::DEFAULT_ROOT),
        }
    }

    /// The provider over the library at `path` (a soname or a file), for
    /// tests and unusual installations. DC is off unless a libmlx5 that
    /// goes with that library is named ([`mlx5_library`](Self::mlx5_library)):
    /// the system's libmlx5 acts on the system libibverbs' objects only.
    pub fn with_library(path: impl Into<String>) -> VerbsProvider {
        let path = path.into();
        VerbsProvider {
            mlx5: Mlx5Source::Off(format!(
                "no libmlx5 is named for the libibverbs at {path} (VerbsProvider::mlx5_library)"
            )),
            source: LibSource::Path {
                path,
                cell: Arc::new(OnceLock::new()),
            },
            sysfs_root: PathBuf::from(sysfs::DEFAULT_ROOT),
        }
    }

    /// DC through the libmlx5 at `path` (a soname or a file) instead of
    /// the system's `libmlx5.so.1`; it must be the driver of the libibverbs
    /// this provider loads.
    pub fn mlx5_library(mut self, path: impl Into<String>) -> VerbsProvider {
        self.mlx5 = Mlx5Source::Path {
            path: path.into(),
            cell: Arc::new(OnceLock::new()),
        };
        self
    }

    /// The provider's libmlx5, loading it on the first call; Err says why
    /// there is none.
    pub fn mlx5(&self) -> std::result::Result<Arc<Mlx5Lib>, String> {
        match &self.mlx5 {
            Mlx5Source::Default => mlx5dv::libmlx5(),
            Mlx5Source::Path { path, cell } => cell
                .get_or_init(|| Mlx5Lib::open(path).map(Arc::new))
                .clone(),
            Mlx5Source::Off(why) => Err(why.clone()),
        }
    }

    /// Reads GID types under `root` instead of `/sys/class/infiniband`.
    pub fn sysfs_root(mut self, root: impl Into<PathBuf>) -> VerbsProvider {
        self.sysfs_root = root.into();
        self
    }

    /// The loaded library, loading it on the first call; a failure to load
    /// is [`FabricError::NoDevice`] saying why.
    pub fn library(&self) -> Result<Arc<IbvLib>> {
        match &self.source {
            LibSource::Default => loader::libibverbs(),
            LibSource::Path { path, cell } => cell
                .get_or_init(|| match IbvLib::open(path) {
                    Ok(lib) => Ok(Arc::new(lib)),
                    Err(FabricError::NoDevice(why)) => Err(why),
                    Err(e) => Err(e.to_string()),
                })
                .clone()
                .map_err(FabricError::NoDevice),
        }
    }
}

/// `ibv_get_device_list`'s array, freed on drop.
pub(super) struct DeviceList<'a> {
    pub(super) lib: &'a IbvLib,
    pub(super) list: NonNull<*mut ibv_device>,
    pub(super) len: usize,
}

impl DeviceList<'_> {
    /// The devices, or `NoDevice` saying why there are none.
    fn get(lib: &IbvLib) -> Result<DeviceList<'_>> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter; the function has no other
        // preconditions.
        let raw = unsafe { (lib.get_device_list)(&mut n) };
        let err = errno();
        let Some(list) = NonNull::new(raw) else {
            let why = if err == libc::ENOSYS {
                "libibverbs found no RDMA devices: the kernel has no InfiniBand support (ENOSYS)"
                    .to_string()
            } else {
                format!(
                    "libibverbs found no RDMA devices: ibv_get_device_list failed: {}",
                    io::Error::from_raw_os_error(err)
                )
            };
            tracing::debug!(errno = err, "{why}");
            return Err(FabricError::NoDevice(why));
        };
        let list = DeviceList {
            lib,
            list,
            len: usize::try_from(n).unwrap_or(0),
        };
        if list.len == 0 {
            return Err(FabricError::NoDevice(
                "libibverbs found no RDMA devices: none is present, or none has a user-space \
                 driver (package ibverbs-providers)"
                    .to_string(),
            ));
        }
        Ok(list)
    }

    /// Each device with its name.
    fn devices(&self) -> Vec<(*mut ibv_device, String)> {
        (0..self.len)
            .filter_map(|i| {
                // SAFETY: the array holds `len` valid device pointers (and a
                // NULL after them) until it is freed in drop.
                let dev = unsafe { *self.list.as_ptr().add(i) };
                if dev.is_null() {
                    return None;
                }
                // SAFETY: `dev` is a device of the live list.
                let name = unsafe { (self.lib.get_device_name)(dev) };
                if name.is_null() {
                    return None;
                }
                // SAFETY: libibverbs returns the device's NUL-terminated
                // name, which lives as long as the device.
                let name = unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned();
                Some((dev, name))
            })
            .collect()
    }
}

impl Drop for DeviceList<'_> {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once;
        // devices opened from it stay valid (libibverbs keeps them).
        unsafe { (self.lib.free_device_list)(self.list.as_ptr()) };
    }
}

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        PROVIDER
    }

    fn device_names(&self) -> Result<Vec<String>> {
        let lib = self.library()?;
        let list = DeviceList::get(&lib)?;
        Ok(list.devices().into_iter().map(|(_, n)| n).collect())
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        let lib = self.library()?;
        let list = DeviceList::get(&lib)?;
        let devices = list.devices();
        let Some(&(dev, _)) = devices.iter().find(|(_, n)| n == name) else {
            let names: Vec<&str> = devices.iter().map(|(_, n)| n.as_str()).collect();
            return Err(FabricError::NoDevice(format!(
                "no RDMA device named {name:?} (libibverbs lists: {})",
                names.join(", ")
            )));
        };
        // SAFETY: `dev` belongs to the live list; opening it before the list
        // is freed is what libibverbs requires.
        let ctx = unsafe { (lib.open_device)(dev) };
        let err = errno();
        let dc = if ctx.is_null() {
            Err("the device could not be opened".to_string())
        } else {
            mlx5dv::support(&lib, self.mlx5(), dev, name)
        };
        drop(list);
        let ctx = NonNull::new(ctx).ok_or_else(|| os_err("ibv_open_device", err))?;
        // From here on the context is owned: dropping `inner` closes it.
        let inner = Arc::new(DeviceInner {
            ctx,
            name: name.to_string(),
            lib: lib.clone(),
            sysfs_root: self.sysfs_root.clone(),
        });
        let mut attr = ibv_device_attr::default();
        // SAFETY: the context is open; `attr` is a valid, writable
        // ibv_device_attr.
        check("ibv_query_device", unsafe {
            (lib.query_device)(inner.ctx.as_ptr(), &mut attr)
        })?;
        let info = DeviceInfo {
            name: name.to_string(),
            vendor_id: attr.vendor_id,
            vendor_part_id: attr.vendor_part_id,
            phys_port_cnt: attr.phys_port_cnt,
            max_mr_size: attr.max_mr_size,
            supports_dmabuf: lib.has_reg_dmabuf_mr(),
            supports_dc: dc.is_ok(),
            dc_unavailable: dc.as_ref().err().cloned(),
            max_qp_rd_atom: u32::try_from(attr.max_qp_rd_atom).unwrap_or(0),
            max_qp_init_rd_atom: u32::try_from(attr.max_qp_init_rd_atom).unwrap_or(0),
        };
        tracing::debug!(
            device = name,
            vendor_id = format_args!("{:#06x}", attr.vendor_id),
            part = attr.vendor_part_id,
            fw = convert::fw_ver(&attr),
            ports = attr.phys_port_cnt,
            max_qp_rd_atom = attr.max_qp_rd_atom,
            dc = dc.as_ref().map_or_else(|why| why.as_str(), |_| "mlx5dv"),
            "verbs device opened"
        );
        Ok(Arc::new(VerbsDevice { inner, info, dc }))
    }
}
