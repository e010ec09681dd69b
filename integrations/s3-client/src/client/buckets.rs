//! Buckets: CreateBucket, DeleteBucket, ListBuckets.

use bytes::Bytes;
use http::header::HeaderMap;
use http::Method;

use super::S3Client;
use crate::http as h;
use crate::{BucketEntry, Error, Result};

impl S3Client {
    /// `PUT /bucket` (with a LocationConstraint outside us-east-1).
    pub async fn create_bucket(&self, bucket: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        let body = if self.inner.cfg.region == "us-east-1" {
            Bytes::new()
        } else {
            Bytes::from(crate::xml::create_bucket_body(&self.inner.cfg.region))
        };
        self.plain(
            Method::PUT,
            &h::path_query(bucket, None, &[]),
            &HeaderMap::new(),
            body,
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `DELETE /bucket` (it must be empty).
    pub async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        h::check_bucket(bucket)?;
        self.plain(
            Method::DELETE,
            &h::path_query(bucket, None, &[]),
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?
        .ok()?;
        Ok(())
    }

    /// `GET /`: the buckets.
    pub async fn list_buckets(&self) -> Result<Vec<BucketEntry>> {
        let a = self
            .plain(Method::GET, "/", &HeaderMap::new(), Bytes::new())
            .await?
            .ok()?;
        crate::xml::list_buckets(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }
}
