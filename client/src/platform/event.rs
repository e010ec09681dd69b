//! The one wrapper of a GPU runtime's event: [`Event`] holds a handle
//! recorded after an async copy, answers [`HipEvent::done`] with the
//! runtime's query and destroys the handle on drop. What differs between
//! HIP and CUDA (the functions, the status codes, CUDA's context) is an
//! [`EventApi`].

use super::gpu::{HipError, HipEvent};
use std::ffi::c_void;
use std::fmt;

/// How one GPU runtime queries and destroys its events.
///
/// # Safety
///
/// An implementation promises that its events (and the implementation's own
/// value, which may hold a context handle) may be queried from any thread,
/// concurrently, and destroyed from any thread: [`Event`] is `Send` and
/// `Sync` on that promise.
pub(crate) unsafe trait EventApi {
    /// The name [`Event`]'s `Debug` output gives it.
    const NAME: &'static str;
    /// The status of a query whose work has finished.
    const DONE: HipError;
    /// The status of a query whose work has not finished yet.
    const NOT_READY: HipError;

    /// The runtime's status for `event` (`hipEventQuery`, `cuEventQuery`).
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime.
    unsafe fn query(&self, event: *mut c_void) -> HipError;

    /// Destroys `event`.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime, not used again.
    unsafe fn destroy(&self, event: *mut c_void);
}

/// An event recorded on a stream; destroyed on drop.
pub(crate) struct Event<A: EventApi> {
    event: *mut c_void,
    api: A,
}

impl<A: EventApi> Event<A> {
    /// Takes ownership of `event`, destroyed on drop.
    ///
    /// # Safety
    ///
    /// `event` is a live event created through `api`'s runtime, owned by
    /// nothing else.
    pub(crate) unsafe fn new(event: *mut c_void, api: A) -> Event<A> {
        Event { event, api }
    }

    /// The raw handle, to record the event on a stream.
    pub(crate) fn handle(&self) -> *mut c_void {
        self.event
    }
}

// SAFETY: `EventApi`'s contract: the runtime lets any thread query and
// destroy its events, and the API value itself may move between threads.
unsafe impl<A: EventApi> Send for Event<A> {}
// SAFETY: `EventApi`'s contract: querying a shared event is thread-safe,
// and `done` is the only method that uses it through `&self`.
unsafe impl<A: EventApi> Sync for Event<A> {}

impl<A: EventApi> fmt::Debug for Event<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(A::NAME).field("event", &self.event).finish()
    }
}

impl<A: EventApi> HipEvent for Event<A> {
    fn done(&self) -> Result<bool, HipError> {
        // SAFETY: `event` is live: `new`'s caller handed it over, and only
        // `drop` destroys it.
        match unsafe { self.api.query(self.event) } {
            s if s == A::DONE => Ok(true),
            s if s == A::NOT_READY => Ok(false),
            e => Err(e),
        }
    }
}

impl<A: EventApi> Drop for Event<A> {
    fn drop(&mut self) {
        // SAFETY: the event is live and destroyed exactly once, here.
        unsafe { self.api.destroy(self.event) };
    }
}
