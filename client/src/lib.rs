//! The hipObject client library, in Rust.
//!
//! An application registers GPU or host buffers, and moves S3 objects into
//! and out of them by RDMA: the library mints the `x-amz-rdma-token` values
//! the application's S3 client sends, connects the queue pairs, and reads
//! the `x-amz-rdma-reply` the server answers. It does not speak HTTP.
//!
//! - [`Hipobj`] and [`Registered`] are the safe Rust API (`handle.rs`).
//! - [`c_semantics`] has the C API's functions on the process-wide
//!   instance; [`ffi`] exports them with hipObject's C ABI
//!   (`include/hipobj.h`).
//! - [`platform`] holds the seams (GPU runtime, RDMA provider, NIC
//!   topology) that tests replace with fakes; the fakes themselves are in
//!   `testing`, built only with the `testing` feature.
//!
//! What an [`Instance`](instance::Instance) holds can be inspected from
//! outside the crate, never changed: registration, deregistration and
//! transfers go through [`Hipobj`]/[`Registered`] or [`c_semantics`].

mod abandoned;
pub mod buffer;
pub mod c_semantics;
pub mod config;
mod connection;
pub mod crc64nvme;
pub mod device;
pub mod error;
pub mod ffi;
mod handle;
pub mod instance;
pub mod options;
pub mod platform;
mod pool;
pub mod select;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod transfer;
pub mod v2;

pub use buffer::Direction;
pub use config::Config;
pub use error::{Error, OpError, Result};
pub use handle::{Hipobj, PairGoodbye, Registered};
pub use options::Options;
pub use transfer::{S3Ops, SyncDirection};
pub use v2::{V2Ops, V2Response, V2Transfer};

/// hipObject's version this library is compatible with.
pub const VERSION: (u32, u32, u32) = (0, 1, 0);
/// The version as a string.
pub const VERSION_STRING: &str = "0.1.0";
