//! What `init` is given (`hipObjConfig_t`).

use std::fmt;

/// The configuration of an instance.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// S3 endpoint URL (informational: the application does the S3 calls).
    pub endpoint: Option<String>,
    /// AWS region (informational).
    pub region: Option<String>,
    /// S3 access key (optional, informational).
    pub access_key: Option<String>,
    /// S3 secret key (optional, informational; never logged).
    pub secret_key: Option<String>,
    /// Reserved: must be 0.
    pub flags: u32,
    /// HIP device index, or -1 for the calling thread's current device.
    pub gpu_device: i32,
    /// A comma-separated allow-list of NIC names; on a host without a GPU
    /// (or without NIC topology), the NIC to open.
    pub nic_hint: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            endpoint: None,
            region: None,
            access_key: None,
            secret_key: None,
            flags: 0,
            gpu_device: -1,
            nic_hint: None,
        }
    }
}

impl Config {
    /// A configuration for a host without a GPU: open `nic` directly.
    pub fn with_nic(nic: &str) -> Config {
        Config {
            nic_hint: Some(nic.to_string()),
            ..Config::default()
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field("flags", &self.flags)
            .field("gpu_device", &self.gpu_device)
            .field("nic_hint", &self.nic_hint)
            .finish()
    }
}
