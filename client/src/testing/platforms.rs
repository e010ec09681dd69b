//! Platforms made of fakes and the software provider, for the library's
//! unit tests and its integration tests (`tests/common`) alike.

use super::{FakeHip, FakeTopology, GpuView};
use crate::platform::gpu::NoHip;
use crate::platform::topology::{NicInfo, PortInfo};
use crate::platform::Platform;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::soft::{SoftConfig, SoftProvider};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The software provider with timers 10x faster than hardware.
pub fn soft() -> Arc<SoftProvider> {
    Arc::new(SoftProvider::new(
        vec![Ipv4Addr::LOCALHOST],
        SoftConfig {
            timeout_scale: 0.1,
            ..SoftConfig::from_env()
        },
    ))
}

/// A GPU-less platform: no HIP runtime, no topology; init needs the hint.
pub fn host_platform() -> Platform {
    Platform {
        hip: Arc::new(NoHip),
        rdma: soft(),
        topology: Arc::new(FakeTopology::default()),
    }
}

/// A topology with soft0 next to the fake GPU's bus.
pub fn soft_topology() -> FakeTopology {
    FakeTopology {
        nics: vec![NicInfo {
            name: "soft0".into(),
            pci_bus_id: Some("0000:42:00.0".into()),
            numa_node: Some(0),
            vendor_id: Some(0),
            ports: vec![PortInfo {
                port: 1,
                active: true,
                link_layer: Some("Ethernet".into()),
            }],
        }],
        ..FakeTopology::default()
    }
}

/// A platform with a fake GPU whose memory the NIC reaches by dma-buf
/// and/or a plain MR, as told.
pub fn gpu_platform(hip: &Arc<FakeHip>, dmabuf: bool, plain_device_mr: bool) -> Platform {
    let rdma: Arc<dyn Provider> = soft();
    Platform {
        hip: hip.clone(),
        rdma: Arc::new(GpuView::new(rdma, hip.clone(), dmabuf, plain_device_mr)),
        topology: Arc::new(soft_topology()),
    }
}
