//! An S3 client that moves objects between S3 and registered memory by
//! RDMA, with plain-HTTP fallback.
//!
//! Built on the client library's Rust API ([`hipobj::Hipobj`],
//! [`hipobj::Registered`]), hyper and aws-sigv4. For a GET the server
//! writes the object into the buffer by one-sided RDMA WRITE; for a PUT or
//! a part it reads it by RDMA READ. The client signs each request
//! (path-style, `UNSIGNED-PAYLOAD`, the `x-amz-rdma-token` among the signed
//! headers, `Content-Length: 0`); the library performs the RC handshake
//! (sent here as a HEAD of the same key), the reconnect-and-retry on 421,
//! and reads the `x-amz-rdma-reply`.
//!
//! **Fallback.** When the server declines (501), is at its RDMA capacity
//! (503 with `x-amz-rdma-reply: 503`: a handshake refused for want of a QP
//! pair at once, a transfer refused for want of a staging buffer after its
//! attempts; not remembered), answers without
//! `x-amz-rdma-reply` (a server without RDMA, learnt from the handshake
//! before any data moves and remembered per endpoint for
//! [`ClientConfig::no_rdma_ttl`]), or no library is configured, the same
//! buffer is filled from or sent in a plain HTTP body, and
//! [`Outcome::path`] says which path was used.
//! [`ClientConfig::require_rdma`] makes any fallback an
//! [`Error::RdmaRequired`] instead.
//!
//! **Integrity.** Every PUT and part (RDMA or HTTP) carries
//! `x-amz-checksum-crc64nvme` of the real bytes, so a server that ignores
//! the token rejects the empty body rather than store an empty object.
//! GETs of whole objects compare the bytes with the server's
//! `x-amz-checksum-crc64nvme` when it sends one. Multipart uploads are
//! completed only when every part succeeded, and aborted otherwise.
//!
//! **Several endpoints.** [`ClientConfig::endpoint`] may list several
//! gateways in front of one store, separated by commas
//! ([`ClientConfig::with_endpoints`]). Requests go to the current one; an
//! attempt that fails there (no connection, a connection reset or a
//! transfer broken off, a timeout, a 502/503/504 answer) cools it down for
//! [`ClientConfig::endpoint_cooldown`] and the request's next attempt (of
//! [`ClientConfig::attempts`]) goes to the next endpoint, round robin. Each
//! attempt is signed for the endpoint it goes to. RDMA state is per
//! endpoint: a handshake pair made with one gateway is answered 421 at
//! another (the library connects again), a hipobj-rc-v2 session starts over
//! at the next endpoint, and what is remembered (no RDMA, no v2, a v2 PUT
//! cap) is remembered per endpoint.
//!
//! **Raw requests.** [`S3Client::raw`] sends one [`RawRequest`] as it is
//! (a token of the caller's, signed, left out of the signature, or without
//! any signature), once, and returns the whole [`RawAnswer`]: for tools that
//! judge a server's answers themselves (`hipobj conformance`).
//!
//! The async API needs a tokio runtime (either flavor); [`blocking`] wraps
//! it for synchronous code. RDMA transfers run on a small runtime of the
//! client's own (the library's callbacks are synchronous), so parts move in
//! parallel whatever the caller's runtime.
//!
//! The buffers must be memory that outlives every transfer using it,
//! registered with the client's library: host memory
//! ([`Hipobj::register_owned`](hipobj::Hipobj::register_owned), or
//! `'static` memory) or GPU memory
//! ([`Hipobj::register_device`](hipobj::Hipobj::register_device)), taken as
//! `&Registered<'_, 'static>`. Each transfer
//! holds handles of its own ([`Registered::handle`](hipobj::Registered::handle)),
//! so a future dropped or leaked (`mem::forget`) mid-transfer never leaves
//! the server or a blocking thread using freed memory. Checksums and the
//! fallback read and write the buffers with
//! [`Registered::read`](hipobj::Registered::read) and
//! [`write`](hipobj::Registered::write), which go through the GPU runtime's
//! copies for GPU memory.
//!
//! ```no_run
//! use std::sync::Arc;
//! use hipobj::{Config, Hipobj};
//! use hipobj_s3::{ClientConfig, Path, S3Client};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let lib = Arc::new(Hipobj::new(&Config::with_nic("soft0"))?);
//! let cfg = ClientConfig::new("http://127.0.0.1:9000", "hipobj-test-key", "hipobj-test-secret")
//!     .with_rdma(lib.clone());
//! let s3 = S3Client::new(cfg)?;
//! s3.create_bucket("bucket").await?;
//!
//! let buf = lib.register_owned(vec![7u8; 8 << 20])?;
//! let put = s3.put_object("bucket", "key", &buf, 0, 8 << 20).await?;
//! let got = s3.get_object("bucket", "key", &buf, 0, None).await?;
//! assert_eq!(got.bytes, 8 << 20);
//! println!("PUT by {}, GET by {}", put.path, got.path);
//! # let _ = Path::Rdma;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub mod blocking;
mod checksum;
mod client;
mod config;
mod endpoints;
mod error;
mod http;
mod raw;
mod rdma;
mod rdma_v2;
mod retry;
pub mod settings;
mod sign;
pub mod size;
mod types;
mod xml;

pub use checksum::{crc64nvme, is_full_object, verify as verify_checksum, Crc64Nvme};
pub use client::S3Client;

pub use config::{
    ClientConfig, RdmaProtocol, Timeouts, DEFAULT_ATTEMPTS, DEFAULT_AUTO_HANDSHAKE_MAX,
    DEFAULT_CONCURRENCY, DEFAULT_ENDPOINT_COOLDOWN, DEFAULT_NO_RDMA_TTL, DEFAULT_PART_SIZE,
    MIN_PART_SIZE,
};
pub use error::{Error, Result};
pub use raw::{RawAnswer, RawAuth, RawRequest};
pub use types::{
    BucketEntry, CompletedPart, ListOptions, ListPage, ObjectEntry, ObjectInfo, Outcome, Path,
    Selection, PROTOCOL_HANDSHAKE, PROTOCOL_V2,
};
