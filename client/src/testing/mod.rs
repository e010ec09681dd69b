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
//! - [`platforms`]: platforms made of these fakes and the software
//!   provider.
//! - [`line_server`]: a [`ServerPeer`] on TCP driven by a line protocol
//!   in place of S3, for the C programs.

pub mod c_programs;
mod fake_hip;
mod fake_topology;
mod gpu_view;
pub mod line_server;
mod peer;
pub mod platforms;

pub use fake_hip::{CopyBehavior, FakeHip, FakeHipLog};
pub use fake_topology::FakeTopology;
pub use gpu_view::{GpuView, IsDevice};
pub use peer::{PeerStats, ServerPeer};
