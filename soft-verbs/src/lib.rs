//! `libibverbs.so.1` on the software RDMA provider.
//!
//! This crate exports rdma-core's verbs with rdma-core's ABI (the structures
//! of `<infiniband/verbs.h>` of rdma-core 44, its extended `verbs_context`
//! and its symbol versions), backed by [`hipobj_fabric::soft`]. Linked into
//! a shared library by `link.sh`, it is one `LD_LIBRARY_PATH` away from any
//! verbs program: `ibv_devinfo`, `ibv_rc_pingpong`, perftest, and this
//! project's own libibverbs provider, all over TCP, without kernel RDMA
//! support. `docs/soft-verbs.md` says what is supported and how it differs
//! from a NIC.
//!
//! The modules, each using only those above it:
//!
//! - [`ffi`]: the guard every exported function runs in (no panic crosses
//!   the ABI), errno, and the extra C declarations the fabric crate's ABI
//!   module lacks.
//! - [`strings`]: the `*_str` and rate conversion helpers.
//! - [`objects`]: the C objects (device, context, PD, MR, CQ, channel, QP)
//!   with the Rust state behind each, and how a C pointer leads back to it.
//! - [`convert`]: attributes, work requests and completions between C and
//!   the fabric's types.
//! - [`device`]: the device list, opening, and the queries.
//! - [`memory`]: protection domains and memory regions.
//! - [`cq`]: completion queues and completion channels.
//! - [`qp`]: queue pairs and their state changes.
//! - [`post`]: posting (`ibv_post_send` and friends, inline data).
//! - [`wr_builder`]: the extended QP's `ibv_wr_*` interface.
//! - [`open`]: `ibv_open_device` and the context's entries.
//! - [`testing`]: for tests, links the library from the build's archive.
//! - [`inert`]: verbs the soft device does not have, and rdma-core's
//!   private interface to its provider libraries, all answering cleanly.

pub mod convert;
pub mod cq;
pub mod device;
pub mod ffi;
pub mod inert;
pub mod memory;
pub mod objects;
pub mod open;
pub mod post;
pub mod qp;
pub mod strings;
pub mod testing;
pub mod wr_builder;
