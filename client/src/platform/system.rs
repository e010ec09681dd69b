//! The production platform: the RDMA provider chosen by `HIPOBJ_PROVIDER`,
//! the NIC topology from `/sys`, and the GPU runtime.
//!
//! The GPU runtime is HIP through `dlopen()` ([`SystemHip`]); where it
//! cannot be loaded the platform has none ([`NoHip`]), and init needs a NIC
//! hint, as on a GPU-less host.

use super::gpu::{HipRuntime, NoHip};
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
}

impl SystemProvider {
    /// The providers `choice` allows.
    pub fn new(choice: ProviderChoice) -> Result<SystemProvider> {
        let soft = match choice {
            ProviderChoice::Verbs => None,
            _ => Some(SoftProvider::from_env()?),
        };
        let hardware = match choice {
            ProviderChoice::Soft => None,
            _ => hardware_provider(),
        };
        Ok(SystemProvider { soft, hardware })
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
            (Some(s), _) if is_soft_name(name) => s.open_device(name),
            (_, Some(h)) => h.open_device(name),
            (_, None) => Err(FabricError::NoDevice(format!(
                "{name}: no hardware RDMA provider is available (software devices are named soft0, soft:<ipv4>)"
            ))),
        }
    }
}

/// HIP if it loads, else no GPU runtime.
pub fn system_hip() -> Arc<dyn HipRuntime> {
    match SystemHip::load() {
        Ok(h) => {
            tracing::debug!(hip = ?h, "HIP runtime loaded");
            Arc::new(h)
        }
        Err(e) => {
            tracing::debug!(error = %e, "no HIP runtime; a NIC hint is needed");
            Arc::new(NoHip)
        }
    }
}

/// The production platform.
pub fn system_platform(choice: ProviderChoice) -> crate::Result<Platform> {
    Ok(Platform {
        hip: system_hip(),
        rdma: Arc::new(SystemProvider::new(choice)?),
        topology: Arc::new(SysfsTopology::system()),
    })
}
