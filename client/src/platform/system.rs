//! The production platform: the RDMA provider chosen by `HIPOBJ_PROVIDER`,
//! the NIC topology from `/sys`, and the GPU runtimes.
//!
//! The GPU runtimes are HIP ([`SystemHip`]) and CUDA ([`SystemCuda`]),
//! each through `dlopen()`: those that load serve the platform together
//! ([`GpuRuntimes`], chosen per pointer); where neither loads the platform
//! has none ([`NoHip`]), and init needs a NIC hint, as on a GPU-less host.

use super::cpu_reach::CpuReachDevice;
use super::cuda::SystemCuda;
use super::gpu::{HipRuntime, NoHip};
use super::gpus::GpuRuntimes;
use super::hip::SystemHip;
use super::topology::SysfsTopology;
use super::Platform;
use crate::options::ProviderChoice;
use hipobj_fabric::error::{FabricError, Result};
use hipobj_fabric::seam::{DeviceOps, Provider};
use hipobj_fabric::soft::SoftProvider;
use std::sync::Arc;

/// Opens soft devices by their names (`soft0`, `soft:<ip>`) and anything
/// else through the hardware provider, when there is one. A name that is
/// not a soft device's never falls back to the software provider.
#[derive(Debug)]
pub struct SystemProvider {
    soft: Option<SoftProvider>,
    hardware: Option<Arc<dyn Provider>>,
    /// The GPU runtimes whose device memory soft devices refuse to
    /// register plainly (the CPU moves their bytes).
    gpus: Arc<dyn HipRuntime>,
}

impl SystemProvider {
    /// The providers `choice` allows, with no GPU runtime.
    pub fn new(choice: ProviderChoice) -> Result<SystemProvider> {
        SystemProvider::with_gpus(choice, Arc::new(NoHip))
    }

    /// The providers `choice` allows; soft devices refuse a plain MR over
    /// memory `gpus` calls device memory (`EFAULT`, as a NIC without peer
    /// memory), so such buffers are staged.
    pub fn with_gpus(choice: ProviderChoice, gpus: Arc<dyn HipRuntime>) -> Result<SystemProvider> {
        let soft = match choice {
            ProviderChoice::Verbs => None,
            _ => Some(SoftProvider::from_env()?),
        };
        let hardware = match choice {
            ProviderChoice::Soft => None,
            _ => hardware_provider(),
        };
        Ok(SystemProvider {
            soft,
            hardware,
            gpus,
        })
    }
}

/// libibverbs, loaded on first use (a host without it, or without a device,
/// reports `NoDevice` when a hardware name is opened).
fn hardware_provider() -> Option<Arc<dyn Provider>> {
    Some(Arc::new(hipobj_fabric::ibverbs::VerbsProvider::new()))
}

fn is_soft_name(name: &str) -> bool {
    name.starts_with("soft")
}

impl Provider for SystemProvider {
    fn name(&self) -> &'static str {
        "system"
    }

    fn device_names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        if let Some(h) = &self.hardware {
            names.extend(h.device_names().unwrap_or_default());
        }
        if let Some(s) = &self.soft {
            names.extend(s.device_names()?);
        }
        Ok(names)
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        match (&self.soft, &self.hardware) {
            (Some(s), _) if is_soft_name(name) => {
                Ok(CpuReachDevice::wrap(s.open_device(name)?, self.gpus.clone()))
            }
            (_, Some(h)) => h.open_device(name),
            (_, None) => Err(FabricError::NoDevice(format!(
                "{name}: no hardware RDMA provider is available (software devices are named soft0, soft:<ipv4>)"
            ))),
        }
    }
}

/// The GPU runtimes that load: HIP, CUDA, both (devices numbered HIP's
/// first), or none.
pub fn system_hip() -> Arc<dyn HipRuntime> {
    let mut runtimes: Vec<Arc<dyn HipRuntime>> = Vec::new();
    match SystemHip::load() {
        Ok(h) => {
            tracing::debug!(hip = ?h, "HIP runtime loaded");
            runtimes.push(Arc::new(h));
        }
        Err(e) => tracing::debug!(error = %e, "no HIP runtime"),
    }
    match SystemCuda::load() {
        Ok(c) => {
            tracing::debug!(cuda = ?c, "CUDA driver loaded");
            runtimes.push(Arc::new(c));
        }
        Err(e) => tracing::debug!(error = %e, "no CUDA driver"),
    }
    match runtimes.len() {
        0 => {
            tracing::debug!("no GPU runtime; a NIC hint is needed");
            Arc::new(NoHip)
        }
        1 => runtimes.remove(0),
        _ => Arc::new(GpuRuntimes::new(runtimes)),
    }
}

/// The production platform.
pub fn system_platform(choice: ProviderChoice) -> crate::Result<Platform> {
    let hip = system_hip();
    Ok(Platform {
        rdma: Arc::new(SystemProvider::with_gpus(choice, hip.clone())?),
        hip,
        topology: Arc::new(SysfsTopology::system()),
    })
}
