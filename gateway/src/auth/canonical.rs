//! The pieces of SigV4 for S3: the canonical request, the string to sign,
//! dates in ISO 8601 basic format, hex digests.
//!
//! Everything here works on untrusted input and never panics: bytes that are
//! not UTF-8 stay bytes, dates that do not parse are `None`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use percent_encoding::{percent_decode, AsciiSet, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};

/// The only algorithm served.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// SigV4a, recognised to be refused with `NotImplemented`.
pub(crate) const ALGORITHM_V4A: &str = "AWS4-ECDSA-P256-SHA256";
/// Payload hash of a body that is not signed.
pub(crate) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
/// aws-chunked with per-chunk signatures.
pub(crate) const STREAMING_PAYLOAD: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
/// aws-chunked with per-chunk signatures and a signed trailer.
pub(crate) const STREAMING_PAYLOAD_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
/// aws-chunked without chunk signatures, with a trailer.
pub(crate) const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
/// The service every scope must name.
pub(crate) const SERVICE: &str = "s3";
/// The scope terminator.
pub(crate) const TERMINATOR: &str = "aws4_request";

/// What SigV4 leaves unencoded: `A-Za-z0-9-_.~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// SigV4's URI encoding of raw bytes (uppercase hex).
pub(crate) fn uri_encode(bytes: &[u8]) -> String {
    percent_encoding::percent_encode(bytes, UNRESERVED).to_string()
}

/// One query component as a server reads it: `+` is a space (as
/// `application/x-www-form-urlencoded`, aws-sigv4's signer, s3s and MinIO
/// read it), then percent-decoded. Invalid `%` sequences stay as they are.
fn decode_component(s: &str) -> Vec<u8> {
    let plus_as_space: Vec<u8> = s
        .bytes()
        .map(|b| if b == b'+' { b' ' } else { b })
        .collect();
    percent_decode(&plus_as_space).collect()
}

/// The raw query split into decoded `(key, value)` pairs, in order; empty
/// segments (`a=1&&b=2`) are skipped and a key without `=` has an empty value.
pub(crate) fn query_pairs(raw: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    raw.split('&')
        .filter(|seg| !seg.is_empty())
        .map(|seg| match seg.split_once('=') {
            Some((k, v)) => (decode_component(k), decode_component(v)),
            None => (decode_component(seg), Vec::new()),
        })
        .collect()
}

/// The canonical query string: every pair re-encoded, sorted by key then
/// value, joined with `&`; `skip` names a key left out (`X-Amz-Signature`
/// for presigned URLs).
pub(crate) fn canonical_query(pairs: &[(Vec<u8>, Vec<u8>)], skip: Option<&[u8]>) -> String {
    let mut encoded: Vec<(String, String)> = pairs
        .iter()
        .filter(|(k, _)| skip != Some(k.as_slice()))
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    encoded.sort();
    let mut out = String::new();
    for (i, (k, v)) in encoded.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
    out
}

/// A header value as SigV4 for S3 canonicalizes it: leading and trailing
/// spaces removed, runs of spaces collapsed to one (S3 trims spaces only,
/// as aws-sigv4 does).
pub(crate) fn trim_all(value: &[u8], out: &mut Vec<u8>) {
    let start = value.iter().position(|&b| b != b' ').unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(start, |i| i + 1);
    let mut prev_space = false;
    for &b in value.get(start..end).unwrap_or_default() {
        if b == b' ' {
            if !prev_space {
                out.push(b);
            }
            prev_space = true;
        } else {
            out.push(b);
            prev_space = false;
        }
    }
}

/// The canonical request, as bytes (header values need not be UTF-8).
///
/// `headers` are the signed headers in SignedHeaders order, each with its
/// values in the order received (joined with `,`).
pub(crate) fn canonical_request(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, Vec<&[u8]>)],
    payload_hash: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(method.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(if path.is_empty() {
        b"/"
    } else {
        path.as_bytes()
    });
    out.push(b'\n');
    out.extend_from_slice(query.as_bytes());
    out.push(b'\n');
    for (name, values) in headers {
        out.extend_from_slice(name.as_bytes());
        out.push(b':');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            trim_all(v, &mut out);
        }
        out.push(b'\n');
    }
    out.push(b'\n');
    for (i, (name, _)) in headers.iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        out.extend_from_slice(name.as_bytes());
    }
    out.push(b'\n');
    out.extend_from_slice(payload_hash.as_bytes());
    out
}

/// `AWS4-HMAC-SHA256\n<date>\n<scope>\n<hex sha256(canonical request)>`.
pub(crate) fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &[u8]) -> String {
    format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request)
    )
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// 64 hex digits (either case) as 32 bytes.
pub(crate) fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

