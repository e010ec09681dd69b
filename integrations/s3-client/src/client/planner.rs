//! [`MultipartPlan`]: how a multipart upload splits its bytes into parts
//! (at most [`MAX_PARTS`]), uploads them [`ClientConfig::concurrency`] at
//! once, and ends: completed only when every part succeeded, aborted
//! otherwise.
//!
//! [`ClientConfig::concurrency`]: crate::ClientConfig::concurrency

use std::future::Future;

use futures::StreamExt;

use super::S3Client;
use crate::{CompletedPart, Error, Outcome, Result};

/// The most parts of a multipart upload.
const MAX_PARTS: u64 = 10_000;

/// `len` bytes in parts of `part_size` (the last one shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MultipartPlan {
    len: u64,
    part_size: u64,
    count: u64,
}

impl MultipartPlan {
    /// The plan of `len` bytes in `part_size`-byte parts; an error when
    /// they would be more than [`MAX_PARTS`].
    pub(super) fn new(len: u64, part_size: u64) -> Result<MultipartPlan> {
        let count = len.div_ceil(part_size);
        if count > MAX_PARTS {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes in {part_size}-byte parts would be {count} parts, more than {MAX_PARTS}"
            )));
        }
        Ok(MultipartPlan {
            len,
            part_size,
            count,
        })
    }

    /// Part `i` (from 0): its number, its first byte and its length.
    fn part(&self, i: u64) -> (u32, u64, usize) {
        let off = i * self.part_size;
        (
            (i + 1) as u32,
            off,
            self.part_size.min(self.len - off) as usize,
        )
    }

    /// Uploads every part into the upload `uid` of `bucket/key`,
    /// `upload(number, first byte, length)` each, the client's
    /// concurrency at once; then completes the upload, or aborts it when a
    /// part failed or the completion did.
    pub(super) async fn run<F, Fut>(
        &self,
        client: &S3Client,
        bucket: &str,
        key: &str,
        uid: &str,
        upload: F,
    ) -> Result<Outcome>
    where
        F: Fn(u32, u64, usize) -> Fut,
        Fut: Future<Output = Result<Outcome>>,
    {
        let upload = &upload;
        let results: Vec<Result<(u32, Outcome)>> = futures::stream::iter(0..self.count)
            .map(|i| async move {
                let (n, off, len) = self.part(i);
                upload(n, off, len).await.map(|o| (n, o))
            })
            .buffer_unordered(client.inner.cfg.concurrency)
            .collect()
            .await;
        self.finish(client, bucket, key, uid, results).await
    }

    /// Completes the upload `uid` from the parts' results, or aborts it
    /// when a part failed or the completion did.
    async fn finish(
        &self,
        client: &S3Client,
        bucket: &str,
        key: &str,
        uid: &str,
        results: Vec<Result<(u32, Outcome)>>,
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
            if let Err(ae) = client.abort_multipart_upload(bucket, key, uid).await {
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
        let etag = match client
            .complete_multipart_upload_sized(bucket, key, uid, &completed, Some(self.len))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                if let Err(ae) = client.abort_multipart_upload(bucket, key, uid).await {
                    tracing::warn!("aborting multipart upload {uid}: {ae}");
                }
                return Err(e);
            }
        };
        let mut out = Outcome::new(path, self.len);
        out.etag = etag;
        out.parts = count as u32;
        out.attempts = attempts;
        out.fallback_reason = reason;
        out.rdma_protocol = protocol;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_bytes() {
        let p = MultipartPlan::new(10, 4).unwrap();
        assert_eq!(p.count, 3);
        assert_eq!(
            (0..3).map(|i| p.part(i)).collect::<Vec<_>>(),
            [(1, 0, 4), (2, 4, 4), (3, 8, 2)]
        );
        assert_eq!(MultipartPlan::new(0, 4).unwrap().count, 0);
        assert!(MultipartPlan::new(MAX_PARTS * 4, 4).is_ok());
        match MultipartPlan::new(MAX_PARTS * 4 + 1, 4) {
            Err(Error::InvalidArgument(m)) => assert_eq!(
                m,
                "40001 bytes in 4-byte parts would be 10001 parts, more than 10000"
            ),
            other => panic!("{other:?}"),
        }
    }
}
