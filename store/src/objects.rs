//! Object operations: put, get, head, delete, copy, in the store's terms
//! plus s3s's DTOs where they are the natural form.

use std::fs;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::conditions::{self, ReadConditions};
use crate::copy::copy_range;
use crate::error::io_err;
use crate::fsio::TmpPath;
use crate::meta::{millis, now_ms, timestamp, Attributes, Checksums, ObjectMeta, FORMAT};
use crate::names::{random_id, valid_key};
use crate::read::{FileRange, FileStream, READ_WITH_OPEN_MAX};
use crate::receive::{check_length, md5_hex, receive_body, MAX_PUT};
use crate::store::{blocking, commit_object, open_object, remove_object, Store};

/// A key checked: 400 KeyTooLongError beyond 1024 bytes.
pub fn check_key(key: &str) -> S3Result<()> {
    if valid_key(key) {
        Ok(())
    } else {
        Err(s3_error!(KeyTooLongError, "Your key is too long"))
    }
}

/// The stored headers of a write (`$input`: a PutObjectInput,
/// CreateMultipartUploadInput or CopyObjectInput, its fields moved out).
macro_rules! attributes_of {
    ($input:ident) => {
        $crate::objects::attributes(
            $input.content_type,
            $input.content_encoding,
            $input.content_disposition,
            $input.content_language,
            $input.cache_control,
            $input.expires.as_ref(),
            $input.website_redirect_location,
            $input.metadata,
        )
    };
}
pub(crate) use attributes_of;

/// The headers of a write, as stored.
#[allow(clippy::too_many_arguments)]
pub fn attributes(
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_disposition: Option<String>,
    content_language: Option<String>,
    cache_control: Option<String>,
    expires: Option<&Timestamp>,
    website_redirect_location: Option<String>,
    metadata: Option<Metadata>,
) -> Attributes {
    Attributes {
        content_type,
        content_encoding,
        content_disposition,
        content_language,
        cache_control,
        expires_ms: expires.map(millis),
        website_redirect_location,
        user_metadata: metadata.unwrap_or_default().into_iter().collect(),
    }
}

