//! The values the client's API takes and returns: how bytes moved
//! ([`Path`], [`Outcome`]), what a GET selects, HEAD and listing answers,
//! and the parts of a multipart upload. Re-exported at the crate root.

/// [`Outcome::rdma_protocol`] of a hipobj-rc-v2 transfer.
pub const PROTOCOL_V2: &str = "hipobj-rc-v2";
/// [`Outcome::rdma_protocol`] of a transfer by the handshake flow.
pub const PROTOCOL_HANDSHAKE: &str = "handshake";

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
