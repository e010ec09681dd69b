//! Plain-HTTP transfers of bytes, files and streams: PUTs with their
//! CRC64NVME, and GETs into writers checked against the server's.

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use hipobj_wire::headers;
use http::header::{HeaderMap, ETAG};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::transfer::fill_get;
use super::{S3Client, CHUNK, MAX_SINGLE_PUT};
use crate::checksum::{self, Crc64Nvme};
use crate::http::{self as h, BoxError};
use crate::retry;
use crate::{Error, Outcome, Path, Result, Selection};

impl S3Client {
    /// PUT of `data` over plain HTTP, with its CRC64NVME.
    pub async fn put_object_http(&self, bucket: &str, key: &str, data: Bytes) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.put_bytes_http(&h::path_query(bucket, Some(key), &[]), data)
            .await
    }

    /// UploadPart of `data` over plain HTTP, with its CRC64NVME: for
    /// callers without registered memory (the Outcome's `etag` goes into
    /// the [`CompletedPart`](crate::CompletedPart)).
    pub async fn upload_part_http(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        if data.is_empty() || part_number == 0 {
            return Err(Error::InvalidArgument(
                "a part needs at least one byte and a number from 1".into(),
            ));
        }
        let n = part_number.to_string();
        let path_query = h::path_query(
            bucket,
            Some(key),
            &[("partNumber", Some(&n)), ("uploadId", Some(upload_id))],
        );
        self.put_bytes_http(&path_query, data).await
    }

    /// A PUT (PutObject, UploadPart) of `data` over plain HTTP, with its
    /// CRC64NVME.
    async fn put_bytes_http(&self, path_query: &str, data: Bytes) -> Result<Outcome> {
        let crc = checksum::crc64nvme(&data);
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let len = data.len() as u64;
        let a = self.plain(Method::PUT, path_query, &hm, data).await?.ok()?;
        let mut out = Outcome::new(Path::Http, len);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = Some(crc);
        out.status = a.status.as_u16();
        Ok(out)
    }

    /// PUT of a local file over plain HTTP in one request (up to 5 GiB),
    /// streamed, with its CRC64NVME (the file is read twice).
    pub async fn put_object_http_file(
        &self,
        bucket: &str,
        key: &str,
        file: &std::path::Path,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut f = tokio::fs::File::open(file).await?;
        let mut crc = Crc64Nvme::new();
        let mut buf = vec![0u8; CHUNK];
        let mut len = 0u64;
        loop {
            let n = f.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            crc.update(&buf[..n]);
            len += n as u64;
        }
        if len > MAX_SINGLE_PUT {
            return Err(Error::InvalidArgument(format!(
                "{} is {len} bytes, more than one PUT takes (5 GiB)",
                file.display()
            )));
        }
        let crc = crc.header_value();
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let path_query = h::path_query(bucket, Some(key), &[]);
        let (a, attempts) = self
            .streamed_with_retries(Method::PUT, &path_query, &hm, len, |tx| async move {
                let mut f = tokio::fs::File::open(file).await?;
                let mut sent = 0u64;
                while sent < len {
                    let mut v = vec![0u8; CHUNK.min((len - sent) as usize)];
                    let n = f.read(&mut v).await?;
                    if n == 0 {
                        let _ = tx
                            .send(Err("the file shrank while it was sent".into()))
                            .await;
                        return Err(Error::InvalidArgument(format!(
                            "{} shrank while it was sent",
                            file.display()
                        )));
                    }
                    v.truncate(n);
                    if tx.send(Ok(Bytes::from(v))).await.is_err() {
                        break;
                    }
                    sent += n as u64;
                }
                Ok(())
            })
            .await?;
        let mut out = Outcome::new(Path::Http, len);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = Some(crc);
        out.status = a.status.as_u16();
        out.attempts = attempts;
        Ok(out)
    }

    /// PUT of `len` bytes from a stream over plain HTTP in one request (one
    /// attempt: a stream cannot be replayed). `checksum_crc64nvme`, when
    /// known, is sent for the server to check.
    pub async fn put_object_http_stream<S>(
        &self,
        bucket: &str,
        key: &str,
        len: u64,
        stream: S,
        checksum_crc64nvme: Option<String>,
    ) -> Result<Outcome>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        if let Some(c) = &checksum_crc64nvme {
            h::set(&mut hm, headers::CHECKSUM_CRC64NVME, c)?;
        }
        let body = BodyExt::boxed_unsync(StreamBody::new(
            stream.map_ok(Frame::data).map_err(BoxError::from),
        ));
        let (ei, ep) = self.endpoint_now();
        let target = ep.target(&h::path_query(bucket, Some(key), &[]))?;
        let req = h::signed(
            &self.inner.signer,
            Method::PUT,
            target,
            hm,
            body,
            len,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let cfg = &self.inner.cfg;
        let r = async {
            let resp = h::send(&self.inner.http, req, cfg.timeouts.for_bytes(len)).await?;
            self.read_answer(resp).await
        }
        .await;
        // One attempt (the stream cannot be replayed); the next request
        // goes elsewhere if this endpoint failed.
        self.inner.endpoints.note_answer(ei, &r);
        let a = r?.ok()?;
        let mut out = Outcome::new(Path::Http, len);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = checksum_crc64nvme;
        out.status = a.status.as_u16();
        Ok(out)
    }

    /// GET over plain HTTP into a writer (a file, stdout, a `Vec<u8>`).
    /// Whole objects are checked against the server's CRC64NVME when it
    /// sends one, after the last byte is written: on
    /// [`Error::ChecksumMismatch`] discard what was written. Retried only
    /// until the first byte is written.
    pub async fn get_object_http<W>(
        &self,
        bucket: &str,
        key: &str,
        sel: Selection,
        writer: &mut W,
    ) -> Result<Outcome>
    where
        W: AsyncWrite + Unpin + ?Sized,
    {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let part;
        let mut query: Vec<(&str, Option<&str>)> = Vec::new();
        match sel {
            Selection::Whole => {}
            Selection::Range { first, last } => {
                if last < first {
                    return Err(Error::InvalidArgument(format!(
                        "range {first}-{last} is empty"
                    )));
                }
                h::set(&mut hm, "range", &format!("bytes={first}-{last}"))?;
            }
            Selection::Part(n) => {
                part = n.to_string();
                query.push(("partNumber", Some(&part)));
            }
        }
        let path_query = h::path_query(bucket, Some(key), &query);
        let cfg = &self.inner.cfg;
        let (r, attempt) = self
            .retry()
            .run("HTTP GET", |_| async {
                retry::error(self.open_get(&path_query, &hm).await)
            })
            .await;
        let (a, mut body, ei) = r?;
        let mut crc = Crc64Nvme::new();
        let mut n = 0u64;
        loop {
            let chunk = h::next_chunk(&mut body, cfg.timeouts.request).await;
            // A body broken off is the endpoint's failure (the next request
            // goes to another); a writer's is not.
            self.inner.endpoints.note(ei, &chunk);
            let Some(d) = chunk? else { break };
            writer.write_all(&d).await?;
            crc.update(&d);
            n += d.len() as u64;
        }
        writer.flush().await?;
        let mut out = Outcome::new(Path::Http, n);
        let declared = a.header(headers::CHECKSUM_CRC64NVME);
        if let Some(d) = &declared {
            if sel == Selection::Whole && a.status == StatusCode::OK {
                checksum::verify(d, &crc.header_value(), Path::Http)?;
                out.checksum_verified = checksum::is_full_object(d);
            }
        }
        out.checksum_crc64nvme = declared;
        out.attempts = attempt;
        fill_get(&mut out, &a, sel, n);
        Ok(out)
    }
}
