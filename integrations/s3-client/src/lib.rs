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
mod xml;

pub use checksum::{crc64nvme, is_full_object, verify as verify_checksum, Crc64Nvme};
pub use client::S3Client;
/// [`Outcome::rdma_protocol`] of a hipobj-rc-v2 transfer.
pub const PROTOCOL_V2: &str = "hipobj-rc-v2";
/// [`Outcome::rdma_protocol`] of a transfer by the handshake flow.
pub const PROTOCOL_HANDSHAKE: &str = "handshake";

pub use config::{
    ClientConfig, RdmaProtocol, Timeouts, DEFAULT_ATTEMPTS, DEFAULT_CONCURRENCY,
    DEFAULT_ENDPOINT_COOLDOWN, DEFAULT_NO_RDMA_TTL, DEFAULT_PART_SIZE, MIN_PART_SIZE,
};
pub use error::{Error, Result};
pub use raw::{RawAnswer, RawAuth, RawRequest};

/// How the bytes moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// By RDMA: the server wrote or read the registered buffer.
    Rdma,
    /// In plain HTTP bodies (fallback, or no RDMA configured).
    Http,
    /// A multipart upload whose parts went both ways.
    Mixed,
}

impl Path {
    /// `"rdma"`, `"http"` or `"mixed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Path::Rdma => "rdma",
            Path::Http => "http",
            Path::Mixed => "mixed",
        }
    }

    /// The path of two transfers together: the same path, else
    /// [`Path::Mixed`] (the parts of one GET or upload that went both ways).
    ///
    /// ```
    /// use hipobj_s3::Path;
    /// assert_eq!(Path::Rdma.join(Path::Rdma), Path::Rdma);
    /// assert_eq!(Path::Rdma.join(Path::Http), Path::Mixed);
    /// assert_eq!(Path::Mixed.join(Path::Http), Path::Mixed);
    /// ```
    pub fn join(self, other: Path) -> Path {
        if self == other {
            self
        } else {
            Path::Mixed
        }
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a GET, PUT, part or multipart upload did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Bytes moved into or out of the buffer (or the stream).
    pub bytes: u64,
    /// The path they took.
    pub path: Path,
    /// The object's (or part's) ETag as the server sent it.
    pub etag: Option<String>,
    /// The `x-amz-checksum-crc64nvme` sent (PUT) or received (GET).
    pub checksum_crc64nvme: Option<String>,
    /// Whether the bytes were checked against a server's checksum (GET).
    pub checksum_verified: bool,
    /// The whole object's size when the answer tells it (GET).
    pub object_size: Option<u64>,
    /// The `Content-Range` of a range or part GET.
    pub content_range: Option<String>,
    /// The HTTP status of the (last) answer.
    pub status: u16,
    /// Parts of a multipart upload (1 otherwise).
    pub parts: u32,
    /// Attempts made (the most of any part).
    pub attempts: u32,
    /// Why the bytes went over HTTP, when RDMA was possible in principle.
    pub fallback_reason: Option<String>,
    /// The RDMA protocol that moved the bytes: `hipobj-rc-v2` or
    /// `handshake` (of the last part, for a multipart upload); `None` over
    /// HTTP.
    pub rdma_protocol: Option<&'static str>,
}

impl Outcome {
    /// `bytes` moved by `path`, in one request (`parts` 1) and one attempt,
    /// status 200, nothing else known: for callers that combine transfers
    /// into one outcome (ranged GETs of one object) and fill in the rest.
    pub fn new(path: Path, bytes: u64) -> Outcome {
        Outcome {
            bytes,
            path,
            etag: None,
            checksum_crc64nvme: None,
            checksum_verified: false,
            object_size: None,
            content_range: None,
            status: 200,
            parts: 1,
            attempts: 1,
            fallback_reason: None,
            rdma_protocol: None,
        }
    }
}

/// Which bytes of an object a GET asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The whole object.
    Whole,
    /// Bytes `first..=last` (HTTP `Range: bytes=first-last`).
    Range {
        /// First byte.
        first: u64,
        /// Last byte, inclusive.
        last: u64,
    },
    /// One part of an object uploaded in parts (`?partNumber=`).
    Part(u32),
}

/// A HEAD of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// `Content-Length`.
    pub size: u64,
    /// `ETag`.
    pub etag: Option<String>,
    /// `Last-Modified`.
    pub last_modified: Option<String>,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `x-amz-checksum-crc64nvme`, when the server keeps one.
    pub checksum_crc64nvme: Option<String>,
}

/// The options of a ListObjectsV2 request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only keys starting with it.
    pub prefix: Option<String>,
    /// Roll keys up to the first occurrence after the prefix (usually `/`).
    pub delimiter: Option<String>,
    /// Where the previous page ended.
    pub continuation_token: Option<String>,
    /// Only keys after it.
    pub start_after: Option<String>,
    /// At most this many keys (the server's default is 1000).
    pub max_keys: Option<u32>,
}

/// One page of a ListObjectsV2 answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListPage {
    /// The objects.
    pub objects: Vec<ObjectEntry>,
    /// The rolled-up prefixes (with a delimiter).
    pub common_prefixes: Vec<String>,
    /// Whether more pages follow.
    pub is_truncated: bool,
    /// The token of the next page.
    pub next_continuation_token: Option<String>,
    /// `KeyCount`.
    pub key_count: Option<u64>,
}

/// An object in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectEntry {
    /// The key.
    pub key: String,
    /// Its size.
    pub size: u64,
    /// Its ETag.
    pub etag: Option<String>,
    /// `LastModified`.
    pub last_modified: Option<String>,
    /// `StorageClass`.
    pub storage_class: Option<String>,
}

/// A bucket in a ListBuckets answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketEntry {
    /// Its name.
    pub name: String,
    /// `CreationDate`.
    pub creation_date: Option<String>,
}

/// A part for CompleteMultipartUpload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedPart {
    /// Its number (1 to 10000).
    pub part_number: u32,
    /// The ETag UploadPart answered.
    pub etag: String,
}
