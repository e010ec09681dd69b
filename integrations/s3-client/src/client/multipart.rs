//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, and the upload of a
//! buffer range in parts (completed only when every part succeeded,
//! aborted otherwise).

use bytes::Bytes;
use futures::StreamExt;
use hipobj::Registered;
use http::header::{HeaderMap, ETAG};
use http::Method;

use super::{check_range, Plan, S3Client, MAX_PARTS};
use crate::http as h;
use crate::{CompletedPart, Error, Outcome, Result};

impl S3Client {
    /// `POST /bucket/key?uploads`: a new multipart upload's id.
    pub async fn create_multipart_upload(&self, bucket: &str, key: &str) -> Result<String> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let a = self
            .plain(
                Method::POST,
                &h::path_query(bucket, Some(key), &[("uploads", None)]),
                &HeaderMap::new(),
                Bytes::new(),
            )
            .await?
            .ok()?;
        crate::xml::upload_id(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }

    /// `POST /bucket/key?uploadId=`: completes an upload with its parts (in
    /// part-number order); the object's ETag.
    pub async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
    ) -> Result<Option<String>> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let body = crate::xml::complete_body(parts);
        let a = self
            .plain(
                Method::POST,
                &h::path_query(bucket, Some(key), &[("uploadId", Some(upload_id))]),
                &HeaderMap::new(),
                Bytes::from(body),
            )
            .await?
            .ok()?;
        Ok(
            crate::xml::completed_etag(&String::from_utf8_lossy(&a.body))
                .or_else(|| a.header(ETAG.as_str())),
        )
    }

    /// `DELETE /bucket/key?uploadId=`: abandons an upload and its parts.
    pub async fn abort_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<()> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, Some(key), &[("uploadId", Some(upload_id))]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// A multipart upload of `len` bytes of `reg` at `offset`, in parts of
    /// [`ClientConfig::part_size`], [`ClientConfig::concurrency`] at once;
    /// aborted if any part fails, so no object is left behind.
    pub(super) async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        let ps = self.inner.cfg.part_size;
        let count = len.div_ceil(ps);
        if count > MAX_PARTS {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes in {ps}-byte parts would be {count} parts, more than {MAX_PARTS}"
            )));
        }
        if self.inner.cfg.require_rdma {
            if let Plan::Http(reason) = self.plan() {
                return Err(Error::RdmaRequired { reason });
            }
        }
        let upload_id = self.create_multipart_upload(bucket, key).await?;
        let uid = upload_id.as_str();
        let results: Vec<Result<(u32, Outcome)>> = futures::stream::iter(0..count)
            .map(|i| async move {
                let n = (i + 1) as u32;
                let off = offset + i * ps;
                let l = ps.min(len - i * ps);
                self.upload_part(bucket, key, uid, n, reg, off, l)
                    .await
                    .map(|o| (n, o))
            })
            .buffer_unordered(self.inner.cfg.concurrency)
            .collect()
            .await;
        let mut parts = Vec::with_capacity(count);
        let mut first_err = None;
        for r in results {
            match r {
                Ok(p) => parts.push(p),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            if let Err(ae) = self.abort_multipart_upload(bucket, key, uid).await {
                tracing::warn!("aborting multipart upload {uid}: {ae}");
            }
            return Err(e);
        }
        parts.sort_by_key(|p| p.0);
        let mut path = parts[0].1.path;
        let mut attempts = 1;
        let mut reason = None;
        let mut completed = Vec::with_capacity(count);
        for (n, o) in &parts {
            path = path.join(o.path);
            attempts = attempts.max(o.attempts);
            if reason.is_none() {
                reason.clone_from(&o.fallback_reason);
            }
            completed.push(CompletedPart {
                part_number: *n,
                etag: o.etag.clone().ok_or_else(|| {
                    Error::Protocol(format!("part {n} was answered without an ETag"))
                })?,
            });
        }
        let etag = match self
            .complete_multipart_upload(bucket, key, uid, &completed)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                if let Err(ae) = self.abort_multipart_upload(bucket, key, uid).await {
                    tracing::warn!("aborting multipart upload {uid}: {ae}");
                }
                return Err(e);
            }
        };
        let mut out = Outcome::new(path, len as u64);
        out.etag = etag;
        out.parts = count as u32;
        out.attempts = attempts;
        out.fallback_reason = reason;
        Ok(out)
    }

    /// UploadPart of `len` bytes of `reg` at `offset`, by RDMA when
    /// possible; the Outcome's `etag` goes into the [`CompletedPart`].
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        check_range(reg, offset, len)?;
        if len == 0 || part_number == 0 {
            return Err(Error::InvalidArgument(
                "a part needs at least one byte and a number from 1".into(),
            ));
        }
        let n = part_number.to_string();
        let path_query = h::path_query(
            bucket,
            Some(key),
            &[("partNumber", Some(&n)), ("uploadId", Some(upload_id))],
        );
        self.put_one(&path_query, reg, offset, len).await
    }
}
