//! The values the client returns.

use pyo3::prelude::*;

/// What a GET, PUT or part did.
#[pyclass(frozen, get_all, name = "Result", module = "hipobj")]
#[derive(Debug, Clone)]
pub struct Moved {
    /// Bytes moved into or out of the buffer.
    pub bytes: u64,
    /// `"rdma"`, `"http"`, or `"mixed"` (parts went both ways).
    pub path: String,
    /// The object's (or part's) ETag.
    pub etag: Option<String>,
    /// The `x-amz-checksum-crc64nvme` sent (PUT) or received (GET).
    pub checksum: Option<String>,
    /// Whether the bytes were checked against the server's full-object
    /// checksum (GET).
    pub checksum_verified: bool,
    /// The whole object's size when known (GET).
    pub object_size: Option<u64>,
    /// The `Content-Range` of a single ranged GET.
    pub content_range: Option<String>,
    /// The HTTP status of the (last) answer.
    pub status: u16,
    /// Requests the bytes moved in (ranged GETs or upload parts; 1 otherwise).
    pub parts: u32,
    /// Attempts made (the most of any part).
    pub attempts: u32,
    /// Why the bytes went over HTTP, when they did.
    pub fallback_reason: Option<String>,
    /// The RDMA protocol that moved them: `"hipobj-rc-v2"` or
    /// `"handshake"`; `None` over HTTP.
    pub rdma_protocol: Option<String>,
}

#[pymethods]
impl Moved {
    fn __repr__(&self) -> String {
        format!(
            "Result(bytes={}, path={}, etag={}, checksum={}, checksum_verified={}, parts={})",
            self.bytes,
            py_str(Some(&self.path)),
            py_str(self.etag.as_deref()),
            py_str(self.checksum.as_deref()),
            if self.checksum_verified {
                "True"
            } else {
                "False"
            },
            self.parts
        )
    }
}

/// A string as Python shows it (`'...'` or `None`).
fn py_str(s: Option<&str>) -> String {
    match s {
        Some(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        None => "None".into(),
    }
}

impl From<hipobj_s3::Outcome> for Moved {
    fn from(o: hipobj_s3::Outcome) -> Moved {
        Moved {
            bytes: o.bytes,
            path: o.path.as_str().to_string(),
            etag: o.etag,
            checksum: o.checksum_crc64nvme,
            checksum_verified: o.checksum_verified,
            object_size: o.object_size,
            content_range: o.content_range,
            status: o.status,
            parts: o.parts,
            attempts: o.attempts,
            fallback_reason: o.fallback_reason,
            rdma_protocol: o.rdma_protocol.map(str::to_string),
        }
    }
}

/// A HEAD of an object.
#[pyclass(frozen, get_all, module = "hipobj")]
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    pub size: u64,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub content_type: Option<String>,
    pub checksum: Option<String>,
}

#[pymethods]
impl ObjectInfo {
    fn __repr__(&self) -> String {
        format!(
            "ObjectInfo(size={}, etag={})",
            self.size,
            py_str(self.etag.as_deref())
        )
    }
}

impl From<hipobj_s3::ObjectInfo> for ObjectInfo {
    fn from(i: hipobj_s3::ObjectInfo) -> ObjectInfo {
        ObjectInfo {
            size: i.size,
            etag: i.etag,
            last_modified: i.last_modified,
            content_type: i.content_type,
            checksum: i.checksum_crc64nvme,
        }
    }
}

/// An object in a listing.
#[pyclass(frozen, get_all, module = "hipobj")]
#[derive(Debug, Clone)]
pub struct ObjectEntry {
    pub key: String,
    pub size: u64,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub storage_class: Option<String>,
}

#[pymethods]
impl ObjectEntry {
    fn __repr__(&self) -> String {
        format!(
            "ObjectEntry(key={}, size={})",
            py_str(Some(&self.key)),
            self.size
        )
    }
}

/// One page of a ListObjectsV2 answer.
#[pyclass(frozen, get_all, module = "hipobj")]
#[derive(Debug)]
pub struct ListPage {
    pub objects: Vec<Py<ObjectEntry>>,
    pub common_prefixes: Vec<String>,
    pub is_truncated: bool,
    pub next_continuation_token: Option<String>,
    pub key_count: Option<u64>,
}

impl ListPage {
    pub fn new(py: Python<'_>, p: hipobj_s3::ListPage) -> PyResult<ListPage> {
        let objects = p
            .objects
            .into_iter()
            .map(|o| {
                Py::new(
                    py,
                    ObjectEntry {
                        key: o.key,
                        size: o.size,
                        etag: o.etag,
                        last_modified: o.last_modified,
                        storage_class: o.storage_class,
                    },
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(ListPage {
            objects,
            common_prefixes: p.common_prefixes,
            is_truncated: p.is_truncated,
            next_continuation_token: p.next_continuation_token,
            key_count: p.key_count,
        })
    }
}

/// A bucket.
#[pyclass(frozen, get_all, module = "hipobj")]
#[derive(Debug, Clone)]
pub struct Bucket {
    pub name: String,
    pub creation_date: Option<String>,
}