/// Whether `s` is 64 hex digits.
pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u32, |acc, &b| {
        acc.checked_mul(10)?.checked_add(u32::from(b - b'0'))
    })
}

/// `yyyymmdd` as a checked calendar date.
pub(crate) fn parse_date(s: &str) -> Option<time::Date> {
    let b = s.as_bytes();
    if b.len() != 8 {
        return None;
    }
    let year = i32::try_from(digits(b.get(0..4)?)?).ok()?;
    let month = u8::try_from(digits(b.get(4..6)?)?).ok()?;
    let day = u8::try_from(digits(b.get(6..8)?)?).ok()?;
    time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()
}

/// `yyyymmddThhmmssZ` (ISO 8601 basic, UTC) as a time.
pub(crate) fn parse_amz_date(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 16 || b.get(8) != Some(&b'T') || b.get(15) != Some(&b'Z') {
        return None;
    }
    let date = parse_date(s.get(0..8)?)?;
    let hour = u8::try_from(digits(b.get(9..11)?)?).ok()?;
    let minute = u8::try_from(digits(b.get(11..13)?)?).ok()?;
    let second = u8::try_from(digits(b.get(13..15)?)?).ok()?;
    let time = time::Time::from_hms(hour, minute, second).ok()?;
    let ts = time::PrimitiveDateTime::new(date, time)
        .assume_utc()
        .unix_timestamp();
    if ts >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(ts.unsigned_abs()))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(ts.unsigned_abs()))
    }
}

/// The last second representable as a four-digit year (9999-12-31T23:59:59Z).
const MAX_UNIX: u64 = 253_402_300_799;

/// A time as `yyyymmddThhmmssZ`; `None` before 1970 or after year 9999.
pub(crate) fn format_amz_date(t: SystemTime) -> Option<String> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    if secs > MAX_UNIX {
        return None;
    }
    let dt = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    Some(format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    ))
}

/// How far apart two times are, either way.
pub(crate) fn distance(a: SystemTime, b: SystemTime) -> Duration {
    match a.duration_since(b) {
        Ok(d) => d,
        Err(e) => e.duration(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipobj_net::sigv4::EMPTY_SHA256;

    #[test]
    fn query_is_decoded_reencoded_and_sorted() {
        let pairs = query_pairs("prefix=J&max-keys=2&acl&a%2fb=x%20y&&z=%7e~+");
        assert_eq!(
            canonical_query(&pairs, None),
            "a%2Fb=x%20y&acl=&max-keys=2&prefix=J&z=~~%20"
        );
        let pairs = query_pairs("b=2&b=1&X-Amz-Signature=abc");
        assert_eq!(canonical_query(&pairs, Some(b"X-Amz-Signature")), "b=1&b=2");
        // Invalid escapes stay literal and are encoded as such.
        assert_eq!(canonical_query(&query_pairs("k=%zz%"), None), "k=%25zz%25");
        // Non-UTF-8 bytes survive.
        assert_eq!(canonical_query(&query_pairs("k=%ff"), None), "k=%FF");
    }

    #[test]
    fn header_values_are_trimmed_and_collapsed() {
        let mut out = Vec::new();
        trim_all(b"  a   b c  ", &mut out);
        assert_eq!(out, b"a b c");
        out.clear();
        trim_all(b"    ", &mut out);
        assert!(out.is_empty());
        out.clear();
        trim_all(b"", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn dates() {
        let t = parse_amz_date("20130524T000000Z").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap().as_secs(),
            1_369_353_600
        );
        assert_eq!(format_amz_date(t).unwrap(), "20130524T000000Z");
        for bad in [
            "",
            "20130524T000000",
            "20130524T000060Z",
            "20131324T000000Z",
            "20130230T000000Z",
            "2013052aT000000Z",
            "+0130524T000000Z",
            "20130524t000000Z",
            "20130524T24000 Z",
            "２0130524T000000Z",
        ] {
            assert!(parse_amz_date(bad).is_none(), "{bad}");
        }
        assert!(parse_amz_date("00000101T000000Z").is_some());
        assert!(parse_amz_date("99991231T235959Z").is_some());
        assert!(format_amz_date(UNIX_EPOCH + Duration::from_secs(MAX_UNIX + 1)).is_none());
        assert!(format_amz_date(UNIX_EPOCH - Duration::from_secs(1)).is_none());
    }

    #[test]
    fn hex() {
        assert!(parse_hex32(EMPTY_SHA256).is_some());
        assert!(parse_hex32(&EMPTY_SHA256.to_uppercase()).is_some());
        assert!(parse_hex32(&EMPTY_SHA256[1..]).is_none());
        assert!(parse_hex32(&format!("{}g", &EMPTY_SHA256[1..])).is_none());
        assert_eq!(sha256_hex(b""), EMPTY_SHA256);
    }
}
