//! A request body received: what PutObject and UploadPart do alike with
//! the bytes they are sent. The declared length is checked, the body
//! streamed into a temporary file while hashed ([`crate::write`]), then its
//! length, `Content-MD5` and checksums (given as headers or trailers)
//! checked against what was computed.

use std::path::Path;

use bytes::Bytes;
use http::HeaderMap;
use s3s::dto::{ChecksumAlgorithm, StreamingBlob};
use s3s::{s3_error, S3Error, S3Result, TrailingHeaders};

use crate::checksum;
use crate::error::internal;
use crate::fsio::TmpPath;
use crate::meta::Checksums;
use crate::write::{write_body, WriteError};

/// The largest object one PUT (or one part, or one copy) may make: 5 GiB,
/// as S3.
pub const MAX_PUT: u64 = 5 << 30;

/// A body write failure as S3 answers it.
pub fn body_error(e: WriteError) -> S3Error {
    match e {
        WriteError::Body(err) => {
            tracing::debug!(error = %err, "store: request body failed");
            match err.downcast::<S3Error>() {
                Ok(s3e) => *s3e,
                Err(_) => s3_error!(
                    IncompleteBody,
                    "You did not provide the number of bytes specified by the Content-Length HTTP header"
                ),
            }
        }
        WriteError::TooLarge(n) => s3_error!(
            EntityTooLarge,
            "Your proposed upload exceeds the maximum allowed size ({n} bytes)"
        ),
        WriteError::Io(e) => internal("write body", e),
    }
}

/// An empty body, for a request that has none.
pub fn empty_body() -> StreamingBlob {
    StreamingBlob::wrap(futures::stream::empty::<Result<Bytes, std::io::Error>>())
}

pub fn md5_hex(md5: &[u8; 16]) -> String {
    hex::encode(md5)
}

/// A declared `Content-Length` no body may have (negative, or over
/// [`MAX_PUT`]): 400 EntityTooLarge before anything is read.
pub fn check_length(content_length: Option<i64>) -> S3Result<()> {
    match content_length {
        Some(len) if len < 0 || len as u64 > MAX_PUT => {
            Err(body_error(WriteError::TooLarge(MAX_PUT)))
        }
        _ => Ok(()),
    }
}

/// What a request says about its body, besides the body.
pub struct Claims<'a> {
    /// `Content-Length`, when sent.
    pub content_length: Option<i64>,
    /// `Content-MD5`, when sent.
    pub content_md5: Option<&'a str>,
    /// `x-amz-checksum-algorithm` / `x-amz-sdk-checksum-algorithm`.
    pub checksum_algorithm: Option<&'a ChecksumAlgorithm>,
    /// The checksums given as headers.
    pub checksums: Checksums,
    /// The request's headers (`x-amz-trailer` announces trailers).
    pub headers: &'a HeaderMap,
    /// The trailers, read once the body has ended.
    pub trailers: Option<&'a TrailingHeaders>,
}

/// [`receive`] of the body of a PutObjectInput or UploadPartInput
/// (`$input`, its fields moved out) into `$tmp_dir`, checked against the
/// input's claims and the request's `$headers` and `$trailers`.
macro_rules! receive_body {
    ($input:ident, $tmp_dir:expr, $headers:expr, $trailers:expr, $fsync:expr) => {
        $crate::receive::receive(
            $tmp_dir,
            $input.body,
            $crate::receive::Claims {
                content_length: $input.content_length,
                content_md5: $input.content_md5.as_deref(),
                checksum_algorithm: $input.checksum_algorithm.as_ref(),
                checksums: $crate::meta::Checksums {
                    crc32: $input.checksum_crc32,
                    crc32c: $input.checksum_crc32c,
                    sha1: $input.checksum_sha1,
                    sha256: $input.checksum_sha256,
                    crc64nvme: $input.checksum_crc64nvme,
                },
                headers: $headers,
                trailers: $trailers,
            },
            $fsync,
        )
    };
}
pub(crate) use receive_body;

/// A body received and checked, in a temporary file.
#[derive(Debug)]
pub struct Received {
    /// The file, removed unless renamed into place.
    pub tmp: TmpPath,
    /// How many bytes it holds.
    pub size: u64,
    /// Their MD5 in hex: the ETag.
    pub etag: String,
    /// The checksums computed (those the client gave or asked for).
    pub checksums: Checksums,
}

/// Receives `body` into a temporary file in `tmp_dir` and checks it
/// against `claims`: its length (400 IncompleteBody), `Content-MD5` (400
/// InvalidDigest / BadDigest) and checksums (400 BadDigest). The caller has
/// checked the declared length with [`check_length`].
pub async fn receive(
    tmp_dir: &Path,
    body: Option<StreamingBlob>,
    claims: Claims<'_>,
    fsync: bool,
) -> S3Result<Received> {
    let Claims {
        content_length,
        content_md5,
        checksum_algorithm,
        checksums: mut given,
        headers,
        trailers,
    } = claims;
    let hasher = checksum::hasher_for(checksum_algorithm, &given, headers)?;
    let body = body.unwrap_or_else(empty_body);
    let written = write_body(tmp_dir, body, hasher, MAX_PUT, fsync)
        .await
        .map_err(body_error)?;
    if let Some(len) = content_length {
        if len as u64 != written.size {
            return Err(body_error(WriteError::Body("length mismatch".into())));
        }
    }
    checksum::check_content_md5(content_md5, &written.md5)?;
    checksum::add_trailers(&mut given, trailers)?;
    let computed = Checksums::from_dto(written.checksums);
    checksum::verify(&computed, &given)?;
    Ok(Received {
        tmp: written.tmp,
        size: written.size,
        etag: md5_hex(&written.md5),
        checksums: computed,
    })
}
