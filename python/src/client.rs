//! `hipobj.Client`: the S3 client over the client library, moving objects
//! between S3 and Python buffers with the GIL released.

use std::sync::Arc;

use hipobj::{Config, Hipobj};
use hipobj_s3::{ClientConfig, Error, ListOptions, S3Client};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::args::{completed_parts, parse_range};
use crate::errors::{raise, settings_error, to_py};
use crate::memory::{Cache, Entry, View};
use crate::plain;
use crate::transfer::{self, Cut, Window};
use crate::types::{Bucket, ListPage, Moved, ObjectInfo};

/// An S3 client that moves objects by RDMA into and out of Python buffers,
/// with plain-HTTP fallback.
#[pyclass(frozen, module = "hipobj")]
#[derive(Debug)]
pub struct Client {
    rt: tokio::runtime::Runtime,
    s3: S3Client,
    cache: Option<Cache>,
    cut: Cut,
    nic: String,
    rdma_error: Option<String>,
}

/// A caller's buffer exported for a transfer: `len` bytes from `offset`,
/// and, with the client library, the registration holding them (`off`
/// bytes into it).
struct Held {
    view: View,
    offset: usize,
    len: usize,
    reg: Option<(Arc<Entry>, usize)>,
}

impl Held {
    /// A copy of the `len` bytes from `offset`, for a plain-HTTP body.
    fn copy(&self) -> bytes::Bytes {
        // SAFETY: `self.view` exports `[addr, addr + view.len)` for as long
        // as `self` lives, and `hold` checked `offset + len` against it.
        bytes::Bytes::copy_from_slice(unsafe {
            std::slice::from_raw_parts((self.view.addr + self.offset) as *const u8, self.len)
        })
    }
}

impl Client {
    fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    /// Exports `obj` for a transfer of its bytes from `offset` (`length` of
    /// them, else to the end), registered when the client library is there.
    fn hold(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        what: &str,
        write: bool,
        offset: usize,
        length: Option<usize>,
    ) -> PyResult<Held> {
        let view = View::of_arg(obj, what, write)?;
        if let (Some(gpu), None) = (view.gpu, self.cache()) {
            // Without the client library there is no GPU runtime to copy
            // with, and the plain path reads and writes the pointer itself.
            return Err(PyTypeError::new_err(format!(
                "{what}: the DLPack tensor of {} bytes is on {gpu}: GPU memory moves only \
                 through the client library and its GPU runtime, which this client does not \
                 have ({})",
                view.len,
                self.rdma_error
                    .as_deref()
                    .unwrap_or("RDMA was turned off (rdma=False)")
            )));
        }
        if let (Some(gpu), Some(cache)) = (view.gpu, self.cache()) {
            if !cache.is_device_memory(view.addr, view.len) {
                return Err(crate::memory::unknown_gpu_memory(gpu, view.len));
            }
        }
        let room = view.len.checked_sub(offset).ok_or_else(|| {
            PyValueError::new_err(format!(
                "offset {offset} is past the end of {what} ({} bytes)",
                view.len
            ))
        })?;
        let len = match length {
            Some(l) if l > room => {
                return Err(PyValueError::new_err(format!(
                    "{l} bytes at offset {offset} run past the end of {what} ({} bytes)",
                    view.len
                )))
            }
            Some(l) => l,
            None => room,
        };
        let reg = match self.cache() {
            Some(cache) if len > 0 => {
                let entry = cache.entry_for(py, obj, &view, write)?;
                let off = view.addr - entry.addr + offset;
                Some((entry, off))
            }
            _ => None,
        };
        Ok(Held {
            view,
            offset,
            len,
            reg,
        })
    }

    fn no_rdma(&self) -> Error {
        Error::RdmaRequired {
            reason: format!(
                "the client library is not available: {}",
                self.rdma_error
                    .as_deref()
                    .unwrap_or("RDMA was turned off (rdma=False)")
            ),
        }
    }

