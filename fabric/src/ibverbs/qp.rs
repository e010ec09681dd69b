//! [`VerbsQp`]: an RC queue pair: modify, query and post.

use super::abi::{ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr};
use super::convert::{self, RawRecvWr, RawSendWr};
use super::inner::PdInner;
use super::os::{check, PROVIDER};
use crate::error::{FabricError, Result};
use crate::seam::{CqOps, QpOps};
use crate::types::{QpAttr, QpAttrMask, QpType, RecvWr, SendWr};
use std::ffi::c_int;
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// An RC queue pair, destroyed on drop.
pub struct VerbsQp {
    pub(super) qp: NonNull<ibv_qp>,
    pub(super) qp_num: u32,
    pub(super) post_send: Option<super::abi::PostSendFn>,
    pub(super) post_recv: Option<super::abi::PostRecvFn>,
    pub(super) pd: Arc<PdInner>,
    pub(super) _send_cq: Arc<dyn CqOps>,
    pub(super) _recv_cq: Arc<dyn CqOps>,
}

// SAFETY: libibverbs' QP verbs and the providers' post entries are thread
// safe (providers lock their work queues).
unsafe impl Send for VerbsQp {}
// SAFETY: as above.
unsafe impl Sync for VerbsQp {}

impl fmt::Debug for VerbsQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsQp")
            .field("device", &self.pd.dev.name)
            .field("qp_num", &self.qp_num)
            .finish()
    }
}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        // SAFETY: the QP was created by this provider and is destroyed once,
        // before the PD and CQs it holds are released.
        let rc = unsafe { (self.pd.dev.lib.destroy_qp)(self.qp.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.pd.dev.name, qp_num = self.qp_num, rc, "ibv_destroy_qp failed");
        }
    }
}

/// `ibv_modify_qp` of a live QP (RC, DC initiator or DC target) made in
/// `pd`.
pub(super) fn modify(
    pd: &PdInner,
    qp: NonNull<ibv_qp>,
    attr: &QpAttr,
    mask: QpAttrMask,
) -> Result<()> {
    let mask = convert::modify_mask(mask)?;
    let mut raw: ibv_qp_attr = convert::qp_attr_to_raw(attr);
    // SAFETY: the caller's QP is live; `raw` is a valid ibv_qp_attr whose
    // masked fields are set.
    let rc = unsafe { (pd.dev.lib.modify_qp)(qp.as_ptr(), &mut raw, mask) };
    check("ibv_modify_qp", rc)
}

/// `ibv_query_qp` of a live QP made in `pd`.
pub(super) fn query(pd: &PdInner, qp: NonNull<ibv_qp>) -> Result<QpAttr> {
    let mut raw = ibv_qp_attr::default();
    let mut init = ibv_qp_init_attr::default();
    // STATE alone is enough for every provider to fill in the rest;
    // asking for the supported set documents what is read.
    let mask = convert::SUPPORTED_MASK.bits() as c_int;
    // SAFETY: the caller's QP is live; `raw` and `init` are valid
    // out-parameters.
    let rc = unsafe { (pd.dev.lib.query_qp)(qp.as_ptr(), &mut raw, mask, &mut init) };
    check("ibv_query_qp", rc)?;
    convert::qp_attr_from_raw(&raw)
}

impl QpOps for VerbsQp {
    fn qp_num(&self) -> u32 {
        self.qp_num
    }

    fn qp_type(&self) -> QpType {
        QpType::Rc
    }

    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        modify(&self.pd, self.qp, attr, mask)
    }

    fn query(&self) -> Result<QpAttr> {
        query(&self.pd, self.qp)
    }

    fn post_send(&self, wr: &SendWr) -> Result<()> {
        let Some(post) = self.post_send else {
            return Err(FabricError::Unsupported {
                verb: "ibv_post_send (no post_send entry in the context's ops)",
                provider: PROVIDER,
            });
        };
        let mut raw = RawSendWr::new(wr)?;
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is live; the WR and the SGE array it points to are
        // owned by `raw`, which lives until after the call (the provider
        // copies the WR into its queue before returning). This is the
        // header's inline ibv_post_send: qp->context->ops.post_send(...).
        let rc = unsafe { post(self.qp.as_ptr(), raw.wr(), &mut bad) };
        check("ibv_post_send", rc)
    }

    fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        let Some(post) = self.post_recv else {
            return Err(FabricError::Unsupported {
                verb: "ibv_post_recv (no post_recv entry in the context's ops)",
                provider: PROVIDER,
            });
        };
        let mut raw = RawRecvWr::new(wr)?;
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        // SAFETY: as post_send, for the receive queue.
        let rc = unsafe { post(self.qp.as_ptr(), raw.wr(), &mut bad) };
        check("ibv_post_recv", rc)
    }
}
