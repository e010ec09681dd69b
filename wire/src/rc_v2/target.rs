//! `X-Amz-Rdma-Target`: the object a session moves, `/bucket/key` and an
//! optional `?query`, as hipObject's and versitygw's `buildTarget` write it:
//! every byte outside `A-Z a-z 0-9 - . _ ~` percent-encoded with upper-case
//! hex, `/` kept in the key and encoded in the bucket; the query verbatim.
//! Read back strictly: a malformed escape, an empty bucket or key, a NUL
//! or a target over [`TARGET_MAX_LEN`] is refused.

use std::fmt;
use thiserror::Error;

use crate::hex::nibble;

/// The longest target accepted (versitygw's limit).
pub const TARGET_MAX_LEN: usize = 2047;

/// The largest part number (S3's).
pub const MAX_PART_NUMBER: u32 = 10_000;

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    /// Over [`TARGET_MAX_LEN`] bytes.
    #[error("x-amz-rdma-target is {0} bytes, over 2047")]
    TooLong(usize),
    /// Not `/bucket/key`.
    #[error("x-amz-rdma-target is not /bucket/key[?query]: {0}")]
    Shape(&'static str),
    /// A `%` not followed by two hex digits, or bytes that are not UTF-8.
    #[error("x-amz-rdma-target has a bad escape or is not UTF-8")]
    Escape,
    /// A query other than `partNumber=N` (GET) or `uploadId=U&partNumber=N`
    /// (PUT), in either order.
    #[error("x-amz-rdma-target's query is not a part of an object: {0}")]
    Query(String),
}

/// What a target's query says: the whole object, a part of it (GET), or a
/// part of a multipart upload (PUT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// No query.
    Whole,
    /// `partNumber=N`: GetObject of one part.
    Number(u32),
    /// `uploadId=U&partNumber=N`: UploadPart.
    Upload {
        /// The upload.
        upload_id: String,
        /// The part, 1 to 10000.
        number: u32,
    },
}

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The bucket, decoded.
    pub bucket: String,
    /// The key, decoded.
    pub key: String,
    /// The query as sent (without `?`), if any.
    pub query: Option<String>,
}

fn encode(out: &mut String, s: &str, keep_slash: bool) {
    for &b in s.as_bytes() {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        if plain || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn decode(s: &str) -> Result<String, TargetError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let (h, l) = match (
                b.get(i + 1).copied().and_then(nibble),
                b.get(i + 2).copied().and_then(nibble),
            ) {
                (Some(h), Some(l)) => (h, l),
                _ => return Err(TargetError::Escape),
            };
            out.push((h << 4) | l);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).map_err(|_| TargetError::Escape)?;
    if s.contains('\0') {
        return Err(TargetError::Shape("a NUL in the bucket or key"));
    }
    Ok(s)
}