    /// Runs `f` on the runtime with the GIL released.
    fn run<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: std::future::Future<Output = Result<T, Error>> + Send,
    {
        py.detach(|| self.rt.block_on(f)).map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (
        endpoint=None, access_key=None, secret_key=None, region=None, profile=None, nic=None,
        require_rdma=false, *, rdma=true, addressing_style="path", part_size=64 << 20,
        concurrency=4, attempts=2, max_registrations=64, connect_timeout=5.0,
        request_timeout=10.0, timeout_per_gib=30.0, rdma_protocol=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        endpoint: Option<String>,
        access_key: Option<String>,
        secret_key: Option<String>,
        region: Option<String>,
        profile: Option<String>,
        nic: Option<String>,
        require_rdma: bool,
        rdma: bool,
        addressing_style: &str,
        part_size: usize,
        concurrency: usize,
        attempts: u32,
        max_registrations: usize,
        connect_timeout: f64,
        request_timeout: f64,
        timeout_per_gib: f64,
        rdma_protocol: Option<String>,
    ) -> PyResult<Client> {
        let secs = |name: &str, v: f64| {
            std::time::Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "{name} must be a positive number of seconds, not {v}"
                    ))
                })
        };
        let timeouts = hipobj_s3::Timeouts {
            connect: secs("connect_timeout", connect_timeout)?,
            request: secs("request_timeout", request_timeout)?,
            per_gib: secs("timeout_per_gib", timeout_per_gib)?,
        };
        let r = hipobj_s3::settings::resolve(&hipobj_s3::settings::Args {
            endpoint,
            profile,
            access_key,
            secret_key,
            region,
            nic,
        })
        .map_err(|e| settings_error(py, e))?;
        let virtual_host = match addressing_style {
            "path" => false,
            "virtual" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "addressing_style must be \"path\" or \"virtual\", not {other:?}"
                )))
            }
        };
        if !(hipobj_s3::MIN_PART_SIZE..=5 << 30).contains(&part_size) {
            return Err(PyValueError::new_err(format!(
                "part_size {part_size} is outside 5 MiB..=5 GiB"
            )));
        }
        if concurrency == 0 || attempts == 0 || max_registrations == 0 {
            return Err(PyValueError::new_err(
                "concurrency, attempts and max_registrations must be at least 1",
            ));
        }
        let (lib, rdma_error) = if rdma {
            let nic = r.nic.clone();
            match py.detach(move || Hipobj::new(&Config::with_nic(&nic))) {
                Ok(l) => (Some(Arc::new(l)), None),
                Err(e) => (None, Some(format!("starting it on NIC {}: {e}", r.nic))),
            }
        } else {
            (None, None)
        };
        let mut cfg = ClientConfig::new(r.endpoint, r.access_key, r.secret_key);
        cfg.region = r.region;
        cfg.virtual_host = virtual_host;
        cfg.require_rdma = require_rdma;
        cfg.rdma_protocol = hipobj_s3::settings::resolve_rdma_protocol(rdma_protocol.as_deref())
            .map_err(|e| PyValueError::new_err(format!("rdma_protocol: {e}")))?;
        cfg.part_size = part_size;
        cfg.concurrency = concurrency;
        cfg.attempts = attempts;
        cfg.timeouts = timeouts;
        cfg.rdma_memory = lib.clone();
        let s3 = S3Client::new(cfg).map_err(|e| to_py(py, e))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hipobj-python")
            .enable_all()
            .build()
            .map_err(|e| raise(py, "Error", format!("starting a runtime: {e}"), &[]))?;
        let client = Client {
            rt,
            s3,
            cache: lib.map(|l| Cache::new(l, max_registrations)),
            cut: Cut {
                part_size,
                concurrency,
            },
            nic: r.nic,
            rdma_error,
        };
        if require_rdma && client.cache.is_none() {
            return Err(to_py(py, client.no_rdma()));
        }
        Ok(client)
    }

    /// The endpoint requests go to.
    #[getter]
    fn endpoint(&self) -> String {
        self.s3.endpoint().to_string()
    }

    /// The SigV4 region.
    #[getter]
    fn region(&self) -> String {
        self.s3.config().region.clone()
    }

    /// The NIC the client library was started on.
    #[getter]
    fn nic(&self) -> String {
        self.nic.clone()
    }

    /// Whether RDMA is tried at all (the client library started).
    #[getter]
    fn rdma_available(&self) -> bool {
        self.cache.is_some()
    }

    /// Why the client library did not start, when it did not.
    #[getter]
    fn rdma_error(&self) -> Option<String> {
        self.rdma_error.clone()
    }

    /// Whether fallback to plain HTTP raises instead.
    #[getter]
    fn require_rdma(&self) -> bool {
        self.s3.config().require_rdma
    }

    /// The part size of ranged GETs and multipart uploads.
    #[getter]
    fn part_size(&self) -> usize {
        self.cut.part_size
    }

    /// Buffers registered now (after releasing those of dropped objects).
    #[getter]
    fn registered_buffers(&self, py: Python<'_>) -> usize {
        self.cache().map_or(0, |c| {
            c.sweep(py);
            c.len()
        })
    }

    /// Whether the endpoint is remembered as one without RDMA.
    #[getter]
    fn endpoint_without_rdma(&self) -> bool {
        self.s3.no_rdma_remembered().is_some()
    }

    /// Forgets that the endpoint had no RDMA: the next transfer tries again.
    fn forget_no_rdma(&self) {
        self.s3.forget_no_rdma();
    }

    /// Releases the registration of `buffer`'s memory now; whether there
    /// was one.
    fn release(&self, buffer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Some(c) = self.cache() else {
            return Ok(false);
        };
        let v = View::of(buffer)?;
        c.release(&v)
    }

    /// Releases every registration that no transfer uses; how many.
    fn release_all(&self) -> usize {
        self.cache().map_or(0, Cache::release_all)
    }

    /// Releases the registrations (the client stays usable).
    fn close(&self) {
        self.release_all();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "hipobj.Client(endpoint={:?}, nic={:?}, rdma_available={}, require_rdma={})",
            self.s3.endpoint(),
            self.nic,
            if self.cache.is_some() {
                "True"
            } else {
                "False"
            },
            if self.s3.config().require_rdma {
                "True"
            } else {
                "False"
            }
        )
    }

    /// GET of the object (or of `range`) into `into` at byte `offset`.
    #[pyo3(signature = (bucket, key, into, offset=0, range=None))]
    fn get_object(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        into: &Bound<'_, PyAny>,
        offset: usize,
        range: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Moved> {
        let range = range.map(parse_range).transpose()?;
        let h = self.hold(py, into, "into", true, offset, None)?;
        if h.len == 0 {
            return Err(PyValueError::new_err(format!(
                "offset {offset} leaves no room in into ({} bytes)",
                h.view.len
            )));
        }
        let Some((entry, off)) = &h.reg else {
            return self.get_plain(py, bucket, key, &h, range);
        };
        let w = Window {
            reg: entry.reg(),
            off: *off,
            len: h.len,
        };
        self.run(py, async {
            Ok(transfer::get(&self.s3, bucket, key, w, range, self.cut)
                .await?
                .into())
        })
    }

    /// PUT of `data` (its bytes from `offset`, `length` of them, else all).
    #[pyo3(signature = (bucket, key, data, offset=0, length=None))]
    fn put_object(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        data: &Bound<'_, PyAny>,
        offset: usize,
        length: Option<usize>,
    ) -> PyResult<Moved> {
        let h = self.hold(py, data, "data", false, offset, length)?;
        let Some((entry, off)) = &h.reg else {
            return self.put_plain(py, bucket, key, &h);
        };
        let (reg, off, len) = (entry.reg(), *off, h.len);
        self.run(py, async {
            Ok(self.s3.put_object(bucket, key, reg, off, len).await?.into())
        })
    }

    /// UploadPart of `data` (from `offset`, `length` bytes, else all); the
    /// Result's `etag` goes into `complete_multipart_upload`.
    #[pyo3(signature = (bucket, key, upload_id, part_number, data, offset=0, length=None))]
    #[allow(clippy::too_many_arguments)]
    fn upload_part(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        data: &Bound<'_, PyAny>,
        offset: usize,
        length: Option<usize>,
    ) -> PyResult<Moved> {
        if part_number == 0 || part_number > 10_000 {
            return Err(PyValueError::new_err(format!(
                "part_number {part_number} is outside 1..=10000"
            )));
        }
        let h = self.hold(py, data, "data", false, offset, length)?;
        if h.len == 0 {
            return Err(PyValueError::new_err("a part needs at least one byte"));
        }
        let Some((entry, off)) = &h.reg else {
            if self.s3.config().require_rdma {
                return Err(to_py(py, self.no_rdma()));
            }
            let bytes = h.copy();
            return self.run(py, async {
                let mut o: Moved = self
                    .s3
                    .upload_part_http(bucket, key, upload_id, part_number, bytes)
                    .await?
                    .into();
                o.fallback_reason = Some(self.no_rdma().to_string());
                Ok(o)
            });
        };
        let (reg, off, len) = (entry.reg(), *off, h.len);
        self.run(py, async {
            let o = self
                .s3
                .upload_part(bucket, key, upload_id, part_number, reg, off, len)
                .await?;
            Ok(o.into())
        })
    }

    /// HEAD of an object.
    fn head_object(&self, py: Python<'_>, bucket: &str, key: &str) -> PyResult<ObjectInfo> {
        self.run(py, async {
            Ok(self.s3.head_object(bucket, key).await?.into())
        })
    }

    /// DELETE of an object (a missing one too, as in S3).
    fn delete_object(&self, py: Python<'_>, bucket: &str, key: &str) -> PyResult<()> {
        self.run(py, self.s3.delete_object(bucket, key))
    }

    /// Creates a bucket.
    fn create_bucket(&self, py: Python<'_>, bucket: &str) -> PyResult<()> {
        self.run(py, self.s3.create_bucket(bucket))
    }

    /// Deletes an empty bucket.
    fn delete_bucket(&self, py: Python<'_>, bucket: &str) -> PyResult<()> {
        self.run(py, self.s3.delete_bucket(bucket))
    }

    /// The buckets.
    fn list_buckets(&self, py: Python<'_>) -> PyResult<Vec<Bucket>> {
        let b = self.run(py, self.s3.list_buckets())?;
        Ok(b.into_iter()
            .map(|b| Bucket {
                name: b.name,
                creation_date: b.creation_date,
            })
            .collect())
    }

    /// One page of ListObjectsV2.
    #[pyo3(signature = (bucket, prefix=None, delimiter=None, continuation_token=None, start_after=None, max_keys=None))]
    #[allow(clippy::too_many_arguments)]
    fn list_objects_v2(
        &self,
        py: Python<'_>,
        bucket: &str,
        prefix: Option<String>,
        delimiter: Option<String>,
        continuation_token: Option<String>,
        start_after: Option<String>,
        max_keys: Option<u32>,
    ) -> PyResult<ListPage> {
        let opts = ListOptions {
            prefix,
            delimiter,
            continuation_token,
            start_after,
            max_keys,
        };
        let p = self.run(py, self.s3.list_objects_v2(bucket, &opts))?;
        ListPage::new(py, p)
    }

    /// Starts a multipart upload; its id.
    fn create_multipart_upload(&self, py: Python<'_>, bucket: &str, key: &str) -> PyResult<String> {
        self.run(py, self.s3.create_multipart_upload(bucket, key))
    }

    /// Completes a multipart upload from `(part_number, etag)` pairs (or
    /// the upload_part Results, in order); the object's ETag.
    fn complete_multipart_upload(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Option<String>> {
        let (done, size) = completed_parts(&parts)?;
        self.run(
            py,
            self.s3
                .complete_multipart_upload_sized(bucket, key, upload_id, &done, size),
        )
    }

    /// Abandons a multipart upload.
    fn abort_multipart_upload(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> PyResult<()> {
        self.run(py, self.s3.abort_multipart_upload(bucket, key, upload_id))
    }
}

impl Client {
    /// GET without the client library: plain HTTP into the buffer.
    fn get_plain(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        h: &Held,
        range: Option<(u64, u64)>,
    ) -> PyResult<Moved> {
        if self.s3.config().require_rdma {
            return Err(to_py(py, self.no_rdma()));
        }
        let (addr, room) = (h.view.addr + h.offset, h.len);
        self.run(py, async {
            // SAFETY: `h.view` exports `[addr, addr + room)` writable (the
            // offset was checked against it) and lives until this call
            // returns, which is after the future is done.
            let mut o =
                unsafe { plain::get_into(&self.s3, bucket, key, addr, room, range) }.await?;
            o.fallback_reason = Some(self.no_rdma().to_string());
            Ok(o)
        })
    }

    /// PUT without the client library: the bytes copied into one body.
    fn put_plain(&self, py: Python<'_>, bucket: &str, key: &str, h: &Held) -> PyResult<Moved> {
        if self.s3.config().require_rdma && h.len > 0 {
            return Err(to_py(py, self.no_rdma()));
        }
        if h.len > self.s3.config().part_size {
            // A multipart upload, each part copied when it goes.
            let base = h.view.addr + h.offset;
            let read = move |off: u64, n: usize| {
                // SAFETY: `h.view` exports `[base, base + h.len)` until this
                // call returns, which is after the upload (and every read)
                // is done; hipobj-s3 reads `off + n <= h.len`.
                let part =
                    unsafe { std::slice::from_raw_parts((base + off as usize) as *const u8, n) };
                Ok(bytes::Bytes::copy_from_slice(part))
            };
            return self.run(py, async {
                let mut o: Moved = self
                    .s3
                    .put_object_http_parts(bucket, key, h.len as u64, read)
                    .await?
                    .into();
                o.fallback_reason = Some(self.no_rdma().to_string());
                Ok(o)
            });
        }
        let bytes = h.copy();
        self.run(py, async {
            let mut o: Moved = self.s3.put_object_http(bucket, key, bytes).await?.into();
            if h.len > 0 {
                o.fallback_reason = Some(self.no_rdma().to_string());
            }
            Ok(o)
        })
    }
}
