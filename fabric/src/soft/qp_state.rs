//! The QP state machine: which transitions `modify` allows and which
//! attributes each one requires or accepts (IB spec 11.2.5, as libibverbs'
//! `ibv_modify_qp` and the kernel's `ib_modify_qp_is_ok` enforce it).

use crate::types::{AccessFlags, QpAttr, QpAttrMask, QpState, QpType};

const M_STATE: u32 = QpAttrMask::STATE.bits();
const M_CUR: u32 = QpAttrMask::CUR_STATE.bits();

fn rules(qp_type: QpType, from: QpState, to: QpState) -> Option<(u32, u32)> {
    use QpState::*;
    type M = QpAttrMask;
    let rc = qp_type == QpType::Rc;
    let (req, opt) = match (from, to) {
        (_, Reset) | (_, Err) => (M::EMPTY, M::EMPTY),
        (Reset, Init) => {
            if rc {
                (M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, M::EMPTY)
            } else {
                (M::PKEY_INDEX | M::PORT, M::EMPTY)
            }
        }
        (Init, Init) => (M::EMPTY, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        (Init, Rtr) => {
            if rc {
                (
                    M::AV
                        | M::PATH_MTU
                        | M::DEST_QPN
                        | M::RQ_PSN
                        | M::MAX_DEST_RD_ATOMIC
                        | M::MIN_RNR_TIMER,
                    M::ACCESS_FLAGS | M::PKEY_INDEX,
                )
            } else {
                (M::PATH_MTU, M::AV)
            }
        }
        (Rtr, Rts) => (
            M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
            M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::CUR_STATE,
        ),
        (Rts, Rts) => (M::EMPTY, M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::CUR_STATE),
        _ => return None,
    };
    Some((req.bits(), opt.bits()))
}

/// Checks a modify from `cur`; returns the target state or why not.
pub(crate) fn check(
    qp_type: QpType,
    cur: QpState,
    attr: &QpAttr,
    mask: QpAttrMask,
) -> Result<QpState, String> {
    let m = mask.bits();
    if m & M_STATE == 0 {
        return Err("the mask must include IBV_QP_STATE".into());
    }
    let to = attr.qp_state;
    let (req, opt) = rules(qp_type, cur, to)
        .ok_or_else(|| format!("transition {cur:?} -> {to:?} is not allowed"))?;
    let given = m & !(M_STATE | M_CUR);
    if given & req != req {
        return Err(format!(
            "{cur:?} -> {to:?} requires {:?}, missing {:?}",
            QpAttrMask(req),
            QpAttrMask(req & !given)
        ));
    }
    if given & !(req | opt) != 0 {
        return Err(format!(
            "{cur:?} -> {to:?} does not accept {:?}",
            QpAttrMask(given & !(req | opt))
        ));
    }
    if mask.contains(QpAttrMask::PORT) && attr.port_num != 1 {
        return Err(format!("port {} does not exist", attr.port_num));
    }
    if mask.contains(QpAttrMask::ACCESS_FLAGS) {
        let allowed = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        if attr.qp_access_flags.bits() & !allowed.bits() != 0 {
            return Err(format!(
                "access flags {:?} are not QP access flags",
                attr.qp_access_flags
            ));
        }
    }
    if mask.contains(QpAttrMask::AV) {
        match attr.ah_attr.grh {
            None => return Err("a RoCE address vector needs a global route (GRH)".into()),
            Some(g) if g.sgid_index != 0 => {
                return Err(format!(
                    "source GID index {} is outside the table",
                    g.sgid_index
                ))
            }
            Some(_) => {}
        }
    }
    if mask.contains(QpAttrMask::DEST_QPN) && attr.dest_qp_num > super::psn::PSN_MASK {
        return Err(format!("QP number {:#x} exceeds 24 bits", attr.dest_qp_num));
    }
    if (mask.contains(QpAttrMask::RQ_PSN) && attr.rq_psn > super::psn::PSN_MASK)
        || (mask.contains(QpAttrMask::SQ_PSN) && attr.sq_psn > super::psn::PSN_MASK)
    {
        return Err("PSNs are 24 bits".into());
    }
    if mask.contains(QpAttrMask::RETRY_CNT) && attr.retry_cnt > 7 {
        return Err(format!("retry_cnt {} exceeds 7", attr.retry_cnt));
    }
    if mask.contains(QpAttrMask::RNR_RETRY) && attr.rnr_retry > 7 {
        return Err(format!("rnr_retry {} exceeds 7", attr.rnr_retry));
    }
    if mask.contains(QpAttrMask::TIMEOUT) && attr.timeout > 31 {
        return Err(format!("timeout {} exceeds 31", attr.timeout));
    }
    if mask.contains(QpAttrMask::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
        return Err(format!("min_rnr_timer {} exceeds 31", attr.min_rnr_timer));
    }
    Ok(to)
}

/// Copies the masked attributes of `attr` into `cur`.
pub(crate) fn apply(cur: &mut QpAttr, attr: &QpAttr, mask: QpAttrMask) {
    type M = QpAttrMask;
    cur.qp_state = attr.qp_state;
    if mask.contains(M::ACCESS_FLAGS) {
        cur.qp_access_flags = attr.qp_access_flags;
    }
    if mask.contains(M::PKEY_INDEX) {
        cur.pkey_index = attr.pkey_index;
    }
    if mask.contains(M::PORT) {
        cur.port_num = attr.port_num;
    }
    if mask.contains(M::AV) {
        cur.ah_attr = attr.ah_attr;
    }
    if mask.contains(M::PATH_MTU) {
        cur.path_mtu = attr.path_mtu;
    }
    if mask.contains(M::DEST_QPN) {
        cur.dest_qp_num = attr.dest_qp_num;
    }
    if mask.contains(M::RQ_PSN) {
        cur.rq_psn = attr.rq_psn;
    }
    if mask.contains(M::SQ_PSN) {
        cur.sq_psn = attr.sq_psn;
    }
    if mask.contains(M::MAX_DEST_RD_ATOMIC) {
        cur.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if mask.contains(M::MAX_QP_RD_ATOMIC) {
        cur.max_rd_atomic = attr.max_rd_atomic;
    }
    if mask.contains(M::MIN_RNR_TIMER) {
        cur.min_rnr_timer = attr.min_rnr_timer;
    }
    if mask.contains(M::TIMEOUT) {
        cur.timeout = attr.timeout;
    }
    if mask.contains(M::RETRY_CNT) {
        cur.retry_cnt = attr.retry_cnt;
    }
    if mask.contains(M::RNR_RETRY) {
        cur.rnr_retry = attr.rnr_retry;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(state: QpState) -> QpAttr {
        QpAttr {
            qp_state: state,
            port_num: 1,
            ..QpAttr::default()
        }
    }

    #[test]
    fn reset_to_init_needs_port_pkey_access() {
        let m = QpAttrMask::STATE | QpAttrMask::PORT | QpAttrMask::PKEY_INDEX;
        assert!(check(QpType::Rc, QpState::Reset, &to(QpState::Init), m).is_err());
        let m = m | QpAttrMask::ACCESS_FLAGS;
        assert_eq!(
            check(QpType::Rc, QpState::Reset, &to(QpState::Init), m),
            Ok(QpState::Init)
        );
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let m = QpAttrMask::STATE;
        for (from, target) in [
            (QpState::Reset, QpState::Rtr),
            (QpState::Reset, QpState::Rts),
            (QpState::Init, QpState::Rts),
            (QpState::Rts, QpState::Rtr),
            (QpState::Err, QpState::Init),
            (QpState::Err, QpState::Rts),
        ] {
            assert!(
                check(QpType::Rc, from, &to(target), m).is_err(),
                "{from:?} -> {target:?}"
            );
        }
        for from in [
            QpState::Reset,
            QpState::Init,
            QpState::Rtr,
            QpState::Rts,
            QpState::Err,
        ] {
            assert!(check(QpType::Rc, from, &to(QpState::Reset), m).is_ok());
            assert!(check(QpType::Rc, from, &to(QpState::Err), m).is_ok());
        }
    }

    #[test]
    fn unexpected_attributes_are_refused() {
        let m = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
        assert!(check(QpType::Rc, QpState::Init, &to(QpState::Init), m).is_err());
        let missing = QpAttrMask::STATE | QpAttrMask::TIMEOUT;
        assert!(check(QpType::Rc, QpState::Rtr, &to(QpState::Rts), missing).is_err());
    }
}
