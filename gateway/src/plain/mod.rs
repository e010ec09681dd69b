//! The plain path: requests without an RDMA token, after the auth layer
//! has verified them.
//!
//! - [`forward`]: a request re-addressed and re-signed for the store, both
//!   bodies streamed (which headers go on is [`crate::header_filter`]'s).
//! - [`rechunk`]: a decoded body framed again as aws-chunked, so that a
//!   trailing checksum reaches the store.
//! - [`post_object`]: browser-based uploads (POST Object, a signed form);
//!   [`post_spool`]: where the form's file waits until its length is known.

pub mod forward;
pub mod post_object;
pub mod post_spool;
pub mod rechunk;
