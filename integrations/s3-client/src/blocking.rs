//! The blocking wrapper: the same operations on a runtime of the wrapper's
//! own. Call it from ordinary threads, not from inside an async runtime.
//!
//! ```no_run
//! use std::sync::Arc;
//! use hipobj::{Config, Hipobj};
//! use hipobj_s3::{blocking, ClientConfig, Path};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let lib = Arc::new(Hipobj::new(&Config::with_nic("soft0"))?);
//! let s3 = blocking::S3Client::new(
//!     ClientConfig::new("http://127.0.0.1:9000", "hipobj-test-key", "hipobj-test-secret")
//!         .with_rdma(lib.clone()),
//! )?;
//! s3.create_bucket("bucket")?;
//! let buf = lib.register_owned(vec![1u8; 4 << 20])?;
//! let put = s3.put_object("bucket", "key", &buf, 0, 4 << 20)?;
//! let got = s3.get_object("bucket", "key", &buf, 0, None)?;
//! println!("{} bytes by {}", got.bytes, got.path);
//! # let _ = (put, Path::Rdma);
//! # Ok(()) }
//! ```

use bytes::Bytes;
use hipobj::Registered;

use crate::{
    BucketEntry, ClientConfig, CompletedPart, Error, ListOptions, ListPage, ObjectInfo, Outcome,
    Result, Selection,
};

/// The blocking client: each call runs the async [`crate::S3Client`]'s
/// operation to completion.
#[derive(Debug)]
pub struct S3Client {
    rt: tokio::runtime::Runtime,
    inner: crate::S3Client,
}

impl S3Client {
    /// A client for `cfg.endpoint`, with its own runtime.
    pub fn new(cfg: ClientConfig) -> Result<S3Client> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("starting a runtime: {e}")))?;
        Ok(S3Client {
            rt,
            inner: crate::S3Client::new(cfg)?,
        })
    }

    /// The async client inside (sharing connections).
    pub fn async_client(&self) -> &crate::S3Client {
        &self.inner
    }

    /// See [`crate::S3Client::create_bucket`].
    pub fn create_bucket(&self, bucket: &str) -> Result<()> {
        self.rt.block_on(self.inner.create_bucket(bucket))
    }

    /// See [`crate::S3Client::delete_bucket`].
    pub fn delete_bucket(&self, bucket: &str) -> Result<()> {
        self.rt.block_on(self.inner.delete_bucket(bucket))
    }

    /// See [`crate::S3Client::list_buckets`].
    pub fn list_buckets(&self) -> Result<Vec<BucketEntry>> {
        self.rt.block_on(self.inner.list_buckets())
    }

    /// See [`crate::S3Client::list_objects_v2`].
    pub fn list_objects_v2(&self, bucket: &str, opts: &ListOptions) -> Result<ListPage> {
        self.rt.block_on(self.inner.list_objects_v2(bucket, opts))
    }

    /// See [`crate::S3Client::head_object`].
    pub fn head_object(&self, bucket: &str, key: &str) -> Result<ObjectInfo> {
        self.rt.block_on(self.inner.head_object(bucket, key))
    }

    /// See [`crate::S3Client::delete_object`].
    pub fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        self.rt.block_on(self.inner.delete_object(bucket, key))
    }

    /// See [`crate::S3Client::get_object`].
    pub fn get_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        range: Option<(u64, u64)>,
    ) -> Result<Outcome> {
        self.rt
            .block_on(self.inner.get_object(bucket, key, reg, buf_offset, range))
    }

    /// See [`crate::S3Client::get_object_selection`].
    pub fn get_object_selection(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        sel: Selection,
    ) -> Result<Outcome> {
        self.rt.block_on(
            self.inner
                .get_object_selection(bucket, key, reg, buf_offset, sel),
        )
    }

    /// See [`crate::S3Client::put_object`].
    pub fn put_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        self.rt
            .block_on(self.inner.put_object(bucket, key, reg, offset, len))
    }

    /// See [`crate::S3Client::create_multipart_upload`].
    pub fn create_multipart_upload(&self, bucket: &str, key: &str) -> Result<String> {
        self.rt
            .block_on(self.inner.create_multipart_upload(bucket, key))
    }

    /// See [`crate::S3Client::upload_part`].
    #[allow(clippy::too_many_arguments)]
    pub fn upload_part(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        self.rt.block_on(self.inner.upload_part(
            bucket,
            key,
            upload_id,
            part_number,
            reg,
            offset,
            len,
        ))
    }

    /// See [`crate::S3Client::complete_multipart_upload`].
    pub fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
    ) -> Result<Option<String>> {
        self.rt.block_on(
            self.inner
                .complete_multipart_upload(bucket, key, upload_id, parts),
        )
    }

    /// See [`crate::S3Client::abort_multipart_upload`].
    pub fn abort_multipart_upload(&self, bucket: &str, key: &str, upload_id: &str) -> Result<()> {
        self.rt
            .block_on(self.inner.abort_multipart_upload(bucket, key, upload_id))
    }

    /// See [`crate::S3Client::put_object_http`].
    pub fn put_object_http(&self, bucket: &str, key: &str, data: Bytes) -> Result<Outcome> {
        self.rt
            .block_on(self.inner.put_object_http(bucket, key, data))
    }

    /// See [`crate::S3Client::put_object_http_file`].
    pub fn put_object_http_file(
        &self,
        bucket: &str,
        key: &str,
        file: &std::path::Path,
    ) -> Result<Outcome> {
        self.rt
            .block_on(self.inner.put_object_http_file(bucket, key, file))
    }

    /// See [`crate::S3Client::get_object_http`]; into any `std::io::Write`.
    pub fn get_object_http<W: std::io::Write>(
        &self,
        bucket: &str,
        key: &str,
        sel: Selection,
        writer: &mut W,
    ) -> Result<Outcome> {
        let mut w = SyncWriter(writer);
        self.rt
            .block_on(self.inner.get_object_http(bucket, key, sel, &mut w))
    }
}

/// A `std::io::Write` as a `tokio::io::AsyncWrite` (it blocks, which is what
/// the blocking client does anyway).
struct SyncWriter<'a, W>(&'a mut W);

impl<W: std::io::Write> tokio::io::AsyncWrite for SyncWriter<'_, W> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(self.get_mut().0.write(buf))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(self.get_mut().0.flush())
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
