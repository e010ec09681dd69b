//! Test doubles, compiled only with the `testing` feature (off by
//! default; the crate's tests turn it on through their dev-dependency on
//! the crate itself), so no build of `libhipobj` carries them.
//!
//! - [`ServerPeer`]: the smallest honest server, in process, over any
//!   provider.
//! - [`GpuView`]: a provider wrapper that shows [`FakeHip`] memory as a
//!   NIC would.
//! - [`FakeHip`]: a GPU runtime whose "device memory" is host memory.
//! - [`FakeTopology`]: a NIC topology answering from plain data.
//! - [`c_programs`]: C test programs against `libhipobj.so` (found,
//!   built, run, under valgrind when asked).

pub mod c_programs;
mod fake_hip;
mod fake_topology;
mod gpu_view;
mod peer;

pub use fake_hip::{CopyBehavior, FakeHip, FakeHipLog};
pub use fake_topology::FakeTopology;
pub use gpu_view::{GpuView, IsDevice};
pub use peer::{PeerStats, ServerPeer};