impl Target {
    /// Builds the header value.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.bucket.len() + self.key.len() + 8);
        out.push('/');
        encode(&mut out, &self.bucket, false);
        out.push('/');
        encode(&mut out, &self.key, true);
        if let Some(q) = &self.query {
            out.push('?');
            out.push_str(q);
        }
        out
    }

    /// Reads the header value.
    pub fn parse(s: &str) -> Result<Target, TargetError> {
        if s.len() > TARGET_MAX_LEN {
            return Err(TargetError::TooLong(s.len()));
        }
        let rest = s
            .strip_prefix('/')
            .ok_or(TargetError::Shape("no leading /"))?;
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (rest, None),
        };
        let (bucket, key) = path.split_once('/').ok_or(TargetError::Shape("no key"))?;
        let (bucket, key) = (decode(bucket)?, decode(key)?);
        if bucket.is_empty() {
            return Err(TargetError::Shape("an empty bucket"));
        }
        if bucket.contains('/') {
            return Err(TargetError::Shape("a / in the bucket"));
        }
        if key.is_empty() {
            return Err(TargetError::Shape("an empty key"));
        }
        Ok(Target { bucket, key, query })
    }

    /// What the query names, for `op`: a part GET takes `partNumber` alone,
    /// an UploadPart `uploadId` and `partNumber`; anything else is refused.
    pub fn part(&self, op: super::Op) -> Result<Part, TargetError> {
        let Some(q) = self.query.as_deref().filter(|q| !q.is_empty()) else {
            return Ok(Part::Whole);
        };
        let bad = || TargetError::Query(q.chars().take(64).collect());
        let mut number = None;
        let mut upload_id = None;
        for pair in q.split('&') {
            let (k, v) = pair.split_once('=').ok_or_else(bad)?;
            let slot = match k {
                "partNumber" => &mut number,
                "uploadId" => &mut upload_id,
                _ => return Err(bad()),
            };
            if slot.replace(v).is_some() {
                return Err(bad());
            }
        }
        let number = number.ok_or_else(bad)?;
        let valid = !number.is_empty()
            && number.len() <= 5
            && number.bytes().all(|c| c.is_ascii_digit())
            && !number.starts_with('0');
        let n: u32 = if valid {
            number.parse().map_err(|_| bad())?
        } else {
            return Err(bad());
        };
        if !(1..=MAX_PART_NUMBER).contains(&n) {
            return Err(bad());
        }
        match (op, upload_id) {
            (super::Op::Get, None) => Ok(Part::Number(n)),
            (super::Op::Put, Some(u)) if !u.is_empty() => {
                let id = decode(u)?;
                Ok(Part::Upload {
                    upload_id: id,
                    number: n,
                })
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rc_v2::Op;

    fn t(bucket: &str, key: &str, query: Option<&str>) -> Target {
        Target {
            bucket: bucket.into(),
            key: key.into(),
            query: query.map(str::to_string),
        }
    }

    #[test]
    fn encodes_as_the_peers_build_it() {
        assert_eq!(
            t("b", "dir/a b+c.txt", None).encode(),
            "/b/dir/a%20b%2Bc.txt"
        );
        assert_eq!(t("b", "é~_-.", None).encode(), "/b/%C3%A9~_-.");
        assert_eq!(
            t("b", "k", Some("uploadId=x&partNumber=2")).encode(),
            "/b/k?uploadId=x&partNumber=2"
        );
    }

    #[test]
    fn round_trips_and_decodes_either_case() {
        for target in [
            t("bucket", "a/b/c", None),
            t("b", "sp ace/%/é", Some("partNumber=3")),
        ] {
            assert_eq!(Target::parse(&target.encode()).unwrap(), target);
        }
        assert_eq!(Target::parse("/b/a%2fb%2F").unwrap().key, "a/b/");
    }

    #[test]
    fn refuses_what_is_not_an_object() {
        for bad in [
            "", "b/k", "/b", "/b/", "//k", "/b/%", "/b/%4", "/b/%zz", "/b/%ff", "/b/a%00b",
            "/b%2Fc/k",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("/b/{}", "k".repeat(2045));
        assert_eq!(Target::parse(&long), Err(TargetError::TooLong(2048)));
        assert!(Target::parse(&long[..2047]).is_ok());
    }

    #[test]
    fn parts_by_operation() {
        let get = Target::parse("/b/k?partNumber=7").unwrap();
        assert_eq!(get.part(Op::Get).unwrap(), Part::Number(7));
        assert!(get.part(Op::Put).is_err(), "an UploadPart needs its upload");
        let put = Target::parse("/b/k?partNumber=2&uploadId=abc%2Bd").unwrap();
        assert_eq!(
            put.part(Op::Put).unwrap(),
            Part::Upload {
                upload_id: "abc+d".into(),
                number: 2
            }
        );
        assert!(put.part(Op::Get).is_err());
        assert_eq!(
            Target::parse("/b/k").unwrap().part(Op::Put).unwrap(),
            Part::Whole
        );
        for q in [
            "partNumber=0",
            "partNumber=10001",
            "partNumber=01",
            "partNumber=",
            "partNumber=1&partNumber=2",
            "versionId=1",
            "partNumber=1&x=2",
            "uploadId=&partNumber=1",
            "partNumber",
        ] {
            let target = Target::parse(&format!("/b/k?{q}")).unwrap();
            assert!(
                target.part(Op::Get).is_err() && target.part(Op::Put).is_err(),
                "{q:?}"
            );
        }
    }
}
