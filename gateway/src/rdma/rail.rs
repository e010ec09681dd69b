//! The devices the gateway serves on, one "rail" each: the device, its
//! protection domain, the GID its tokens name, the RC parameters, and what
//! lives in that PD: a staging pool, a pair table, DC initiators. Memory
//! registered in one device's PD and QPs made on it serve only that
//! device, so each rail has its own; the limits are the gateway's over all
//! rails (docs/architecture.md, "Several NICs").

use std::sync::Arc;

use hipobj_fabric::rc::RcParams;
use hipobj_fabric::seam::Provider;
use hipobj_fabric::{Device, Gid, PortState, ProtectionDomain};

use super::dci::{self, DciPool};
use super::mapped::MappedCache;
use super::pairs::{Limits, Pairs};
use super::shares::KeyShares;
use super::staging::{PoolError, StagingPool};
use crate::config::{Devices, RdmaConfig, RdmaProvider};

/// Why the RDMA side could not start (its devices and pools are opened
/// here).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No device could be opened.
    #[error("{0}")]
    Device(#[from] hipobj_fabric::FabricError),
    /// The pool could not be registered.
    #[error("{0}")]
    Pool(#[from] PoolError),
    /// The device list names no usable device.
    #[error("--rdma-device: {0}")]
    Devices(String),
}

/// One device the gateway serves on.
#[derive(Debug)]
pub struct Rail {
    /// The device's name (`mlx5_0`, `soft1`), as logs and metrics say it.
    pub name: String,
    /// The provider's name.
    pub provider: &'static str,
    /// The device.
    pub device: Device,
    pub(super) pd: ProtectionDomain,
    /// The GID its tokens name.
    pub gid: Gid,
    pub(super) params: RcParams,
    /// Its staging pool.
    pub pool: StagingPool,
    /// Object ranges mapped and registered in the pool's PD, kept for the
    /// next GET of the same range.
    pub mapped: MappedCache,
    /// Its connected pairs.
    pub pairs: Pairs,
    /// Its DC initiators.
    pub dcis: DciPool,
}

impl Rail {
    /// The GID the device's tokens name, and its RC parameters.
    fn addressing(device: &Device) -> Result<(Gid, RcParams), StartError> {
        let table = device.gid_table(1)?;
        let index = hipobj_fabric::gid_table::pick_best_gid(&table);
        let gid = table
            .iter()
            .find(|e| e.index == index)
            .map_or(Gid::ZERO, |e| e.gid);
        let params = RcParams {
            gid_index: u8::try_from(index).unwrap_or(0),
            ..RcParams::default()
        }
        .within(device.info());
        Ok((gid, params))
    }

    /// A rail on `device`, with `buffers` staging buffers counted against
    /// `shares`, and DC initiators under the limits of `dcis`.
    fn build(
        provider: &'static str,
        device: Device,
        cfg: &RdmaConfig,
        buffers: usize,
        shares: &Arc<KeyShares>,
        dcis: DciPool,
    ) -> Result<Rail, StartError> {
        let name = device.info().name.clone();
        dci::log_setup(&device, cfg.dc_key);
        let (gid, params) = Rail::addressing(&device)?;
        let pd = device.alloc_pd()?;
        let pool = StagingPool::sharing(&pd, cfg.chunk_size, buffers, shares.clone())?;
        let kept = match cfg.map_store_files {
            true => cfg
                .store_mapping_cache
                .unwrap_or((cfg.chunk_size as u64).saturating_mul(buffers as u64)),
            false => 0,
        };
        let mapped = MappedCache::new(pool.pd(), kept);
        let pairs = Pairs::new(Limits {
            per_key: cfg.pairs_per_key,
            total: cfg.pairs_total,
            idle: cfg.pair_idle,
        });
        Ok(Rail {
            name,
            provider,
            device,
            pd,
            gid,
            params,
            pool,
            mapped,
            pairs,
            dcis,
        })
    }

    /// Whether its port is active.
    pub fn active(&self) -> bool {
        matches!(self.device.query_port(1), Ok(p) if p.state == PortState::Active)
    }

    /// Its gauges now.
    pub fn gauges(&self) -> crate::metrics::Gauges {
        let total = self.pool.total();
        crate::metrics::Gauges {
            device: self.name.clone(),
            staging_total: total,
            staging_in_use: total.saturating_sub(self.pool.available()),
            pairs: self.pairs.len(),
            dc_initiators: self.dcis.in_use(),
        }
    }

    /// For the start-up line.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}) GID {:?} ({}), staging {} x {} MiB",
            self.name,
            self.provider,
            self.gid,
            self.gid
                .ipv4()
                .map_or_else(|| "not IPv4".to_string(), |ip| ip.to_string()),
            self.pool.total(),
            self.pool.chunk() >> 20
        )
    }
}

