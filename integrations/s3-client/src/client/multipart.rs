//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, and the upload of a
//! buffer range in parts (completed only when every part succeeded,
//! aborted otherwise).

use bytes::Bytes;
use futures::StreamExt;
use hipobj::Registered;
use http::header::{HeaderMap, ETAG};
use http::Method;

use super::v2_path::V2Spec;
use super::{check_range, Plan, S3Client, MAX_PARTS};
use crate::http as h;
use crate::{CompletedPart, Error, ObjectInfo, Outcome, Result};

/// The bytes CompleteMultipartUpload's limit is for: the object's size, else
/// `parts` of `part_size`.
fn complete_size(parts: usize, part_size: usize, object_size: Option<u64>) -> u64 {
    object_size.unwrap_or((parts as u64).saturating_mul(part_size as u64))
}

/// The ETag S3 gives an object completed from `parts`: the MD5 of the
/// parts' MD5s, then `-` and their number; `None` when a part's ETag is
/// not an MD5 (32 hex digits, quotes aside).
pub(crate) fn multipart_etag(parts: &[CompletedPart]) -> Option<String> {
    use md5::Digest;
    let mut d = md5::Md5::new();
    for p in parts {
        let raw = hex::decode(p.etag.trim_matches('"')).ok()?;
        if raw.len() != 16 {
            return None;
        }
        d.update(&raw);
    }
    Some(format!("{}-{}", hex::encode(d.finalize()), parts.len()))
}

