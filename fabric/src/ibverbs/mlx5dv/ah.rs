//! Address handles of DC targets (`ibv_create_ah`), cached per PD.

use super::super::abi::{ibv_ah_attr, ibv_gid, ibv_global_route};
use super::super::abi_ex::ibv_ah;
use super::super::inner::PdInner;
use super::super::loader::DcVerbsFns;
use super::super::os::{errno, os_err};
use super::Route;
use crate::error::Result;
use hipobj_wire::Gid;
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Handles kept per PD; past this many the cache starts over (the handles
/// in use stay alive with their users).
pub(super) const AH_CACHE_MAX: usize = 1024;

/// The hop limit of DC packets' global route header (hipObject's).
pub(super) const HOP_LIMIT: u8 = 64;

/// One address handle, destroyed when its last user lets go.
pub(super) struct Ah {
    pub(super) ah: NonNull<ibv_ah>,
    fns: DcVerbsFns,
    pd: Arc<PdInner>,
}

// SAFETY: an address handle is immutable after creation; libibverbs'
// verbs taking one are thread safe and it may be destroyed from any thread.
unsafe impl Send for Ah {}
// SAFETY: as above.
unsafe impl Sync for Ah {}

impl fmt::Debug for Ah {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ah").field("ah", &self.ah).finish()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the handle was created by ibv_create_ah in `pd`, which this
        // value keeps allocated, and is destroyed once, here.
        let rc = unsafe { (self.fns.destroy_ah)(self.ah.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.pd.dev.name, rc, "ibv_destroy_ah failed");
        }
    }
}

/// What an address handle is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    gid: Gid,
    lid: u16,
    port: u8,
    sgid_index: u8,
}

/// The PD's address handles by target.
#[derive(Default)]
pub(super) struct AhCache {
    map: Mutex<HashMap<Key, Arc<Ah>>>,
}

impl fmt::Debug for AhCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.map.lock().map_or(0, |m| m.len());
        f.debug_struct("AhCache").field("handles", &n).finish()
    }
}

/// The `ibv_ah_attr` of a DC target at `gid`/`lid` reached from `route`.
pub(super) fn ah_attr(gid: Gid, lid: u16, route: &Route) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: gid.0 },
            flow_label: 0,
            sgid_index: route.sgid_index,
            hop_limit: HOP_LIMIT,
            traffic_class: 0,
        },
        dlid: lid,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: route.port,
    }
}

impl AhCache {
    /// The handle for `gid`/`lid` from `route`, made on first use.
    pub(super) fn get(
        &self,
        pd: &Arc<PdInner>,
        fns: DcVerbsFns,
        gid: Gid,
        lid: u16,
        route: &Route,
    ) -> Result<Arc<Ah>> {
        let key = Key {
            gid,
            lid,
            port: route.port,
            sgid_index: route.sgid_index,
        };
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ah) = map.get(&key) {
            return Ok(ah.clone());
        }
        let mut attr = ah_attr(gid, lid, route);
        // SAFETY: the PD is live (held by `pd`); `attr` is a valid
        // ibv_ah_attr that the call only reads.
        let raw = unsafe { (fns.create_ah)(pd.pd.as_ptr(), &mut attr) };
        let ah = NonNull::new(raw).ok_or_else(|| os_err("ibv_create_ah", errno()))?;
        let ah = Arc::new(Ah {
            ah,
            fns,
            pd: pd.clone(),
        });
        if map.len() >= AH_CACHE_MAX {
            map.clear();
        }
        map.insert(key, ah.clone());
        Ok(ah)
    }
}
