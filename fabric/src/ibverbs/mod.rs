//! The libibverbs provider: real RDMA NICs (Broadcom bnxt_re, AMD Pensando
//! ionic, NVIDIA mlx5, Soft-RoCE rxe, ...) behind the seam.
//!
//! As hipObject's `LoadedVerbs` does, the crate neither links to
//! libibverbs nor includes its header: [`loader`] opens `libibverbs.so.1`
//! on first use and resolves its functions into a table, and [`abi`]
//! declares the structures (checked against the real header by
//! `tests/ibverbs_abi.rs`). [`VerbsProvider`] implements the seam over
//! them: device list and open by name, port and GID table (types from
//! sysfs), PDs, plain and dma-buf MRs, CQs polled through the context's ops
//! table, RC QPs (create, modify, query, post), all released in `Drop`,
//! children before parents. DC initiators and targets go through
//! `libmlx5.so.1` ([`mlx5dv`]), on ConnectX devices only; elsewhere they
//! are [`FabricError::NotAvailable`] saying why.
//!
//! Without devices, listing or opening one is [`FabricError::NoDevice`]
//! saying why: libibverbs couldn't be loaded, the kernel has no InfiniBand
//! support (`ibv_get_device_list` fails with ENOSYS), or there are none.
//!
//! [`FabricError::NoDevice`]: crate::FabricError::NoDevice
//! [`FabricError::NotAvailable`]: crate::FabricError::NotAvailable

pub mod abi;
pub mod abi_ex;
mod convert;
pub mod loader;
// In dependency order: each module uses only those above it.
mod cq;
mod device;
mod inner;
pub mod mlx5dv;
mod mr;
mod os;
mod pd;
mod provider;
mod qp;
pub mod sysfs;

pub use cq::VerbsCq;
pub use device::VerbsDevice;
pub use loader::{libibverbs, IbvLib, SONAME};
pub use mr::VerbsMr;
pub use pd::VerbsPd;
pub use provider::VerbsProvider;
pub use qp::VerbsQp;