/// `total` buffers divided among `n` devices as evenly as can be (the first
/// ones get the remainder), at least one each.
pub fn split(total: usize, n: usize) -> Vec<usize> {
    let n = n.max(1);
    (0..n)
        .map(|i| (total / n + usize::from(i < total % n)).max(1))
        .collect()
}

/// Opens the devices `cfg.device` names (see [`Devices`]) and builds a rail
/// on each: the staging buffers divided among them, the per-key staging
/// share, the pair limits and the DC limits counted over all of them.
pub(super) fn open_all(
    cfg: &RdmaConfig,
    soft: Arc<dyn Provider>,
    verbs: Arc<dyn Provider>,
) -> Result<Vec<Rail>, StartError> {
    let spec = Devices::parse(cfg.device.as_deref()).map_err(StartError::Devices)?;
    let choice = cfg.provider;
    let provider_of = |n: &str| match choice {
        RdmaProvider::Soft => soft.clone(),
        RdmaProvider::Verbs => verbs.clone(),
        RdmaProvider::Auto if n.starts_with("soft") => soft.clone(),
        RdmaProvider::Auto => verbs.clone(),
    };
    let hardware = match choice {
        RdmaProvider::Soft => Vec::new(),
        _ => verbs.device_names().unwrap_or_default(),
    };
    let no_verbs_device =
        || StartError::Devices("--rdma-provider verbs: libibverbs lists no device".to_string());
    let names: Vec<String> = match (&spec, choice) {
        (Devices::Named(names), _) => names.clone(),
        (Devices::Default, RdmaProvider::Verbs) => {
            vec![hardware.first().cloned().ok_or_else(no_verbs_device)?]
        }
        (Devices::Default, _) => vec![hardware
            .first()
            .cloned()
            .unwrap_or_else(|| "soft0".to_string())],
        (Devices::All, RdmaProvider::Verbs) if hardware.is_empty() => return Err(no_verbs_device()),
        (Devices::All, _) if !hardware.is_empty() => hardware,
        (Devices::All, _) => soft.device_names()?,
    };
    let mut opened = Vec::new();
    for name in &names {
        let p = provider_of(name);
        let device = Device::open(p.as_ref(), name)?;
        if spec == Devices::All {
            let up = matches!(device.query_port(1), Ok(a) if a.state == PortState::Active);
            if !up {
                tracing::info!(device = %name, "RDMA device skipped: its port is not active");
                continue;
            }
        }
        opened.push((p.name(), device));
    }
    if opened.is_empty() {
        return Err(StartError::Devices(format!(
            "no RDMA device with an active port among {names:?}"
        )));
    }
    let total = cfg.buffers.max(1);
    let counts = split(total, opened.len());
    let per_key = cfg
        .staging_per_key
        .unwrap_or(total)
        .clamp(1, counts.iter().sum());
    let shares = Arc::new(KeyShares::new(per_key));
    let dc_limits = DciPool::new(cfg.dc_initiators, cfg.dc_per_key);
    let mut rails = Vec::with_capacity(opened.len());
    for (i, ((provider, device), buffers)) in opened.into_iter().zip(counts).enumerate() {
        let dcis = if i == 0 {
            dc_limits.clone()
        } else {
            dc_limits.sharing()
        };
        rails.push(Rail::build(provider, device, cfg, buffers, &shares, dcis)?);
    }
    Ok(rails)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn buffers_are_divided_evenly_with_at_least_one_each() {
        assert_eq!(split(32, 1), vec![32]);
        assert_eq!(split(32, 2), vec![16, 16]);
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(2, 3), vec![1, 1, 1]);
        assert_eq!(split(8, 0), vec![8]);
        assert_eq!(split(8, 8).iter().sum::<usize>(), 8);
    }
}
