//! NIC topology: what the host's RDMA NICs are and where they sit.
//!
//! (Being written: the `NicTopology` trait, `SysfsTopology` over a sysfs
//! root, and a fake for tests.)
