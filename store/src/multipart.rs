//! Multipart uploads: create, upload a part (or copy one), list parts and
//! uploads, complete (parts joined by the kernel into one file, ETag the
//! MD5 of the parts' MD5s and `-<count>`), abort.

use std::fs;
use std::sync::Arc;

use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Request, S3Response, S3Result};

use crate::checksum;
use crate::conditions::{self, ReadConditions};
use crate::copy::copy_range;
use crate::error::io_err;
use crate::fsio::{self, TmpPath};
use crate::list::{page, url_encode, Query};
use crate::meta::{now_ms, timestamp, Checksums, ObjectMeta, PartMeta, UploadMeta, FORMAT};
use crate::names::{is_id, random_id};
use crate::objects::{attributes, body_error, check_key, empty_body, md5_hex, MAX_PUT};
use crate::store::{blocking, commit_object, open_object, Bucket, Store, Upload};
use crate::write::{write_body, WriteError};

/// The smallest a part may be unless it is the last, as S3: 5 MiB.
pub const MIN_PART: u64 = 5 << 20;
/// The most parts an upload may have.
pub const MAX_PARTS: i32 = 10_000;

fn no_such_upload() -> S3Error {
    s3_error!(
        NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )
}

/// Checks that `upload_id` names an upload of `key` in `bucket`.
fn check_upload(bucket: &Bucket, key: &str, upload_id: &str) -> S3Result<()> {
    if !is_id(upload_id) {
        return Err(no_such_upload());
    }
    let state = bucket.lock();
    match state.uploads.get(upload_id) {
        Some(u) if u.meta.key == key => Ok(()),
        _ => Err(no_such_upload()),
    }
}

fn check_part_number(n: i32) -> S3Result<()> {
    if (1..=MAX_PARTS).contains(&n) {
        Ok(())
    } else {
        Err(s3_error!(
            InvalidArgument,
            "Part number must be an integer between 1 and 10000, inclusive"
        ))
    }
}

/// Makes a written part visible (as [`commit_object`] does for objects).
fn commit_part(
    bucket: &Bucket,
    upload_id: &str,
    part: PartMeta,
    data: TmpPath,
    fsync: bool,
) -> S3Result<PartMeta> {
    let data_path = bucket.dir.part_data(upload_id, part.number, &part.data);
    let record =
        fsio::write_json_aside(&bucket.dir.tmp(), &part, fsync).map_err(io_err("part record"))?;
    let old = {
        let mut state = bucket.lock();
        let Some(upload) = state.uploads.get_mut(upload_id) else {
            return Err(no_such_upload());
        };
        data.rename_to(&data_path).map_err(io_err("part data"))?;
        if let Err(e) = record.rename_to(&bucket.dir.part_record(upload_id, part.number)) {
            let _ = fs::remove_file(&data_path);
            return Err(io_err("part record")(e));
        }
        upload.parts.insert(part.number, part.clone())
    };
    if fsync {
        let _ = fsio::fsync_dir(&bucket.dir.upload(upload_id));
    }
    if let Some(old) = old {
        if old.data != part.data {
            let _ =
                fsio::remove_if_present(&bucket.dir.part_data(upload_id, old.number, &old.data));
        }
    }
    Ok(part)
}

