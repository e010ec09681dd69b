//! The S3 checksums (`x-amz-checksum-*`: base64 of the big-endian digest,
//! as S3 has them), shared by both paths: the RDMA PUT checks the bytes it
//! reads against the header the client sent (`crate::rdma::checksum`
//! re-exports this module), and the plain path checks an aws-chunked body's
//! decoded bytes against its trailing checksum (`crate::auth`).

use base64::Engine as _;
use sha1::Digest as _;

/// The S3 checksum algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// CRC-64/NVME (`x-amz-checksum-crc64nvme`).
    Crc64Nvme,
    /// CRC-32 (`x-amz-checksum-crc32`).
    Crc32,
    /// CRC-32C (`x-amz-checksum-crc32c`).
    Crc32c,
    /// SHA-1 (`x-amz-checksum-sha1`).
    Sha1,
    /// SHA-256 (`x-amz-checksum-sha256`).
    Sha256,
}

impl Algorithm {
    const ALL: [(Algorithm, &'static str); 5] = [
        (Algorithm::Crc64Nvme, "x-amz-checksum-crc64nvme"),
        (Algorithm::Crc32, "x-amz-checksum-crc32"),
        (Algorithm::Crc32c, "x-amz-checksum-crc32c"),
        (Algorithm::Sha1, "x-amz-checksum-sha1"),
        (Algorithm::Sha256, "x-amz-checksum-sha256"),
    ];

    /// The header carrying it.
    pub fn header(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(a, _)| *a == self)
            .map_or("", |(_, h)| h)
    }

    /// The algorithm whose header (or trailing header) is `name`, any case.
    pub fn from_header(name: &str) -> Option<Algorithm> {
        Self::ALL
            .iter()
            .find(|(_, h)| h.eq_ignore_ascii_case(name))
            .map(|(a, _)| *a)
    }

    /// Its name as S3 spells it in messages and `x-amz-checksum-algorithm`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc64Nvme => "CRC64NVME",
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }
}

/// A checksum the client declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Which.
    pub algorithm: Algorithm,
    /// The base64 value sent.
    pub value: String,
}

/// The checksums declared in `headers` (usually one).
pub fn expected(headers: &http::HeaderMap) -> Vec<Expected> {
    Algorithm::ALL
        .iter()
        .filter_map(|(a, h)| {
            let v = headers.get(*h)?.to_str().ok()?.trim().to_string();
            Some(Expected {
                algorithm: *a,
                value: v,
            })
        })
        .collect()
}

/// A running digest.
pub enum Hasher {
    /// CRC-64/NVME.
    Crc64Nvme(crc64fast_nvme::Digest),
    /// CRC-32.
    Crc32(crc32fast::Hasher),
    /// CRC-32C.
    Crc32c(u32),
    /// SHA-1.
    Sha1(sha1::Sha1),
    /// SHA-256.
    Sha256(sha2::Sha256),
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher")
    }
}

impl Hasher {
    /// A new digest of `algorithm`.
    pub fn new(algorithm: Algorithm) -> Hasher {
        match algorithm {
            Algorithm::Crc64Nvme => Hasher::Crc64Nvme(crc64fast_nvme::Digest::new()),
            Algorithm::Crc32 => Hasher::Crc32(crc32fast::Hasher::new()),
            Algorithm::Crc32c => Hasher::Crc32c(0),
            Algorithm::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        }
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Crc64Nvme(d) => d.write(data),
            Hasher::Crc32(h) => h.update(data),
            Hasher::Crc32c(c) => *c = crc32c::crc32c_append(*c, data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// The base64 value S3 headers carry.
    pub fn finish(self) -> String {
        let raw: Vec<u8> = match self {
            // The one builder of this value, shared with the client and tests.
            Hasher::Crc64Nvme(d) => return hipobj_wire::checksum::crc64nvme_value(d.sum64()),
            Hasher::Crc32(h) => h.finalize().to_be_bytes().to_vec(),
            Hasher::Crc32c(c) => c.to_be_bytes().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        };
        base64::engine::general_purpose::STANDARD.encode(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(a: Algorithm, data: &[u8]) -> String {
        let mut h = Hasher::new(a);
        h.update(data);
        h.finish()
    }

    #[test]
    fn check_values() {
        // CRC-64/NVME check value of "123456789" is 0xae8b14860a799888.
        assert_eq!(of(Algorithm::Crc64Nvme, b"123456789"), "rosUhgp5mIg=");
        let crc32 = base64::engine::general_purpose::STANDARD.encode(0xcbf4_3926u32.to_be_bytes());
        assert_eq!(of(Algorithm::Crc32, b"123456789"), crc32);
        let crc32c = base64::engine::general_purpose::STANDARD.encode(0xe306_9283u32.to_be_bytes());
        assert_eq!(of(Algorithm::Crc32c, b"123456789"), crc32c);
        assert_eq!(
            of(Algorithm::Sha256, b""),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        assert_eq!(of(Algorithm::Sha1, b""), "2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
    }

    #[test]
    fn headers_and_names() {
        for (a, h) in Algorithm::ALL {
            assert_eq!(a.header(), h);
            assert_eq!(Algorithm::from_header(h), Some(a));
            assert_eq!(Algorithm::from_header(&h.to_ascii_uppercase()), Some(a));
            assert_eq!(
                h,
                format!("x-amz-checksum-{}", a.name().to_ascii_lowercase())
            );
        }
        assert_eq!(Algorithm::from_header("x-amz-checksum-md5"), None);
    }
}
