//! The platform seams: the library's only routes to the outside world.
//!
//! hipObject's `Platform` bundles three interfaces, `HipRuntime`, `Verbs`
//! and `NicTopology`; here the RDMA one is the fabric crate's
//! `Provider`. Tests build a platform from
//! fakes and run the rest of the library unchanged.

mod cpu_reach;
pub mod cuda;
mod event;
pub mod gpu;
pub mod gpus;
pub mod hip;
pub mod system;
pub mod topology;

use gpu::HipRuntime;
use hipobj_fabric::seam::Provider;
use std::sync::Arc;
use topology::NicTopology;

/// The outside world, as the library sees it.
#[derive(Clone, Debug)]
pub struct Platform {
    /// The GPU runtime: HIP, CUDA, both ([`gpus::GpuRuntimes`], chosen per
    /// pointer) or none ([`gpu::NoHip`]).
    pub hip: Arc<dyn HipRuntime>,
    /// The RDMA provider.
    pub rdma: Arc<dyn Provider>,
    /// The NIC topology.
    pub topology: Arc<dyn NicTopology>,
}
