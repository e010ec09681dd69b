//! The checksums a write asks for (`x-amz-checksum-*` headers or trailers,
//! `x-amz-sdk-checksum-algorithm`, `Content-MD5`) and their verification
//! against what was computed while the body streamed.

use base64::Engine as _;
use http::HeaderMap;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::ChecksumAlgorithm;
use s3s::{s3_error, S3Result, TrailingHeaders};

use crate::meta::Checksums;

const NAMES: [&str; 5] = [
    "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-sha1",
    "x-amz-checksum-sha256",
    "x-amz-checksum-crc64nvme",
];

fn slot(c: &mut Checksums, i: usize) -> &mut Option<String> {
    match i {
        0 => &mut c.crc32,
        1 => &mut c.crc32c,
        2 => &mut c.sha1,
        3 => &mut c.sha256,
        _ => &mut c.crc64nvme,
    }
}

/// A hasher for every checksum the client gave or named: a value in
/// `given`, the algorithm it named, or a trailer it announced in
/// `x-amz-trailer`.
pub fn hasher_for(
    algorithm: Option<&ChecksumAlgorithm>,
    given: &Checksums,
    headers: &HeaderMap,
) -> S3Result<ChecksumHasher> {
    let mut want = [
        given.crc32.is_some(),
        given.crc32c.is_some(),
        given.sha1.is_some(),
        given.sha256.is_some(),
        given.crc64nvme.is_some(),
    ];
    if let Some(alg) = algorithm {
        let i = match alg.as_str().to_ascii_uppercase().as_str() {
            ChecksumAlgorithm::CRC32 => 0,
            ChecksumAlgorithm::CRC32C => 1,
            ChecksumAlgorithm::SHA1 => 2,
            ChecksumAlgorithm::SHA256 => 3,
            ChecksumAlgorithm::CRC64NVME => 4,
            _ => return Err(s3_error!(InvalidArgument, "Unsupported checksum algorithm")),
        };
        want[i] = true;
    }
    for v in headers.get_all("x-amz-trailer") {
        for name in v.to_str().unwrap_or("").split(',') {
            let name = name.trim().to_ascii_lowercase();
            if let Some(i) = NAMES.iter().position(|n| *n == name) {
                want[i] = true;
            }
        }
    }
    Ok(ChecksumHasher {
        crc32: want[0].then(Crc32::new),
        crc32c: want[1].then(Crc32c::new),
        sha1: want[2].then(Sha1::new),
        sha256: want[3].then(Sha256::new),
        crc64nvme: want[4].then(Crc64Nvme::new),
    })
}

/// Adds the checksums sent as trailers (once the body has been read).
pub fn add_trailers(given: &mut Checksums, trailers: Option<&TrailingHeaders>) -> S3Result<()> {
    let Some(map) = trailers.and_then(TrailingHeaders::take) else {
        return Ok(());
    };
    for (i, name) in NAMES.iter().enumerate() {
        if let Some(v) = map.get(*name) {
            let v = v
                .to_str()
                .map_err(|_| s3_error!(InvalidArgument, "{name} is not text"))?;
            *slot(given, i) = Some(v.to_owned());
        }
    }
    Ok(())
}

/// Every checksum the client gave equals the one computed: else 400
/// BadDigest, as S3 answers.
pub fn verify(computed: &Checksums, given: &Checksums) -> S3Result<()> {
    let mut computed = computed.clone();
    let mut given = given.clone();
    for (i, name) in NAMES.iter().enumerate() {
        if let Some(g) = slot(&mut given, i).as_deref() {
            if slot(&mut computed, i).as_deref() != Some(g) {
                return Err(s3_error!(
                    BadDigest,
                    "The {name} you specified did not match the calculated checksum."
                ));
            }
        }
    }
    Ok(())
}

/// `Content-MD5` (base64 of 16 bytes) against the MD5 computed: 400
/// InvalidDigest when it is not an MD5, 400 BadDigest when it differs.
pub fn check_content_md5(content_md5: Option<&str>, md5: &[u8; 16]) -> S3Result<()> {
    let Some(v) = content_md5 else {
        return Ok(());
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(v.trim())
        .ok()
        .filter(|d| d.len() == 16)
        .ok_or_else(|| s3_error!(InvalidDigest, "The Content-MD5 you specified was invalid."))?;
    if decoded[..] != md5[..] {
        return Err(s3_error!(
            BadDigest,
            "The Content-MD5 you specified did not match what we received."
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatches_are_bad_digests() {
        let computed = Checksums {
            crc32: Some("a".into()),
            ..Default::default()
        };
        assert!(verify(&computed, &computed).is_ok());
        assert!(verify(&computed, &Checksums::default()).is_ok());
        let wrong = Checksums {
            crc32: Some("b".into()),
            ..Default::default()
        };
        assert_eq!(
            verify(&computed, &wrong).unwrap_err().code().as_str(),
            "BadDigest"
        );
        let other = Checksums {
            sha1: Some("b".into()),
            ..Default::default()
        };
        assert_eq!(
            verify(&computed, &other).unwrap_err().code().as_str(),
            "BadDigest"
        );
    }

    #[test]
    fn content_md5() {
        let md5 = [0u8; 16];
        let b64 = base64::engine::general_purpose::STANDARD.encode(md5);
        assert!(check_content_md5(Some(&b64), &md5).is_ok());
        assert!(check_content_md5(None, &md5).is_ok());
        let e = check_content_md5(Some("zz"), &md5).unwrap_err();
        assert_eq!(e.code().as_str(), "InvalidDigest");
        let e = check_content_md5(Some(&b64), &[1u8; 16]).unwrap_err();
        assert_eq!(e.code().as_str(), "BadDigest");
    }

    #[test]
    fn trailers_announce_checksums() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-trailer", "x-amz-checksum-crc64nvme".parse().unwrap());
        let hasher = hasher_for(None, &Checksums::default(), &h).unwrap();
        assert!(hasher.crc64nvme.is_some() && hasher.crc32.is_none());
    }
}
