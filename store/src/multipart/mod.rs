//! Multipart uploads: create, upload a part (or copy one), list parts and
//! uploads, complete (parts joined by the kernel into one file, ETag the
//! MD5 of the parts' MD5s and `-<count>`), abort.
//!
//! `parts` holds UploadPart, UploadPartCopy and ListParts; `uploads`
//! ListMultipartUploads and CompleteMultipartUpload.

mod parts;
mod uploads;

use std::fs;

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Response, S3Result};

use crate::error::io_err;
use crate::fsio::{self, TmpPath};
use crate::meta::{now_ms, PartMeta, UploadMeta, FORMAT};
use crate::names::{is_id, random_id};
use crate::objects::{attributes_of, check_key};
use crate::store::{blocking, Bucket, Store, Upload};

/// The smallest a part may be unless it is the last, as S3: 5 MiB.
pub const MIN_PART: u64 = 5 << 20;
/// The most parts an upload may have.
pub const MAX_PARTS: i32 = 10_000;

pub(super) fn no_such_upload() -> S3Error {
    s3_error!(
        NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )
}

/// Checks that `upload_id` names an upload of `key` in `bucket`.
pub(super) fn check_upload(bucket: &Bucket, key: &str, upload_id: &str) -> S3Result<()> {
    if !is_id(upload_id) {
        return Err(no_such_upload());
    }
    let state = bucket.lock();
    match state.uploads.get(upload_id) {
        Some(u) if u.meta.key == key => Ok(()),
        _ => Err(no_such_upload()),
    }
}

pub(super) fn check_part_number(n: i32) -> S3Result<()> {
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
pub(super) fn commit_part(
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
pub(super) fn remove_upload_dir(bucket: &Bucket, upload_id: &str) {
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
            attributes: attributes_of!(input),
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