fn user_metadata(a: &Attributes) -> Option<Metadata> {
    (!a.user_metadata.is_empty()).then(|| {
        a.user_metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

/// The byte range a GET or HEAD serves: `(start, len, Content-Range,
/// parts count)`.
fn select(
    meta: &ObjectMeta,
    range: Option<&Range>,
    part_number: Option<i32>,
) -> S3Result<(u64, u64, Option<String>, Option<i32>)> {
    let size = meta.size;
    let content_range = |start: u64, len: u64| format!("bytes {start}-{}/{size}", start + len - 1);
    match (range, part_number) {
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidRequest,
            "Cannot specify both Range header and partNumber query parameter"
        )),
        (Some(r), None) => {
            if size == 0 {
                return Err(s3_error!(
                    InvalidRange,
                    "The requested range is not satisfiable"
                ));
            }
            let r = r.check(size)?;
            let len = r.end - r.start;
            Ok((r.start, len, Some(content_range(r.start, len)), None))
        }
        (None, Some(n)) => {
            let invalid = || {
                let mut e = S3Error::with_message(
                    S3ErrorCode::Custom("InvalidPartNumber".into()),
                    "The requested partnumber is not satisfiable",
                );
                e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
                e
            };
            if meta.part_sizes.is_empty() {
                if n != 1 {
                    return Err(invalid());
                }
                let cr = (size > 0).then(|| content_range(0, size));
                return Ok((0, size, cr, Some(1)));
            }
            let i = usize::try_from(n)
                .ok()
                .filter(|i| (1..=meta.part_sizes.len()).contains(i))
                .ok_or_else(invalid)?;
            let start: u64 = meta.part_sizes[..i - 1].iter().sum();
            let len = meta.part_sizes[i - 1];
            let cr = (len > 0).then(|| content_range(start, len));
            let count = i32::try_from(meta.part_sizes.len()).unwrap_or(i32::MAX);
            Ok((start, len, cr, Some(count)))
        }
        (None, None) => Ok((0, size, None, None)),
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What GET and HEAD answer about an object besides its bytes: the range
/// served and what describes it.
#[derive(Debug)]
struct ReadView {
    /// The first byte served.
    start: u64,
    /// How many bytes are served.
    len: u64,
    /// `Content-Range`, when a range or part was asked for.
    content_range: Option<String>,
    /// `x-amz-mp-parts-count`, for a part of a multipart object.
    parts_count: Option<i32>,
    /// The checksums, given only when the whole object is served.
    checksums: Checksums,
}

/// The whole of an object's `file` of `size` bytes, when the object is
/// small ([`READ_WITH_OPEN_MAX`]) and the file holds exactly that many
/// (blocking). Anything else (a larger object, a file shorter or longer
/// than its record, a failed read) is left to the ordinary reads, which
/// report it as they always have. Read before the request's conditions
/// are checked: a small object's bytes are cheaper to read than a second
/// trip to the blocking pool, even for the few conditional GETs that
/// then send none.
fn read_small(file: &fs::File, size: u64) -> Option<Bytes> {
    if size > READ_WITH_OPEN_MAX {
        return None;
    }
    let mut buf = vec![0u8; usize::try_from(size).ok()?];
    file.read_exact_at(&mut buf, 0).ok()?;
    // One more byte would mean the file is longer than its record.
    let mut extra = [0u8; 1];
    match file.read_at(&mut extra, size) {
        Ok(0) => Some(Bytes::from(buf)),
        _ => None,
    }
}

/// The conditions checked (304/412), then the range or part selected.
fn read_view(
    meta: &ObjectMeta,
    conditions: &ReadConditions<'_>,
    range: Option<&Range>,
    part_number: Option<i32>,
) -> S3Result<ReadView> {
    if let Some(e) = conditions::read_error(conditions::evaluate(
        conditions,
        &meta.etag,
        meta.last_modified_ms,
    )) {
        return Err(e);
    }
    let (start, len, content_range, parts_count) = select(meta, range, part_number)?;
    let whole = range.is_none() && part_number.is_none();
    Ok(ReadView {
        start,
        len,
        content_range,
        parts_count: parts_count.filter(|_| !meta.part_sizes.is_empty()),
        checksums: if whole {
            meta.checksums.clone()
        } else {
            Checksums::default()
        },
    })
}

/// The stored content headers a GET replaces (`response-content-type` and
/// the like); HEAD replaces none.
#[derive(Debug, Default)]
struct ContentOverrides {
    content_type: Option<ContentType>,
    content_encoding: Option<ContentEncoding>,
    content_disposition: Option<ContentDisposition>,
    content_language: Option<ContentLanguage>,
    cache_control: Option<CacheControl>,
    expires: Option<Expires>,
}

/// A GetObjectOutput or HeadObjectOutput (`$out`, with its own fields
/// given) for `$meta` served as `$view`: the fields GET and HEAD answer
/// alike, in one place.
macro_rules! read_output {
    ($out:ident { $($field:ident: $value:expr),* $(,)? }, $meta:expr, $view:expr, $overrides:expr) => {{
        let meta: &ObjectMeta = $meta;
        let view: ReadView = $view;
        let o: ContentOverrides = $overrides;
        let a = &meta.attributes;
        $out {
            $($field: $value,)*
            accept_ranges: Some("bytes".into()),
            content_length: Some(to_i64(view.len)),
            content_range: view.content_range,
            parts_count: view.parts_count,
            e_tag: Some(ETag::Strong(meta.etag.clone())),
            last_modified: Some(timestamp(meta.last_modified_ms)),
            metadata: user_metadata(a),
            content_type: o.content_type.or_else(|| a.content_type.clone()),
            content_encoding: o.content_encoding.or_else(|| a.content_encoding.clone()),
            content_disposition: o
                .content_disposition
                .or_else(|| a.content_disposition.clone()),
            content_language: o.content_language.or_else(|| a.content_language.clone()),
            cache_control: o.cache_control.or_else(|| a.cache_control.clone()),
            expires: o.expires.or_else(|| a.expires_ms.map(timestamp)),
            website_redirect_location: a.website_redirect_location.clone(),
            checksum_crc32: view.checksums.crc32,
            checksum_crc32c: view.checksums.crc32c,
            checksum_sha1: view.checksums.sha1,
            checksum_sha256: view.checksums.sha256,
            checksum_crc64nvme: view.checksums.crc64nvme,
            ..Default::default()
        }
    }};
}

impl Store {
    pub(crate) async fn put_object_op(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let S3Request {
            input,
            headers,
            trailing_headers,
            ..
        } = req;
        check_key(&input.key)?;
        let bucket = self.bucket(&input.bucket)?;
        check_length(input.content_length)?;
        let (if_match, if_none_match) = (input.if_match.clone(), input.if_none_match.clone());
        {
            let state = bucket.lock();
            let current = state.objects.get(&input.key).map(|m| m.etag.as_str());
            conditions::check_write(if_match.as_ref(), if_none_match.as_ref(), current)?;
        }
        let (fsync, trailers) = (self.fsync(), trailing_headers.as_ref());
        let received = receive_body!(input, &bucket.dir.tmp(), &headers, trailers, fsync).await?;
        let meta = ObjectMeta {
            format: FORMAT,
            key: input.key,
            size: received.size,
            etag: received.etag,
            last_modified_ms: now_ms(),
            attributes: attributes_of!(input),
            checksums: received.checksums,
            part_sizes: Vec::new(),
            data: random_id().map_err(io_err("random id"))?,
        };
        let tmp = received.tmp;
        let meta = blocking(move || {
            commit_object(&bucket, meta, tmp, fsync, |cur| {
                conditions::check_write(
                    if_match.as_ref(),
                    if_none_match.as_ref(),
                    cur.map(|m| m.etag.as_str()),
                )
            })
        })
        .await?;
        let c = meta.checksums.clone();
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(meta.etag.clone())),
            checksum_crc32: c.crc32,
            checksum_crc32c: c.crc32c,
            checksum_sha1: c.sha1,
            checksum_sha256: c.sha256,
            checksum_crc64nvme: c.crc64nvme,
            ..Default::default()
        }))
    }

    pub(crate) async fn get_object_op(
        &self,
        input: GetObjectInput,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        check_key(&input.key)?;
        let bucket = self.bucket(&input.bucket)?;
        let key = input.key.clone();
        let (meta, file, contents) = blocking(move || {
            let (meta, file) = open_object(&bucket, &key)?;
            let contents = read_small(&file, meta.size);
            Ok((meta, file, contents))
        })
        .await?;
        let conditions = ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let view = read_view(&meta, &conditions, input.range.as_ref(), input.part_number)?;
        let whole = view.start == 0 && view.len == meta.size;
        let mut range = FileRange::new(file, view.start, view.len);
        if let Some(c) = contents {
            range = range.with_contents(c);
        }
        let range = range.with_object_crc64nvme(
            meta.checksums
                .crc64nvme
                .clone()
                .filter(|_| whole && meta.part_sizes.is_empty()),
        );
        let body = StreamingBlob::wrap(FileStream::new(range.clone()));
        let overrides = ContentOverrides {
            content_type: input.response_content_type,
            content_encoding: input.response_content_encoding,
            content_disposition: input.response_content_disposition,
            content_language: input.response_content_language,
            cache_control: input.response_cache_control,
            expires: input.response_expires,
        };
        let mut resp = S3Response::new(read_output!(
            GetObjectOutput { body: Some(body) },
            &meta,
            view,
            overrides
        ));
        // A reader in this process (the gateway's RDMA engine) may take the
        // bytes from the file itself instead of from the body.
        resp.extensions.insert(range);
        Ok(resp)
    }

    pub(crate) async fn head_object_op(
        &self,
        input: HeadObjectInput,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        check_key(&input.key)?;
        let bucket = self.bucket(&input.bucket)?;
        let meta: Arc<ObjectMeta> = bucket
            .lock()
            .objects
            .get(&input.key)
            .cloned()
            .ok_or_else(|| s3_error!(NoSuchKey, "The specified key does not exist."))?;
        let conditions = ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let view = read_view(&meta, &conditions, input.range.as_ref(), input.part_number)?;
        Ok(S3Response::new(read_output!(
            HeadObjectOutput {},
            &meta,
            view,
            ContentOverrides::default()
        )))
    }

    pub(crate) async fn delete_object_op(&self, bucket: &str, key: &str) -> S3Result<bool> {
        check_key(key)?;
        let bucket = self.bucket(bucket)?;
        let key = key.to_owned();
        let fsync = self.fsync();
        blocking(move || remove_object(&bucket, &key, fsync)).await
    }

    pub(crate) async fn delete_objects_op(
        &self,
        input: DeleteObjectsInput,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema"
            ));
        }
        let quiet = input.delete.quiet.unwrap_or(false);
        let fsync = self.fsync();
        let objects = input.delete.objects;
        let (deleted, errors) = blocking(move || {
            let mut deleted = Vec::new();
            let mut errors = Vec::new();
            for o in objects {
                let r = check_key(&o.key).and_then(|()| remove_object(&bucket, &o.key, fsync));
                match r {
                    Ok(_) => {
                        if !quiet {
                            deleted.push(DeletedObject {
                                key: Some(o.key),
                                version_id: o.version_id,
                                ..Default::default()
                            });
                        }
                    }
                    Err(e) => errors.push(Error {
                        code: Some(e.code().as_str().to_owned()),
                        key: Some(o.key),
                        message: e.message().map(str::to_owned),
                        version_id: o.version_id,
                    }),
                }
            }
            Ok((deleted, errors))
        })
        .await?;
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    pub(crate) async fn copy_object_op(
        &self,
        input: CopyObjectInput,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
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
        check_key(&input.key)?;
        check_key(src_key)?;
        let dst = self.bucket(&input.bucket)?;
        let src = self.bucket(src_bucket)?;
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str().eq_ignore_ascii_case(MetadataDirective::REPLACE));
        if **src_bucket == input.bucket && **src_key == input.key && !replace {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        let k = src_key.to_string();
        let s = src.clone();
        let (meta, mut file) = blocking(move || open_object(&s, &k)).await?;
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
        if meta.size > MAX_PUT {
            return Err(s3_error!(
                InvalidRequest,
                "The specified copy source is larger than the maximum allowable size for a copy source: {MAX_PUT}"
            ));
        }
        let attrs = if replace {
            attributes_of!(input)
        } else {
            meta.attributes.clone()
        };
        let fsync = self.fsync();
        let key = input.key;
        let out = blocking(move || {
            let tmp = TmpPath::new_in(&dst.dir.tmp()).map_err(io_err("copy"))?;
            let multipart = !meta.part_sizes.is_empty();
            let md5 = copy_range(&mut file, 0, meta.size, tmp.path(), multipart, fsync)
                .map_err(io_err("copy"))?;
            let new = ObjectMeta {
                format: FORMAT,
                key,
                size: meta.size,
                etag: md5.map_or_else(|| meta.etag.clone(), |m| md5_hex(&m)),
                last_modified_ms: now_ms(),
                attributes: attrs,
                checksums: if multipart {
                    Checksums::default()
                } else {
                    meta.checksums.clone()
                },
                part_sizes: Vec::new(),
                data: random_id().map_err(io_err("random id"))?,
            };
            commit_object(&dst, new, tmp, fsync, |_| Ok(()))
        })
        .await?;
        let c = out.checksums.clone();
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(out.etag.clone())),
                last_modified: Some(timestamp(out.last_modified_ms)),
                checksum_crc32: c.crc32,
                checksum_crc32c: c.crc32c,
                checksum_sha1: c.sha1,
                checksum_sha256: c.sha256,
                checksum_crc64nvme: c.crc64nvme,
                ..Default::default()
            }),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_small_file_of_exactly_its_recorded_size_is_read_with_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..5000).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = fs::File::open(&p).unwrap();
        assert_eq!(read_small(&f, 5000).unwrap(), &data[..]);
        // A record longer or shorter than the file: left to the ordinary
        // reads, which report it.
        assert!(read_small(&f, 5001).is_none());
        assert!(read_small(&f, 4999).is_none());
        assert_eq!(read_small(&f, 0), None);
        let empty = dir.path().join("e");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(read_small(&fs::File::open(&empty).unwrap(), 0).unwrap(), "");
        // A large object is not read here at all.
        let big = dir.path().join("big");
        std::fs::write(&big, vec![1u8; READ_WITH_OPEN_MAX as usize + 1]).unwrap();
        let f = fs::File::open(&big).unwrap();
        assert!(read_small(&f, READ_WITH_OPEN_MAX + 1).is_none());
        assert!(read_small(&f, READ_WITH_OPEN_MAX).is_none());
    }
}
