//! Uploads as a whole: ListMultipartUploads and CompleteMultipartUpload
//! (parts joined by the kernel into one file, ETag the MD5 of the parts'
//! MD5s and `-<count>`).

use std::fs;
use std::sync::Arc;

use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Response, S3Result};

use crate::conditions::{self};
use crate::error::io_err;
use crate::fsio::{self, TmpPath};
use crate::list::{page, url_encode, Query};
use crate::meta::{now_ms, timestamp, Checksums, ObjectMeta, PartMeta, UploadMeta, FORMAT};
use crate::names::random_id;
use crate::receive::md5_hex;
use crate::store::{blocking, commit_object, Store};

use super::{check_upload, no_such_upload, remove_upload_dir, MIN_PART};

impl Store {
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
}
