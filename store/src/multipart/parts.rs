//! Parts of an upload: UploadPart, UploadPartCopy and ListParts.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use crate::conditions::{self, ReadConditions};
use crate::copy::copy_range;
use crate::error::io_err;
use crate::fsio::TmpPath;
use crate::meta::{now_ms, timestamp, Checksums, PartMeta, FORMAT};
use crate::names::random_id;
use crate::receive::{body_error, check_length, md5_hex, receive_body, MAX_PUT};
use crate::store::{blocking, open_object, Store};
use crate::write::WriteError;

use super::{check_part_number, check_upload, commit_part, no_such_upload};

/// Parses `bytes=first-last` of a copy source of `size` bytes.
fn copy_range_of(r: Option<&str>, size: u64) -> S3Result<(u64, u64)> {
    let Some(r) = r else {
        return Ok((0, size));
    };
    let bad = || {
        s3_error!(InvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
    };
    let spec = r.trim().strip_prefix("bytes=").ok_or_else(bad)?;
    let (a, b) = spec.split_once('-').ok_or_else(bad)?;
    let first: u64 = a.parse().map_err(|_| bad())?;
    let last: u64 = b.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(s3_error!(
            InvalidRange,
            "The requested range is not satisfiable"
        ));
    }
    Ok((first, last - first + 1))
}

impl Store {
    pub(crate) async fn upload_part_op(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let S3Request {
            input,
            headers,
            trailing_headers,
            ..
        } = req;
        check_part_number(input.part_number)?;
        let bucket = self.bucket(&input.bucket)?;
        check_upload(&bucket, &input.key, &input.upload_id)?;
        check_length(input.content_length)?;
        let (fsync, trailers) = (self.fsync(), trailing_headers.as_ref());
        let received = receive_body!(input, &bucket.dir.tmp(), &headers, trailers, fsync).await?;
        let part = PartMeta {
            format: FORMAT,
            number: input.part_number,
            size: received.size,
            etag: received.etag,
            last_modified_ms: now_ms(),
            checksums: received.checksums,
            data: random_id().map_err(io_err("random id"))?,
        };
        let tmp = received.tmp;
        let upload_id = input.upload_id;
        let part = blocking(move || commit_part(&bucket, &upload_id, part, tmp, fsync)).await?;
        let c = part.checksums;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag)),
            checksum_crc32: c.crc32,
            checksum_crc32c: c.crc32c,
            checksum_sha1: c.sha1,
            checksum_sha256: c.sha256,
            checksum_crc64nvme: c.crc64nvme,
            ..Default::default()
        }))
    }

    pub(crate) async fn upload_part_copy_op(
        &self,
        input: UploadPartCopyInput,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let CopySource::Bucket {
            bucket: src_bucket,
            key: src_key,
            ..
        } = &input.copy_source
        else {
            return Err(s3_error!(
                NotImplemented,
                "Only bucket copy sources are supported"
            ));
        };
        check_part_number(input.part_number)?;
        let bucket = self.bucket(&input.bucket)?;
        check_upload(&bucket, &input.key, &input.upload_id)?;
        let src = self.bucket(src_bucket)?;
        let k = src_key.to_string();
        let (meta, mut file) = blocking(move || open_object(&src, &k)).await?;
        let c = ReadConditions {
            if_match: input.copy_source_if_match.as_ref(),
            if_none_match: input.copy_source_if_none_match.as_ref(),
            if_modified_since: input.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
        };
        if let Some(e) =
            conditions::copy_error(conditions::evaluate(&c, &meta.etag, meta.last_modified_ms))
        {
            return Err(e);
        }
        let (start, len) = copy_range_of(input.copy_source_range.as_deref(), meta.size)?;
        if len > MAX_PUT {
            return Err(body_error(WriteError::TooLarge(MAX_PUT)));
        }
        let fsync = self.fsync();
        let upload_id = input.upload_id;
        let number = input.part_number;
        let part = blocking(move || {
            let tmp = TmpPath::new_in(&bucket.dir.tmp()).map_err(io_err("copy part"))?;
            let md5 = copy_range(&mut file, start, len, tmp.path(), true, fsync)
                .map_err(io_err("copy part"))?
                .unwrap_or_default();
            let part = PartMeta {
                format: FORMAT,
                number,
                size: len,
                etag: md5_hex(&md5),
                last_modified_ms: now_ms(),
                checksums: Checksums::default(),
                data: random_id().map_err(io_err("random id"))?,
            };
            commit_part(&bucket, &upload_id, part, tmp, fsync)
        })
        .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(part.etag)),
                last_modified: Some(timestamp(part.last_modified_ms)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    pub(crate) fn list_parts_op(
        &self,
        input: ListPartsInput,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        check_upload(&bucket, &input.key, &input.upload_id)?;
        let max = match input.max_parts {
            None => 1000,
            Some(n) if n < 0 => {
                return Err(s3_error!(
                    InvalidArgument,
                    "max-parts must be a non-negative integer"
                ))
            }
            Some(n) => n.min(1000) as usize,
        };
        let marker = input.part_number_marker.unwrap_or(0);
        let state = bucket.lock();
        let upload = state
            .uploads
            .get(&input.upload_id)
            .ok_or_else(no_such_upload)?;
        let mut rest = upload.parts.range(marker.saturating_add(1)..).peekable();
        let mut parts = Vec::new();
        while parts.len() < max {
            let Some((_, p)) = rest.next() else { break };
            parts.push(Part {
                part_number: Some(p.number),
                e_tag: Some(ETag::Strong(p.etag.clone())),
                size: Some(i64::try_from(p.size).unwrap_or(i64::MAX)),
                last_modified: Some(timestamp(p.last_modified_ms)),
                checksum_crc32: p.checksums.crc32.clone(),
                checksum_crc32c: p.checksums.crc32c.clone(),
                checksum_sha1: p.checksums.sha1.clone(),
                checksum_sha256: p.checksums.sha256.clone(),
                checksum_crc64nvme: p.checksums.crc64nvme.clone(),
            });
        }
        let truncated = rest.peek().is_some();
        let next = if truncated {
            parts.last().and_then(|p| p.part_number)
        } else {
            None
        };
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            max_parts: Some(i32::try_from(max).unwrap_or(1000)),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: next,
            is_truncated: Some(truncated),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            parts: Some(parts),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_ranges() {
        assert_eq!(copy_range_of(None, 10).unwrap(), (0, 10));
        assert_eq!(copy_range_of(Some("bytes=2-5"), 10).unwrap(), (2, 4));
        assert_eq!(
            copy_range_of(Some("bytes=2-10"), 10)
                .unwrap_err()
                .code()
                .as_str(),
            "InvalidRange"
        );
        assert_eq!(
            copy_range_of(Some("bytes=-5"), 10)
                .unwrap_err()
                .code()
                .as_str(),
            "InvalidArgument"
        );
    }
}
