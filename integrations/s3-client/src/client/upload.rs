//! One PutObject or UploadPart of a non-empty buffer range: by RDMA when
//! possible, else streamed from the buffer over HTTP, with the CRC64NVME of
//! its bytes either way.

use bytes::Bytes;
use hipobj::Registered;
use hipobj_wire::headers;
use http::header::{HeaderMap, ETAG};
use http::Method;

use super::rdma_path::Plan;
use super::v2_path::V2Spec;
use super::{S3Client, CHUNK};
use crate::checksum::Crc64Nvme;
use crate::http::{self as h, Answer};
use crate::{Error, Outcome, Path, Result};

impl S3Client {
    /// One PutObject or UploadPart of a non-empty range of the buffer.
    ///
    /// `v2` names the object (and part) for hipobj-rc-v2; `whole`: a
    /// PutObject, which a server's cap on v2 PUTs splits into a multipart
    /// upload (a part over the cap goes by the handshake flow instead).
    pub(super) async fn put_one(
        &self,
        path_query: &str,
        reg: &Registered<'_, 'static>,
        offset: usize,
        len: usize,
        v2: V2Spec,
        whole: bool,
    ) -> Result<Outcome> {
        let (reason, crc) = match Plan::of(self) {
            Plan::Rdma(rdma) => match rdma.put(path_query, reg, offset, len, v2, whole).await? {
                Ok(out) => return Ok(out),
                Err(fallback) => fallback,
            },
            Plan::Http(reason) => {
                let crc = self.crc_inline(reg, offset, len).await?;
                (self.fallback(reason)?, crc)
            }
        };
        let mut hm = HeaderMap::new();
        h::set(&mut hm, headers::CHECKSUM_CRC64NVME, &crc)?;
        let (a, attempts) = self
            .http_put_from(reg, offset, len, path_query, &hm)
            .await?;
        let mut out = Outcome::new(Path::Http, len as u64);
        out.etag = a.header(ETAG.as_str());
        out.checksum_crc64nvme = Some(crc);
        out.status = a.status.as_u16();
        out.attempts = attempts;
        out.fallback_reason = Some(reason);
        Ok(out)
    }

    /// The CRC of a buffer range on this task, in place, yielding between
    /// chunks.
    async fn crc_inline(&self, reg: &Registered<'_, '_>, off: usize, len: usize) -> Result<String> {
        let mut d = Crc64Nvme::new();
        let mut pos = 0;
        while pos < len {
            let n = (8 * CHUNK).min(len - pos);
            reg.with_bytes(off + pos, n, |b| d.update(b))?;
            pos += n;
            if pos < len {
                tokio::task::yield_now().await;
            }
        }
        Ok(d.header_value())
    }

    /// PUT over HTTP of a buffer range, streamed from the buffer, retried
    /// by the policy; the answer and the attempts made.
    async fn http_put_from(
        &self,
        reg: &Registered<'_, '_>,
        off: usize,
        len: usize,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<(Answer, u32)> {
        self.streamed_with_retries(Method::PUT, path_query, hm, len as u64, |tx| async move {
            let mut pos = 0;
            while pos < len {
                let n = CHUNK.min(len - pos);
                let mut v = vec![0u8; n];
                if let Err(e) = reg.read(off + pos, &mut v) {
                    let _ = tx.send(Err(e.to_string().into())).await;
                    return Err(Error::from(e));
                }
                if tx.send(Ok(Bytes::from(v))).await.is_err() {
                    break;
                }
                pos += n;
            }
            Ok(())
        })
        .await
    }
}
