//! The DC side of one protection domain: [`DcPd`].

use super::super::inner::PdInner;
use super::super::loader::DcVerbsFns;
use super::ah::AhCache;
use super::loader::Mlx5Lib;
use super::support::DcSupport;
use std::fmt;
use std::sync::Arc;

/// The DC side of one protection domain: libmlx5, the extended verbs and
/// the address-handle cache, shared by the PD's DCIs. Dropped after them
/// (each holds an `Arc`), so its handles go before the PD.
pub(crate) struct DcPd {
    pub(super) mlx5: Arc<Mlx5Lib>,
    pub(super) fns: DcVerbsFns,
    pub(super) ahs: AhCache,
    // Last: the PD outlives the handles the cache destroys in its drop.
    pub(super) pd: Arc<PdInner>,
}

impl fmt::Debug for DcPd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DcPd")
            .field("device", &self.pd.dev.name)
            .field("mlx5", &self.mlx5)
            .field("ahs", &self.ahs)
            .finish()
    }
}

impl DcPd {
    /// The DC side of `pd`, when its device has DC.
    pub(crate) fn new(support: &DcSupport, pd: &Arc<PdInner>) -> std::result::Result<DcPd, String> {
        let mlx5 = support.clone()?;
        let fns = pd
            .dev
            .lib
            .dc
            .ok_or_else(|| "libibverbs lacks the functions DC needs".to_string())?;
        Ok(DcPd {
            mlx5,
            fns,
            ahs: AhCache::default(),
            pd: pd.clone(),
        })
    }
}
