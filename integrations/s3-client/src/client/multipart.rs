//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, and the upload of a
//! buffer range (or of bytes read on demand) in parts, which
//! [`MultipartPlan`] splits, runs and completes or aborts.

use bytes::Bytes;
use hipobj::Registered;
use http::header::{HeaderMap, ETAG};
use http::Method;

use super::planner::MultipartPlan;
use super::rdma_path::Plan;
use super::v2_path::V2Spec;
use super::{check_range, S3Client};
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
        let given = |e: &String| !e.trim_matches('"').is_empty();
        let etag = crate::xml::completed_etag(&String::from_utf8_lossy(&a.body))
            .filter(given)
            .or_else(|| a.header(ETAG.as_str()).filter(given));
        if etag.is_some() {
            return Ok(etag);
        }
        // Ceph RGW 16 answers an empty `<ETag></ETag>` (a known Ceph bug;
        // its HEAD gives the right one): the object's ETag from a HEAD when
        // the object is this upload's, else the one S3 gives these parts.
        let computed = multipart_etag(parts).map(|e| format!("\"{e}\""));
        match self.head_object(bucket, key).await {
            Ok(info)
                if info.etag.as_ref().is_some_and(given)
                    && completed_by(&info, parts, object_size) =>
            {
                tracing::debug!(
                    upload_id,
                    "CompleteMultipartUpload answered no ETag: taken from HEAD"
                );
                Ok(info.etag)
            }
            _ => Ok(computed),
        }
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
    /// [`ClientConfig::part_size`](crate::ClientConfig::part_size),
    /// [`ClientConfig::concurrency`](crate::ClientConfig::concurrency) at once;
    /// aborted if any part fails, so no object is left behind.
    pub(super) async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        let plan = MultipartPlan::new(len as u64, self.part_size() as u64)?;
        if self.inner.cfg.require_rdma {
            if let Plan::Http(reason) = Plan::of(self) {
                return Err(Error::RdmaRequired { reason });
            }
        }
        let upload_id = self.create_multipart_upload(bucket, key).await?;
        let uid = upload_id.as_str();
        plan.run(self, bucket, key, uid, move |n, off, l| {
            self.upload_part(bucket, key, uid, n, reg, offset + off as usize, l)
        })
        .await
    }

    /// A multipart upload over plain HTTP of the `len` bytes that
    /// `read(offset, n)` returns `n` of at a time: parts of
    /// [`ClientConfig::part_size`](crate::ClientConfig::part_size),
    /// [`ClientConfig::concurrency`](crate::ClientConfig::concurrency) at once,
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
        if len == 0 {
            return Err(Error::InvalidArgument(
                "a multipart upload needs at least one byte".into(),
            ));
        }
        let plan = MultipartPlan::new(len, self.inner.cfg.part_size as u64)?;
        let upload_id = self.create_multipart_upload(bucket, key).await?;
        let uid = upload_id.as_str();
        let read = &read;
        plan.run(self, bucket, key, uid, move |n, off, l| async move {
            let data = read(off, l)?;
            self.upload_part_http(bucket, key, uid, n, data).await
        })
        .await
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

    /// A store on a loopback port that answers CompleteMultipartUpload
    /// with an empty `<ETag></ETag>` (as Ceph RGW 16 does) and HEAD with
    /// `head_etag` and `head_size`.
    fn empty_etag_store(head_etag: &'static str, head_size: u64) -> String {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let head = line.starts_with("HEAD ");
                        let mut len = 0usize;
                        loop {
                            let mut h = String::new();
                            r.read_line(&mut h).unwrap();
                            if h == "\r\n" {
                                break;
                            }
                            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                len = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).unwrap();
                        let answer = if head {
                            format!(
                                "HTTP/1.1 200 OK\r\netag: {head_etag}\r\ncontent-length: {head_size}\r\n\r\n"
                            )
                        } else {
                            let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                                <CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>\
                                <ETag></ETag></CompleteMultipartUploadResult>";
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{xml}",
                                xml.len()
                            )
                        };
                        w.write_all(answer.as_bytes()).unwrap();
                    }
                });
            }
        });
        url
    }

    /// An empty ETag in CompleteMultipartUpload's answer is recovered: the
    /// object's ETag from HEAD when the object is this upload's, else the
    /// ETag S3 gives these parts.
    #[tokio::test]
    async fn an_empty_completed_etag_is_recovered() {
        let parts = [
            part(1, "\"0cc175b9c0f1b6a831c399e269772661\""),
            part(2, "\"92eb5ffee6ae2fec3ad71c777531578f\""),
        ];
        let want = "\"b1a3b4a4ab5e8c2d6b6e1a0c3a8e6f2a-2\"";
        let computed = format!("\"{}\"", multipart_etag(&parts).unwrap());
        // The object is this upload's (its size): HEAD's ETag.
        let c = S3Client::new(crate::ClientConfig::new(
            empty_etag_store(want, 2),
            "a",
            "s",
        ))
        .unwrap();
        let etag = c
            .complete_multipart_upload_sized("b", "k", "u", &parts, Some(2))
            .await
            .unwrap();
        assert_eq!(etag.as_deref(), Some(want));
        // Another object by now (other ETag, other size): this upload's.
        let c = S3Client::new(crate::ClientConfig::new(
            empty_etag_store("\"0123456789abcdef0123456789abcdef\"", 99),
            "a",
            "s",
        ))
        .unwrap();
        let etag = c
            .complete_multipart_upload_sized("b", "k", "u", &parts, Some(2))
            .await
            .unwrap();
        assert_eq!(etag, Some(computed));
    }
}