/// Whether `info` is the object completed from `parts` (of `object_size`
/// bytes, when known).
fn completed_by(info: &ObjectInfo, parts: &[CompletedPart], object_size: Option<u64>) -> bool {
    let etag = info.etag.as_deref().map(|e| e.trim_matches('"'));
    let by_etag = etag.is_some() && etag == multipart_etag(parts).as_deref();
    by_etag || object_size == Some(info.size)
}

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
    /// part-number order); the object's ETag. The limit of each attempt
    /// assumes parts of [`ClientConfig::part_size`](crate::ClientConfig::part_size)
    /// (the server joins the parts before it answers): with the real size,
    /// use [`S3Client::complete_multipart_upload_sized`].
    pub async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
    ) -> Result<Option<String>> {
        self.complete_multipart_upload_sized(bucket, key, upload_id, parts, None)
            .await
    }

    /// [`S3Client::complete_multipart_upload`] of an object of
    /// `object_size` bytes (the parts' together), when known.
    ///
    /// Each attempt may take [`Timeouts::for_bytes`](crate::Timeouts::for_bytes)
    /// of the object's size (of `parts × part_size` without one): a server
    /// joins the parts before it answers, in time that grows with the
    /// object. When an attempt fails after the server may have completed
    /// the upload (a timeout, a broken connection, a 5xx) and the next
    /// finds the upload gone (404 `NoSuchUpload`; s3s-fs answers 403
    /// `AccessDenied`), the object is looked at
    /// (HEAD): it is this upload's if its ETag is the one S3 gives the
    /// parts (the MD5 of their MD5s, `-N`), or if `object_size` is given and
    /// is its size; then its ETag is returned, else the server's error.
    pub async fn complete_multipart_upload_sized(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        object_size: Option<u64>,
    ) -> Result<Option<String>> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let cfg = &self.inner.cfg;
        let body = crate::xml::complete_body(parts);
        let limit = cfg
            .timeouts
            .for_bytes(complete_size(parts.len(), cfg.part_size, object_size));
        let (r, attempts) = self
            .plain_within(
                Method::POST,
                &h::path_query(bucket, Some(key), &[("uploadId", Some(upload_id))]),
                &HeaderMap::new(),
                Bytes::from(body),
                limit,
            )
            .await;
        let a = r?;
        // S3 answers an upload that is no more 404 NoSuchUpload; s3s-fs
        // answers 403 AccessDenied (it finds no upload of these credentials).
        let refused = a.error(None);
        let gone = matches!(
            (a.status.as_u16(), refused.code()),
            (404, Some("NoSuchUpload")) | (403, Some("AccessDenied"))
        );
        if gone && attempts > 1 {
            match self.head_object(bucket, key).await {
                Ok(info) if completed_by(&info, parts, object_size) => {
                    tracing::info!(
                        upload_id,
                        "CompleteMultipartUpload: an earlier attempt completed the upload"
                    );
                    return Ok(info.etag);
                }
                Ok(_) | Err(_) => {}
            }
        }
        let a = a.ok()?;
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
        let ps = self.part_size();
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
        self.finish_multipart(bucket, key, uid, results, len as u64)
            .await
    }

    /// A multipart upload over plain HTTP of the `len` bytes that
    /// `read(offset, n)` returns `n` of at a time: parts of
    /// [`ClientConfig::part_size`], [`ClientConfig::concurrency`] at once,
    /// each read when its upload starts; aborted if any part (or read)
    /// fails. For callers whose memory is not registered (a copy of each
    /// part in flight, not of the object).
    pub async fn put_object_http_parts<F>(
        &self,
        bucket: &str,
        key: &str,
        len: u64,
        read: F,
    ) -> Result<Outcome>
    where
        F: Fn(u64, usize) -> Result<Bytes> + Sync,
    {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let ps = self.inner.cfg.part_size as u64;
        let count = len.div_ceil(ps);
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a multipart upload needs at least one byte".into(),
            ));
        }
        if count > MAX_PARTS as u64 {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes in {ps}-byte parts would be {count} parts, more than {MAX_PARTS}"
            )));
        }
        let upload_id = self.create_multipart_upload(bucket, key).await?;
        let uid = upload_id.as_str();
        let read = &read;
        let results: Vec<Result<(u32, Outcome)>> = futures::stream::iter(0..count)
            .map(|i| async move {
                let n = (i + 1) as u32;
                let off = i * ps;
                let data = read(off, ps.min(len - off) as usize)?;
                self.upload_part_http(bucket, key, uid, n, data)
                    .await
                    .map(|o| (n, o))
            })
            .buffer_unordered(self.inner.cfg.concurrency)
            .collect()
            .await;
        self.finish_multipart(bucket, key, uid, results, len).await
    }

    /// Completes the upload `uid` from the parts' results (of `len` bytes
    /// together), or aborts it when a part failed or the completion did.
    async fn finish_multipart(
        &self,
        bucket: &str,
        key: &str,
        uid: &str,
        results: Vec<Result<(u32, Outcome)>>,
        len: u64,
    ) -> Result<Outcome> {
        let count = results.len();
        let mut parts = Vec::with_capacity(count);
        let mut first_err = None;
        for r in results {
            match r {
                Ok((n, o)) if o.etag.is_none() => {
                    first_err.get_or_insert(Error::Protocol(format!(
                        "part {n} was answered without an ETag"
                    )));
                }
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
        let mut protocol = None;
        let mut completed = Vec::with_capacity(count);
        for (n, o) in parts {
            path = path.join(o.path);
            protocol = o.rdma_protocol.or(protocol);
            attempts = attempts.max(o.attempts);
            if reason.is_none() {
                reason = o.fallback_reason;
            }
            completed.push(CompletedPart {
                part_number: n,
                etag: o.etag.unwrap_or_default(),
            });
        }
        let etag = match self
            .complete_multipart_upload_sized(bucket, key, uid, &completed, Some(len))
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
        let mut out = Outcome::new(path, len);
        out.etag = etag;
        out.parts = count as u32;
        out.attempts = attempts;
        out.fallback_reason = reason;
        out.rdma_protocol = protocol;
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
        let v2 = V2Spec {
            bucket: bucket.to_string(),
            key: key.to_string(),
            query: Some(format!("uploadId={upload_id}&partNumber={n}")),
            object_offset: 0,
            size: Some(len as u64),
        };
        self.put_one(&path_query, reg, offset, len, v2, false).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(n: u32, etag: &str) -> CompletedPart {
        CompletedPart {
            part_number: n,
            etag: etag.into(),
        }
    }

    fn info(size: u64, etag: Option<&str>) -> ObjectInfo {
        ObjectInfo {
            size,
            etag: etag.map(str::to_string),
            last_modified: None,
            content_type: None,
            checksum_crc64nvme: None,
        }
    }

    #[test]
    fn the_limit_grows_with_the_object() {
        let t = crate::Timeouts::default();
        // 16 GiB: 10 s + 16 × 30 s, not the 10 s of a small request.
        assert_eq!(complete_size(2, 64 << 20, Some(16 << 30)), 16 << 30);
        assert_eq!(
            t.for_bytes(complete_size(2, 64 << 20, Some(16 << 30))),
            std::time::Duration::from_secs(10 + 16 * 30)
        );
        // Without the size: parts × part size.
        assert_eq!(complete_size(32, 64 << 20, None), 2 << 30);
        assert_eq!(complete_size(usize::MAX, usize::MAX, None), u64::MAX);
    }

    #[test]
    fn multipart_etags_are_md5s_of_md5s() {
        // The MD5s of "a" and "b", and the ETag S3 (and hipobj-store) gives
        // an object of those two parts.
        let parts = [
            part(1, "\"0cc175b9c0f1b6a831c399e269772661\""),
            part(2, "92eb5ffee6ae2fec3ad71c777531578f"),
        ];
        let want = "96e024ba2074fe77e8e965ba43a704be-2";
        assert_eq!(multipart_etag(&parts).as_deref(), Some(want));
        assert_eq!(multipart_etag(&[part(1, "not-hex")]), None);
        assert_eq!(multipart_etag(&[part(1, "abcd")]), None);

        let quoted = format!("\"{want}\"");
        assert!(completed_by(&info(7, Some(&quoted)), &parts, None));
        assert!(!completed_by(&info(7, Some("\"other-2\"")), &parts, None));
        assert!(completed_by(&info(7, Some("\"other\"")), &parts, Some(7)));
        assert!(!completed_by(&info(7, Some("\"other\"")), &parts, Some(8)));
        assert!(!completed_by(&info(7, None), &parts, None));
    }
}
