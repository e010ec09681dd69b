//! The instance: everything an initialized library holds, how it is built,
//! and the process-wide current instance the C API finds.

use crate::abandoned::AbandonedCopies;
use crate::buffer::BufferMap;
use crate::config::Config;
use crate::connection::RcConnection;
use crate::device::RdmaDevice;
use crate::error::{Error, OpError, Result};
use crate::options::Options;
use crate::platform::Platform;
use crate::pool::ConnectionPool;
use crate::select;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// What init chose. Nothing reads it after init; tests do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The GPU, if any.
    pub gpu: Option<i32>,
    /// Its PCI bus id.
    pub gpu_bus_id: Option<String>,
    /// The NIC opened.
    pub nic: String,
}

/// An initialized library. Fields are declared in teardown order: copies
/// still running are leaked first, then buffers are deregistered, then QPs
/// destroyed, then the device closed.
///
/// Outside the crate an instance is read, never changed: its public
/// fields' types offer only queries there (no registration,
/// deregistration or transfer), so nothing can pull a buffer out from under
/// a live [`Registered`](crate::Registered).
#[derive(Debug)]
pub struct Instance {
    /// Staging copies that timed out.
    pub(crate) abandoned: AbandonedCopies,
    /// Registered buffers.
    pub buffers: BufferMap,
    /// Connections for `get`/`put`.
    pub(crate) pool: ConnectionPool,
    /// The connection application-driven tokens name.
    pub(crate) token_conn: Mutex<RcConnection>,
    /// The device.
    pub device: Arc<RdmaDevice>,
    /// What init chose.
    pub chosen: Chosen,
    /// Settings.
    pub options: Options,
    /// The outside world.
    pub(crate) platform: Platform,
    /// The control endpoint `hipObjInitV2` named (handed to the v2
    /// callbacks).
    pub(crate) v2_endpoint: std::sync::OnceLock<std::ffi::CString>,
}

impl Instance {
    /// Builds an instance; a failure releases everything built so far.
    pub(crate) fn build(platform: Platform, options: Options, config: &Config) -> Result<Instance> {
        if config.flags != 0 {
            return Err(Error::invalid(format!(
                "flags {:#x} are reserved and must be 0",
                config.flags
            )));
        }
        if config.gpu_device < -1 {
            return Err(Error::invalid(format!(
                "gpuDevice {} is neither -1 nor a device index",
                config.gpu_device
            )));
        }
        let hip = &platform.hip;
        let gpu = if config.gpu_device == -1 {
            hip.current_device().ok()
        } else {
            let count = hip.device_count().unwrap_or(0);
            if config.gpu_device >= count {
                return Err(Error::invalid(format!(
                    "gpuDevice {} does not exist ({count} GPUs)",
                    config.gpu_device
                )));
            }
            Some(config.gpu_device)
        };
        let gpu_bus_id = gpu.and_then(|d| hip.pci_bus_id(d).ok());
        let hint = config.nic_hint.as_deref().filter(|h| !h.trim().is_empty());
        if gpu.is_none() && hint.is_none() {
            return Err(Error::new(
                OpError::NicNotFound,
                "no GPU was found and no nicHint names the NIC to use",
            ));
        }
        let choice = select::choose_nic(gpu_bus_id.as_deref(), platform.topology.as_ref(), hint)
            .map_err(|e| Error::new(OpError::NicNotFound, e.to_string()))?;
        let nic = match choice {
            select::NicChoice::Topology { name } | select::NicChoice::Hint { name } => name,
        };
        let device = Arc::new(RdmaDevice::open(platform.rdma.as_ref(), &nic).map_err(|e| {
            Error::new(
                OpError::NicNotFound,
                format!("cannot open {nic}: {}", e.message),
            )
        })?);
        let token_conn = Mutex::new(RcConnection::create(&device)?);
        let pool = ConnectionPool::new(device.clone(), options.max_transfers)?;
        Ok(Instance {
            abandoned: AbandonedCopies::default(),
            buffers: BufferMap::default(),
            pool,
            token_conn,
            device,
            chosen: Chosen {
                gpu,
                gpu_bus_id,
                nic,
            },
            options,
            platform,
            v2_endpoint: std::sync::OnceLock::new(),
        })
    }

    /// Connections in the pool.
    pub fn pool_live(&self) -> usize {
        self.pool.live()
    }

    /// Connections in the pool that no transfer holds.
    pub fn pool_free(&self) -> usize {
        self.pool.free()
    }

    /// Transfers waiting for a free connection now.
    pub fn pool_waiting(&self) -> usize {
        self.pool.waiting()
    }

    /// Staging copies that missed their deadline and still run.
    pub fn abandoned_copies(&self) -> usize {
        self.abandoned.len()
    }

    /// The token connection.
    pub(crate) fn token_conn(&self) -> MutexGuard<'_, RcConnection> {
        self.token_conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The process-wide current instance.
struct Current {
    instance: RwLock<Option<Arc<Instance>>>,
    init: Mutex<()>,
}

static CURRENT: Current = Current {
    instance: RwLock::new(None),
    init: Mutex::new(()),
};

/// The current instance, kept alive for the caller even if another thread
/// shuts the library down meanwhile. Outside the crate it can only be
/// inspected (tests of the process-wide instance do).
pub fn current() -> Result<Arc<Instance>> {
    CURRENT
        .instance
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| {
            Error::new(
                OpError::NotInitialized,
                "hipObjInit has not been called (or hipObjShutdown was)",
            )
        })
}

/// Builds and publishes an instance, one init or shutdown at a time.
pub(crate) fn init_with(platform: Platform, options: Options, config: &Config) -> Result<()> {
    let _g = CURRENT.init.lock().unwrap_or_else(|e| e.into_inner());
    if CURRENT
        .instance
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .is_some()
    {
        return Err(Error::new(
            OpError::AlreadyInitialized,
            "hipObjInit was already called",
        ));
    }
    let inst = Arc::new(Instance::build(platform, options, config)?);
    *CURRENT.instance.write().unwrap_or_else(|e| e.into_inner()) = Some(inst);
    Ok(())
}

/// Unpublishes the instance and closes its pool, waking transfers waiting
/// for a connection. Calls in progress keep the old instance until they return.
pub(crate) fn shutdown() -> Result<()> {
    let _g = CURRENT.init.lock().unwrap_or_else(|e| e.into_inner());
    let inst = CURRENT
        .instance
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or_else(|| Error::new(OpError::NotInitialized, "the library is not initialized"))?;
    inst.pool.close();
    Ok(())
}
