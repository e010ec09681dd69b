//! GETs into a registered buffer: by RDMA when possible, else over HTTP
//! into the same bytes, checked against the server's CRC64NVME.

use hipobj::Registered;
use hipobj_wire::headers;
use http::header::{HeaderMap, CONTENT_LENGTH};
use http::StatusCode;

use super::rdma_path::Plan;
use super::transfer::fill_get;
use super::S3Client;
use crate::checksum::{self, Crc64Nvme};
use crate::http as h;
use crate::retry;
use crate::{Error, Outcome, Path, Result, Selection};

impl S3Client {
    /// GET of the whole object into `reg` at `buf_offset`, or of bytes
    /// `first..=last` with `range: Some((first, last))`. The object (or
    /// range) must fit in the rest of the buffer.
    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        range: Option<(u64, u64)>,
    ) -> Result<Outcome> {
        let sel = match range {
            Some((first, last)) => Selection::Range { first, last },
            None => Selection::Whole,
        };
        self.get_object_selection(bucket, key, reg, buf_offset, sel)
            .await
    }

    /// GET of one part (`?partNumber=`) of an object uploaded in parts.
    pub async fn get_object_part(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        part_number: u32,
    ) -> Result<Outcome> {
        self.get_object_selection(bucket, key, reg, buf_offset, Selection::Part(part_number))
            .await
    }

    /// GET of the [`Selection`] into `reg` at `buf_offset`: by RDMA when
    /// possible, else over HTTP into the same bytes. Whole objects are
    /// checked against the server's `x-amz-checksum-crc64nvme`, when it
    /// sends one.
    pub async fn get_object_selection(
        &self,
        bucket: &str,
        key: &str,
        reg: &Registered<'_, 'static>,
        buf_offset: usize,
        sel: Selection,
    ) -> Result<Outcome> {
        h::check_bucket(bucket)?;
        h::check_key(key)?;
        self.check_buffer(reg)?;
        let space = reg
            .len()
            .checked_sub(buf_offset)
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "offset {buf_offset} leaves no room in the {}-byte buffer",
                    reg.len()
                ))
            })?;
        let mut hm = HeaderMap::new();
        h::set(&mut hm, "x-amz-checksum-mode", "ENABLED")?;
        let part;
        let mut query: Vec<(&str, Option<&str>)> = Vec::new();
        let want = match sel {
            Selection::Whole => space,
            Selection::Range { first, last } => {
                let n = last
                    .checked_sub(first)
                    .and_then(|d| d.checked_add(1))
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("range {first}-{last} is empty"))
                    })?;
                if n > space as u64 {
                    return Err(Error::BufferTooSmall {
                        needed: Some(n),
                        available: space as u64,
                    });
                }
                h::set(&mut hm, "range", &format!("bytes={first}-{last}"))?;
                n as usize
            }
            Selection::Part(n) => {
                if n == 0 {
                    return Err(Error::InvalidArgument("part numbers start at 1".into()));
                }
                part = n.to_string();
                query.push(("partNumber", Some(&part)));
                space
            }
        };
        let path_query = h::path_query(bucket, Some(key), &query);
        let reason = match Plan::of(self) {
            Plan::Rdma(rdma) => {
                match rdma
                    .get(bucket, key, reg, buf_offset, want, sel, &path_query, &hm)
                    .await?
                {
                    Ok(out) => return Ok(out),
                    Err(reason) => reason,
                }
            }
            Plan::Http(reason) => self.fallback(reason)?,
        };
        let mut out = self
            .http_get_into(reg, buf_offset, space, &path_query, &hm, sel)
            .await?;
        out.fallback_reason = Some(reason);
        Ok(out)
    }

    /// GET over HTTP into the buffer.
    async fn http_get_into(
        &self,
        reg: &Registered<'_, '_>,
        buf_off: usize,
        space: usize,
        path_query: &str,
        hm: &HeaderMap,
        sel: Selection,
    ) -> Result<Outcome> {
        let (r, attempts) = self
            .retry()
            .run("HTTP GET", |_| async move {
                retry::error(
                    self.http_get_once(reg, buf_off, space, path_query, hm, sel)
                        .await,
                )
            })
            .await;
        let mut out = r?;
        out.attempts = attempts;
        Ok(out)
    }

    async fn http_get_once(
        &self,
        reg: &Registered<'_, '_>,
        buf_off: usize,
        space: usize,
        path_query: &str,
        hm: &HeaderMap,
        sel: Selection,
    ) -> Result<Outcome> {
        let (a, mut body, ei) = self.open_get(path_query, hm).await?;
        let r = self
            .http_get_body(reg, buf_off, space, a, &mut body, sel)
            .await;
        // A body broken off is the endpoint's failure too.
        self.inner.endpoints.note(ei, &r);
        r
    }

    /// The rest of [`S3Client::http_get_once`]: the body into the buffer.
    async fn http_get_body(
        &self,
        reg: &Registered<'_, '_>,
        buf_off: usize,
        space: usize,
        a: crate::http::Answer,
        body: &mut hyper::body::Incoming,
        sel: Selection,
    ) -> Result<Outcome> {
        let cfg = &self.inner.cfg;
        if let Some(n) = a
            .header(CONTENT_LENGTH.as_str())
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            if n > space as u64 {
                return Err(Error::BufferTooSmall {
                    needed: Some(n),
                    available: space as u64,
                });
            }
        }
        let deadline = tokio::time::Instant::now() + cfg.timeouts.for_bytes(space as u64);
        let mut crc = Crc64Nvme::new();
        let mut n = 0usize;
        loop {
            let chunk =
                tokio::time::timeout_at(deadline, h::next_chunk(body, cfg.timeouts.request))
                    .await
                    .map_err(|_| Error::Timeout("the HTTP GET body took too long".into()))??;
            let Some(d) = chunk else { break };
            if d.len() > space - n {
                return Err(Error::BufferTooSmall {
                    needed: None,
                    available: space as u64,
                });
            }
            reg.write(buf_off + n, &d)?;
            crc.update(&d);
            n += d.len();
        }
        let mut out = Outcome::new(Path::Http, n as u64);
        let declared = a.header(headers::CHECKSUM_CRC64NVME);
        if let Some(d) = &declared {
            if sel == Selection::Whole && a.status == StatusCode::OK {
                checksum::verify(d, &crc.header_value(), Path::Http)?;
                out.checksum_verified = checksum::is_full_object(d);
            }
        }
        out.checksum_crc64nvme = declared;
        fill_get(&mut out, &a, sel, n as u64);
        Ok(out)
    }
}
