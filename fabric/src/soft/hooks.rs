//! The points where a `testing` gate may stop the
//! provider's threads. With the cargo feature `testing`, its hooks; without
//! it, calls that compile to nothing. (The requester's one point, after
//! it takes a same-host grant, calls `testing` directly: it also lets go of
//! the QP's lock there, which a build without the feature does not.)

#[cfg(feature = "testing")]
pub(crate) use super::testing::{responder_access, retiring};

#[cfg(not(feature = "testing"))]
pub(crate) use none::{responder_access, retiring};

#[cfg(not(feature = "testing"))]
mod none {
    use crate::soft::memory::MrInner;

    #[inline(always)]
    pub(crate) fn responder_access(_: &MrInner, _: usize, _: usize) {}

    #[inline(always)]
    pub(crate) fn retiring(_: &MrInner) {}
}
