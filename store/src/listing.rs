//! ListObjects (v1), ListObjectsV2 and ListBuckets over the index.

use base64::Engine as _;
use s3s::dto::*;
use s3s::{s3_error, S3Response, S3Result};

use crate::list::{page, url_encode, Page, Query};
use crate::meta::{timestamp, ObjectMeta};
use crate::store::Store;

use std::sync::Arc;

/// The most entries a page holds, as S3.
const MAX_KEYS: i32 = 1000;

fn max_keys(m: Option<i32>) -> S3Result<usize> {
    match m {
        None => Ok(MAX_KEYS as usize),
        Some(n) if n < 0 => Err(s3_error!(
            InvalidArgument,
            "max-keys must be a non-negative integer"
        )),
        Some(n) => Ok(n.min(MAX_KEYS) as usize),
    }
}

/// Whether the listing URL-encodes (`encoding-type=url`).
fn url(e: Option<&EncodingType>) -> S3Result<bool> {
    match e {
        None => Ok(false),
        Some(e) if e.as_str().eq_ignore_ascii_case(EncodingType::URL) => Ok(true),
        Some(_) => Err(s3_error!(
            InvalidArgument,
            "Invalid Encoding Method specified in Request"
        )),
    }
}

/// A continuation token: the resume point, base64url (opaque to clients).
fn token(after: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(after.as_bytes())
}

fn untoken(t: &str) -> S3Result<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "The continuation token provided is incorrect"
            )
        })
}

fn objects(
    p: &Page<Arc<ObjectMeta>>,
    enc: &dyn Fn(&str) -> String,
) -> (Vec<Object>, Vec<CommonPrefix>) {
    let contents = p
        .entries
        .iter()
        .map(|(k, m)| Object {
            key: Some(enc(k)),
            e_tag: Some(ETag::Strong(m.etag.clone())),
            last_modified: Some(timestamp(m.last_modified_ms)),
            size: Some(i64::try_from(m.size).unwrap_or(i64::MAX)),
            storage_class: Some(ObjectStorageClass::from_static(
                ObjectStorageClass::STANDARD,
            )),
            ..Default::default()
        })
        .collect();
    let prefixes = p
        .prefixes
        .iter()
        .map(|cp| CommonPrefix {
            prefix: Some(enc(cp)),
        })
        .collect();
    (contents, prefixes)
}

impl Store {
    pub(crate) fn list_v2_op(
        &self,
        input: ListObjectsV2Input,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let bucket = self.bucket(&input.bucket)?;
        let max = max_keys(input.max_keys)?;
        let encode = url(input.encoding_type.as_ref())?;
        let after = match &input.continuation_token {
            Some(t) => Some(untoken(t)?),
            None => input.start_after.clone(),
        };
        let prefix = input.prefix.clone().unwrap_or_default();
        let p = {
            let state = bucket.lock();
            page(
                &state.objects,
                &Query {
                    prefix: &prefix,
                    delimiter: input.delimiter.as_deref(),
                    after: after.as_deref(),
                    max,
                },
            )
        };
        let enc = |s: &str| if encode { url_encode(s) } else { s.to_owned() };
        let (contents, prefixes) = objects(&p, &enc);
        let key_count = i32::try_from(contents.len() + prefixes.len()).unwrap_or(i32::MAX);
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(enc(&prefix)),
            max_keys: Some(i32::try_from(max).unwrap_or(MAX_KEYS)),
            key_count: Some(key_count),
            continuation_token: input.continuation_token,
            is_truncated: Some(p.truncated),
            next_continuation_token: p.next_after.as_deref().map(token),
            contents: (!contents.is_empty()).then_some(contents),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            delimiter: input.delimiter.as_deref().map(enc),
            encoding_type: input.encoding_type,
            start_after: input.start_after.as_deref().map(enc),
            ..Default::default()
        }))
    }

    pub(crate) fn list_v1_op(
        &self,
        input: ListObjectsInput,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let bucket = self.bucket(&input.bucket)?;
        let max = max_keys(input.max_keys)?;
        let encode = url(input.encoding_type.as_ref())?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let p = {
            let state = bucket.lock();
            page(
                &state.objects,
                &Query {
                    prefix: &prefix,
                    delimiter: input.delimiter.as_deref(),
                    after: input.marker.as_deref().filter(|m| !m.is_empty()),
                    max,
                },
            )
        };
        let enc = |s: &str| if encode { url_encode(s) } else { s.to_owned() };
        let (contents, prefixes) = objects(&p, &enc);
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            prefix: Some(enc(&prefix)),
            marker: Some(input.marker.as_deref().map(enc).unwrap_or_default()),
            max_keys: Some(i32::try_from(max).unwrap_or(MAX_KEYS)),
            is_truncated: Some(p.truncated),
            next_marker: p.next_after.as_deref().map(enc),
            contents: (!contents.is_empty()).then_some(contents),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            delimiter: input.delimiter.as_deref().map(enc),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(crate) fn list_buckets_op(&self) -> S3Result<S3Response<ListBucketsOutput>> {
        let buckets = self
            .buckets()
            .iter()
            .map(|b| Bucket {
                name: Some(b.name.clone()),
                creation_date: Some(timestamp(b.created_ms)),
                bucket_region: None,
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            ..Default::default()
        }))
    }
}
