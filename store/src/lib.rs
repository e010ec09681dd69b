//! hipobj-store: the embedded S3 store.
//!
//! Buckets and objects in a directory, behind s3s's [`s3s::S3`] trait so
//! that s3s does the protocol. What it keeps and how:
//!
//! - keys never become paths: an object's files are named by the SHA-256
//!   of its key ([`names`]), in a fixed layout ([`layout`]); the real key
//!   is in its JSON record ([`meta`]);
//! - listings come from a per-bucket in-memory index rebuilt from the
//!   records at [`Store::open`] ([`list`]);
//! - a write goes to a temporary file, hashed (MD5 for the ETag, any
//!   checksums asked for) as it streams ([`write`](mod@write)), flushed per
//!   [`StoreConfig::fsync`], renamed into place, then indexed: a failed
//!   or concurrent write never shows a partial object;
//! - reads are 1 MiB at a time ([`read`]).
//!
//! See `docs/store.md` for the layout and what is supported.

#![forbid(unsafe_code)]

mod checksum;
pub mod conditions;
mod copy;
mod error;
mod fsio;
pub mod layout;
pub mod list;
mod listing;
pub mod meta;
mod multipart;
pub mod names;
mod objects;
pub mod read;
mod receive;
mod s3;
mod store;
pub mod write;

pub use error::StoreError;
pub use multipart::{MAX_PARTS, MIN_PART};
pub use read::FileRange;
pub use receive::MAX_PUT;
pub use store::{Store, StoreConfig};
