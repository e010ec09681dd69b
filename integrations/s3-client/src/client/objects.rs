//! Objects as a whole: PUT of a buffer range (one request up to the part
//! size, a multipart upload above it), HEAD and DELETE.

use bytes::Bytes;
use hipobj::Registered;
use hipobj_wire::headers;
use http::header::{HeaderMap, CONTENT_LENGTH, CONTENT_TYPE, ETAG, LAST_MODIFIED};
use http::Method;

use super::v2_path::V2Spec;
use super::{check_range, S3Client};
use crate::http as h;
use crate::{Error, ObjectInfo, Outcome, Result};

impl S3Client {
    /// `DELETE /bucket/key`. Deleting a missing key succeeds, as in S3.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, Some(key), &[]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `HEAD /bucket/key`. A missing object is an [`Error::S3`] with status
    /// 404 ([`Error::is_not_found`]).
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<ObjectInfo> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let a = self
            .plain(
                Method::HEAD,
                &h::path_query(bucket, Some(key), &[]),
                &hm,
                Bytes::new(),
            )
            .await?
            .ok()?;
        let size = a
            .header(CONTENT_LENGTH.as_str())
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| Error::Protocol("HEAD answered without Content-Length".into()))?;
        Ok(ObjectInfo {
            size,
            etag: a.header(ETAG.as_str()),
            last_modified: a.header(LAST_MODIFIED.as_str()),
            content_type: a.header(CONTENT_TYPE.as_str()),
            checksum_crc64nvme: a.header(headers::CHECKSUM_CRC64NVME),
        })
    }

    /// PUT of `len` bytes of `reg` at `offset` as the object: one request
    /// up to [`ClientConfig::part_size`](crate::ClientConfig::part_size), a
    /// multipart upload with
    /// [`ClientConfig::concurrency`](crate::ClientConfig::concurrency) parts
    /// at once above it. Each request
    /// carries the CRC64NVME of its bytes. An empty object goes over HTTP
    /// (RDMA cannot move zero bytes), even with `require_rdma`.
    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        check_range(reg, offset, len)?;
        if len == 0 {
            return self.put_object_http(bucket, key, Bytes::new()).await;
        }
        if len <= self.part_size() {
            let path_query = h::path_query(bucket, Some(key), &[]);
            let v2 = V2Spec {
                bucket: bucket.to_string(),
                key: key.to_string(),
                query: None,
                object_offset: 0,
                size: Some(len as u64),
            };
            return self.put_one(&path_query, reg, offset, len, v2, true).await;
        }
        self.put_multipart(bucket, key, reg, offset, len).await
    }
}
