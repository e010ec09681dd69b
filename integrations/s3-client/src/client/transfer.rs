//! What the paths of a transfer share: its direction, the bytes an RDMA
//! GET moved and the fields of a GET's outcome from its answer, and the
//! CRC of a buffer range.

use hipobj::Registered;
use hipobj_wire::headers;
use http::header::{CONTENT_RANGE, ETAG};

use crate::checksum::Crc64Nvme;
use crate::http::{self as h, Answer};
use crate::{Outcome, Result, Selection};

/// What a transfer moves.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dir {
    Get,
    Put,
}

/// The bytes an RDMA GET moved, from its answer.
pub(super) fn rdma_get_bytes(a: &Answer) -> Option<u64> {
    let n = a
        .header(headers::RDMA_BYTES_TRANSFERRED)
        .or_else(|| a.header(headers::NOOBAA_RDMA_BYTES))
        .and_then(|v| v.trim().parse().ok());
    n.or_else(|| {
        let cr = a.header(CONTENT_RANGE.as_str())?;
        let span = cr.trim().strip_prefix("bytes ")?.split('/').next()?;
        let (first, last) = span.split_once('-')?;
        let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
        Some(last.checked_sub(first)? + 1)
    })
}

/// The CRC of `len` bytes of `reg` at `off`, read in place.
pub(super) fn crc_of(reg: &Registered<'_, '_>, off: usize, len: usize) -> Result<String> {
    let mut d = Crc64Nvme::new();
    reg.with_bytes(off, len, |b| d.update(b))?;
    Ok(d.header_value())
}

/// The fields of a GET's Outcome from its answer.
pub(super) fn fill_get(out: &mut Outcome, a: &Answer, sel: Selection, bytes: u64) {
    out.etag = a.header(ETAG.as_str());
    out.status = a.status.as_u16();
    out.content_range = a.header(CONTENT_RANGE.as_str());
    out.object_size = match &out.content_range {
        Some(cr) => h::range_total(cr),
        None if sel == Selection::Whole => Some(bytes),
        None => None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Path;
    use bytes::Bytes;
    use http::header::HeaderMap;
    use http::StatusCode;

    #[test]
    fn rdma_bytes_from_headers() {
        let mut a = Answer {
            status: StatusCode::PARTIAL_CONTENT,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        assert_eq!(rdma_get_bytes(&a), None);
        h::set(&mut a.headers, "content-range", "bytes 10-19/100").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(10));
        h::set(&mut a.headers, "x-amz-rdma-bytes", "7").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(7));
        h::set(&mut a.headers, "x-amz-rdma-bytes-transferred", "5").unwrap();
        assert_eq!(rdma_get_bytes(&a), Some(5));
        let mut out = Outcome::new(Path::Rdma, 5);
        fill_get(
            &mut out,
            &a,
            Selection::Range {
                first: 10,
                last: 19,
            },
            5,
        );
        assert_eq!(out.object_size, Some(100));
    }
}