/// Removes an upload's directory (moved aside first so it vanishes at once).
fn remove_upload_dir(bucket: &Bucket, upload_id: &str) {
    let dir = bucket.dir.upload(upload_id);
    let aside = match random_id() {
        Ok(id) => bucket.dir.tmp().join(id),
        Err(_) => dir.clone(),
    };
    let target = if fs::rename(&dir, &aside).is_ok() {
        aside
    } else {
        dir
    };
    if let Err(e) = fs::remove_dir_all(&target) {
        tracing::warn!(error = %e, "store: an upload's files stay until the next start");
    }
}

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
    pub(crate) async fn create_upload_op(
        &self,
        input: CreateMultipartUploadInput,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        check_key(&input.key)?;
        let bucket = self.bucket(&input.bucket)?;
        let upload_id = random_id().map_err(io_err("random id"))?;
        let meta = UploadMeta {
            format: FORMAT,
            upload_id: upload_id.clone(),
            key: input.key.clone(),
            initiated_ms: now_ms(),
            attributes: attributes(
                input.content_type,
                input.content_encoding,
                input.content_disposition,
                input.content_language,
                input.cache_control,
                input.expires.as_ref(),
                input.website_redirect_location,
                input.metadata,
            ),
            checksum_algorithm: input
                .checksum_algorithm
                .as_ref()
                .map(|a| a.as_str().to_owned()),
        };
        let fsync = self.fsync();
        let b = bucket.clone();
        blocking(move || {
            let aside = b.dir.tmp().join(random_id().map_err(io_err("random id"))?);
            let make = || -> std::io::Result<()> {
                fs::create_dir(&aside)?;
                fsio::write_json_atomic(&b.dir.tmp(), &aside.join("upload.json"), &meta, fsync)?;
                Ok(())
            };
            if let Err(e) = make() {
                let _ = fs::remove_dir_all(&aside);
                return Err(io_err("create upload")(e));
            }
            let mut state = b.lock();
            if state.deleted {
                let _ = fs::remove_dir_all(&aside);
                return Err(s3_error!(
                    NoSuchBucket,
                    "The specified bucket does not exist"
                ));
            }
            if let Err(e) = fs::rename(&aside, b.dir.upload(&meta.upload_id)) {
                let _ = fs::remove_dir_all(&aside);
                return Err(io_err("create upload")(e));
            }
            state.uploads.insert(
                meta.upload_id.clone(),
                Upload {
                    meta,
                    parts: Default::default(),
                },
            );
            drop(state);
            if fsync {
                let _ = fsio::fsync_dir(&b.dir.uploads());
            }
            Ok(())
        })
        .await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload_id),
            checksum_algorithm: input.checksum_algorithm,
            ..Default::default()
        }))
    }

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
        if let Some(len) = input.content_length {
            if len < 0 || len as u64 > MAX_PUT {
                return Err(body_error(WriteError::TooLarge(MAX_PUT)));
            }
        }
        let mut given = Checksums {
            crc32: input.checksum_crc32,
            crc32c: input.checksum_crc32c,
            sha1: input.checksum_sha1,
            sha256: input.checksum_sha256,
            crc64nvme: input.checksum_crc64nvme,
        };
        let hasher = checksum::hasher_for(input.checksum_algorithm.as_ref(), &given, &headers)?;
        let fsync = self.fsync();
        let body = input.body.unwrap_or_else(empty_body);
        let written = write_body(&bucket.dir.tmp(), body, hasher, MAX_PUT, fsync)
            .await
            .map_err(body_error)?;
        if let Some(len) = input.content_length {
            if len as u64 != written.size {
                return Err(body_error(WriteError::Body("length mismatch".into())));
            }
        }
        checksum::check_content_md5(input.content_md5.as_deref(), &written.md5)?;
        checksum::add_trailers(&mut given, trailing_headers.as_ref())?;
        let computed = Checksums::from_dto(written.checksums);
        checksum::verify(&computed, &given)?;
        let part = PartMeta {
            format: FORMAT,
            number: input.part_number,
            size: written.size,
            etag: md5_hex(&written.md5),
            last_modified_ms: now_ms(),
            checksums: computed,
            data: random_id().map_err(io_err("random id"))?,
        };
        let tmp = written.tmp;
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

    pub(crate) fn list_uploads_op(
        &self,
        input: ListMultipartUploadsInput,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        let max = match input.max_uploads {
            None => 1000,
            Some(n) if n < 0 => {
                return Err(s3_error!(
                    InvalidArgument,
                    "max-uploads must be a non-negative integer"
                ))
            }
            Some(n) => n.min(1000) as usize,
        };
        let encode = input
            .encoding_type
            .as_ref()
            .is_some_and(|e| e.as_str().eq_ignore_ascii_case(EncodingType::URL));
        let enc = |s: &str| if encode { url_encode(s) } else { s.to_owned() };
        // Keys in order, each with its uploads in order of initiation.
        let mut by_key: std::collections::BTreeMap<String, Vec<UploadMeta>> = Default::default();
        {
            let state = bucket.lock();
            for u in state.uploads.values() {
                by_key
                    .entry(u.meta.key.clone())
                    .or_default()
                    .push(u.meta.clone());
            }
        }
        for v in by_key.values_mut() {
            v.sort_by(|a, b| (a.initiated_ms, &a.upload_id).cmp(&(b.initiated_ms, &b.upload_id)));
        }
        let prefix = input.prefix.clone().unwrap_or_default();
        let key_marker = input.key_marker.clone().filter(|k| !k.is_empty());
        // Uploads of the marker key after the upload-id marker come first.
        let mut first: Vec<UploadMeta> = Vec::new();
        if let (Some(k), Some(id)) = (&key_marker, &input.upload_id_marker) {
            if let Some(v) = by_key.get(k) {
                if let Some(at) = v.iter().position(|u| &u.upload_id == id) {
                    first = v[at + 1..].to_vec();
                }
            }
        }
        let p = page(
            &by_key,
            &Query {
                prefix: &prefix,
                delimiter: input.delimiter.as_deref(),
                after: key_marker.as_deref(),
                max: max.saturating_sub(first.len().min(max)),
            },
        );
        let mut uploads: Vec<MultipartUpload> = Vec::new();
        let mut truncated = p.truncated;
        let listed = first
            .into_iter()
            .chain(p.entries.into_iter().flat_map(|(_, v)| v));
        for u in listed {
            if uploads.len() == max {
                truncated = true;
                break;
            }
            uploads.push(MultipartUpload {
                key: Some(enc(&u.key)),
                upload_id: Some(u.upload_id.clone()),
                initiated: Some(timestamp(u.initiated_ms)),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                ..Default::default()
            });
        }
        let (next_key, next_id) = if truncated {
            match uploads.last() {
                Some(u) => (u.key.clone(), u.upload_id.clone()),
                None => (p.next_after.as_deref().map(enc), None),
            }
        } else {
            (None, None)
        };
        let prefixes: Vec<CommonPrefix> = p
            .prefixes
            .iter()
            .map(|cp| CommonPrefix {
                prefix: Some(enc(cp)),
            })
            .collect();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: Some(enc(&prefix)),
            delimiter: input.delimiter.as_deref().map(enc),
            key_marker: input.key_marker.as_deref().map(enc),
            upload_id_marker: input.upload_id_marker,
            max_uploads: Some(i32::try_from(max).unwrap_or(1000)),
            is_truncated: Some(truncated),
            next_key_marker: next_key,
            next_upload_id_marker: next_id,
            uploads: Some(uploads),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(crate) async fn complete_upload_op(
        &self,
        input: CompleteMultipartUploadInput,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        check_upload(&bucket, &input.key, &input.upload_id)?;
        let listed: Vec<CompletedPart> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default();
        if listed.is_empty() {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema"
            ));
        }
        let (if_match, if_none_match) = (input.if_match, input.if_none_match);
        {
            let state = bucket.lock();
            let current = state.objects.get(&input.key).map(|m| m.etag.as_str());
            conditions::check_write(if_match.as_ref(), if_none_match.as_ref(), current)?;
        }
        // Check the list against the parts and take the upload out of the
        // index (no part can change under the join).
        let upload = {
            let mut state = bucket.lock();
            let upload = state
                .uploads
                .get(&input.upload_id)
                .filter(|u| u.meta.key == input.key)
                .ok_or_else(no_such_upload)?;
            let mut prev = 0;
            for c in &listed {
                let n = c.part_number.unwrap_or(0);
                if n <= prev {
                    return Err(s3_error!(
                        InvalidPartOrder,
                        "The list of parts was not in ascending order. The parts list must be specified in order by part number."
                    ));
                }
                prev = n;
            }
            let invalid = || {
                s3_error!(
                    InvalidPart,
                    "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."
                )
            };
            let mut sizes = Vec::with_capacity(listed.len());
            for c in &listed {
                let p = upload
                    .parts
                    .get(&c.part_number.unwrap_or(0))
                    .ok_or_else(invalid)?;
                if let Some(t) = &c.e_tag {
                    if t.value().trim_matches('"') != p.etag {
                        return Err(invalid());
                    }
                }
                sizes.push(p.size);
            }
            if sizes[..sizes.len() - 1].iter().any(|s| *s < MIN_PART) {
                return Err(s3_error!(
                    EntityTooSmall,
                    "Your proposed upload is smaller than the minimum allowed object size."
                ));
            }
            state
                .uploads
                .remove(&input.upload_id)
                .ok_or_else(no_such_upload)?
        };
        let parts: Vec<PartMeta> = listed
            .iter()
            .filter_map(|c| c.part_number.and_then(|n| upload.parts.get(&n).cloned()))
            .collect();
        let fsync = self.fsync();
        let upload_id = input.upload_id.clone();
        let key = input.key.clone();
        let b = bucket.clone();
        let meta = blocking(move || {
            let joined = (|| -> S3Result<Arc<ObjectMeta>> {
                let tmp = TmpPath::new_in(&b.dir.tmp()).map_err(io_err("complete upload"))?;
                let mut out =
                    fs::File::create_new(tmp.path()).map_err(io_err("complete upload"))?;
                let mut etag_md5 = Md5::default();
                let mut size = 0u64;
                for p in &parts {
                    let mut f = fs::File::open(b.dir.part_data(&upload_id, p.number, &p.data))
                        .map_err(io_err("complete upload"))?;
                    let n = std::io::copy(&mut f, &mut out).map_err(io_err("complete upload"))?;
                    if n != p.size {
                        return Err(io_err("complete upload")(std::io::Error::other(
                            "a part's file is not of its recorded size",
                        )));
                    }
                    size += n;
                    let raw = hex::decode(&p.etag)
                        .map_err(|e| io_err("part etag")(std::io::Error::other(e)))?;
                    etag_md5.update(&raw);
                }
                if fsync {
                    out.sync_all().map_err(io_err("complete upload"))?;
                }
                drop(out);
                let meta = ObjectMeta {
                    format: FORMAT,
                    key: key.clone(),
                    size,
                    etag: format!("{}-{}", md5_hex(&etag_md5.finalize()), parts.len()),
                    last_modified_ms: now_ms(),
                    attributes: upload.meta.attributes.clone(),
                    checksums: Checksums::default(),
                    part_sizes: parts.iter().map(|p| p.size).collect(),
                    data: random_id().map_err(io_err("random id"))?,
                };
                commit_object(&b, meta, tmp, fsync, |cur| {
                    conditions::check_write(
                        if_match.as_ref(),
                        if_none_match.as_ref(),
                        cur.map(|m| m.etag.as_str()),
                    )
                })
            })();
            match joined {
                Ok(meta) => {
                    let _ = fsio::remove_if_present(&b.dir.upload_record(&upload_id));
                    remove_upload_dir(&b, &upload_id);
                    Ok(meta)
                }
                Err(e) => {
                    // The upload stays, as it was.
                    let mut state = b.lock();
                    if !state.deleted {
                        state.uploads.insert(upload_id.clone(), upload);
                    }
                    Err(e)
                }
            }
        })
        .await?;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(ETag::Strong(meta.etag.clone())),
            ..Default::default()
        }))
    }

    pub(crate) async fn abort_upload_op(
        &self,
        input: AbortMultipartUploadInput,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        check_upload(&bucket, &input.key, &input.upload_id)?;
        let upload_id = input.upload_id;
        blocking(move || {
            {
                let mut state = bucket.lock();
                if state.uploads.remove(&upload_id).is_none() {
                    return Err(no_such_upload());
                }
                let _ = fsio::remove_if_present(&bucket.dir.upload_record(&upload_id));
            }
            remove_upload_dir(&bucket, &upload_id);
            Ok(())
        })
        .await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
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
