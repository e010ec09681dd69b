//! GETs into a window of a registration, in one request or in ranged parts
//! as `hipobj cp` moves large objects, and PUTs of a window.

use futures::{StreamExt, TryStreamExt};
use hipobj::Registered;
use hipobj_s3::{Crc64Nvme, Error, Outcome, Path, S3Client};

/// Where the bytes go: `len` bytes at `off` of `reg`, which ends at `off +
/// len` (`tail`) or goes on past it.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    pub reg: &'a Registered<'static, 'static>,
    pub off: usize,
    pub len: usize,
}

impl Window<'_> {
    /// Whether the registration ends where the window does: a whole-object
    /// GET, which may write up to the registration's end, then stays in it.
    fn is_tail(&self) -> bool {
        self.off + self.len == self.reg.len()
    }
}

/// How GETs are cut.
#[derive(Clone, Copy, Debug)]
pub struct Cut {
    pub part_size: usize,
    pub concurrency: usize,
}

/// GET of the object (or of bytes `first..=last`) into the window.
pub async fn get(
    s3: &S3Client,
    bucket: &str,
    key: &str,
    w: Window<'_>,
    range: Option<(u64, u64)>,
    cut: Cut,
) -> Result<Outcome, Error> {
    if let Some((first, last)) = range {
        let n = last
            .checked_sub(first)
            .and_then(|d| d.checked_add(1))
            .ok_or_else(|| Error::InvalidArgument(format!("range {first}-{last} is empty")))?;
        if n > w.len as u64 {
            return Err(Error::BufferTooSmall {
                needed: Some(n),
                available: w.len as u64,
            });
        }
        if n <= cut.part_size as u64 {
            return s3
                .get_object(bucket, key, w.reg, w.off, Some((first, last)))
                .await;
        }
        return ranged(s3, bucket, key, w, first, n, None, cut).await;
    }
    if w.len <= cut.part_size && w.is_tail() {
        // One request, checked against the server's checksum by hipobj-s3.
        return s3.get_object(bucket, key, w.reg, w.off, None).await;
    }
    let info = s3.head_object(bucket, key).await?;
    let size = info.size;
    if size > w.len as u64 {
        return Err(Error::BufferTooSmall {
            needed: Some(size),
            available: w.len as u64,
        });
    }
    if size == 0 {
        let mut o = Outcome::new(Path::Http, 0);
        o.etag = info.etag;
        o.checksum_crc64nvme = info.checksum_crc64nvme;
        o.object_size = Some(0);
        o.parts = 0;
        o.fallback_reason = Some("an empty object moves no bytes".into());
        return Ok(o);
    }
    if size <= cut.part_size as u64 && w.is_tail() {
        return s3.get_object(bucket, key, w.reg, w.off, None).await;
    }
    let mut m = ranged(s3, bucket, key, w, 0, size, Some(size), cut).await?;
    m.etag = info.etag;
    if let Some(declared) = info
        .checksum_crc64nvme
        .filter(|d| hipobj_s3::is_full_object(d))
    {
        let mut crc = Crc64Nvme::new();
        let mut pos = 0;
        while pos < size as usize {
            let n = (8usize << 20).min(size as usize - pos);
            w.reg.with_bytes(w.off + pos, n, |b| crc.update(b))?;
            pos += n;
        }
        hipobj_s3::verify_checksum(&declared, &crc.header_value(), m.path)?;
        m.checksum_crc64nvme = Some(declared);
        m.checksum_verified = true;
    }
    Ok(m)
}

/// Bytes `first..first + n` in ranged GETs of `cut.part_size`,
/// `cut.concurrency` at once, into the window's start. `size`: the
/// object's size, which every answer must repeat.
#[allow(clippy::too_many_arguments)]
async fn ranged(
    s3: &S3Client,
    bucket: &str,
    key: &str,
    w: Window<'_>,
    first: u64,
    n: u64,
    size: Option<u64>,
    cut: Cut,
) -> Result<Outcome, Error> {
    let ps = cut.part_size as u64;
    let parts = n.div_ceil(ps);
    let outs: Vec<hipobj_s3::Outcome> = futures::stream::iter(0..parts)
        .map(|i| async move {
            let at = i * ps;
            let l = ps.min(n - at);
            let o = s3
                .get_object(
                    bucket,
                    key,
                    w.reg,
                    w.off + at as usize,
                    Some((first + at, first + at + l - 1)),
                )
                .await?;
            let changed = o.bytes != l
                || matches!((size, o.object_size), (Some(s), Some(t)) if s != t);
            if changed {
                return Err(Error::Protocol(format!(
                    "the object changed during the GET: bytes {}-{} came as {} bytes of a {:?}-byte object",
                    first + at,
                    first + at + l - 1,
                    o.bytes,
                    o.object_size
                )));
            }
            Ok(o)
        })
        .buffered(cut.concurrency)
        .try_collect()
        .await?;
    let mut path = None;
    let mut m = Outcome::new(Path::Http, n);
    m.object_size = size;
    m.status = 206;
    m.parts = parts as u32;
    for o in outs {
        path = Some(path.map_or(o.path, |p: Path| p.join(o.path)));
        m.attempts = m.attempts.max(o.attempts);
        if m.fallback_reason.is_none() {
            m.fallback_reason = o.fallback_reason;
        }
        if m.etag.is_none() {
            m.etag = o.etag;
        }
        if m.object_size.is_none() {
            m.object_size = o.object_size;
        }
    }
    m.path = path.unwrap_or(Path::Http);
    Ok(m)
}
