//! CRC-64/NVME, S3's `x-amz-checksum-crc64nvme`: base64 of the big-endian
//! 64-bit value.

use crate::{Error, Path, Result};

/// An incremental CRC-64/NVME.
#[derive(Clone)]
pub struct Crc64Nvme(crc64fast_nvme::Digest);

impl std::fmt::Debug for Crc64Nvme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Crc64Nvme").field(&self.value()).finish()
    }
}

impl Default for Crc64Nvme {
    fn default() -> Self {
        Crc64Nvme::new()
    }
}

impl Crc64Nvme {
    /// A digest of nothing yet.
    pub fn new() -> Crc64Nvme {
        Crc64Nvme(crc64fast_nvme::Digest::new())
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.write(data);
    }

    /// The value so far.
    pub fn value(&self) -> u64 {
        self.0.sum64()
    }

    /// The value so far as an `x-amz-checksum-crc64nvme` header value.
    pub fn header_value(&self) -> String {
        hipobj_wire::checksum::crc64nvme_value(self.value())
    }
}

/// The `x-amz-checksum-crc64nvme` value of `data`.
pub fn crc64nvme(data: &[u8]) -> String {
    let mut d = Crc64Nvme::new();
    d.update(data);
    d.header_value()
}

/// Whether a server's checksum header value is a checksum of the whole
/// object's bytes (not a composite `…-N` value of a multipart object).
pub fn is_full_object(value: &str) -> bool {
    !value.contains('-') && !value.is_empty()
}

/// Compares the CRC of the bytes received (`actual`, a header value) with
/// what the server declared (`expected`); composite values are not
/// comparable and pass.
pub fn verify(expected: &str, actual: &str, path: Path) -> Result<()> {
    let expected = expected.trim();
    if !is_full_object(expected) || expected == actual {
        return Ok(());
    }
    Err(Error::ChecksumMismatch {
        expected: expected.to_string(),
        actual: actual.to_string(),
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // CRC-64/NVME check value of "123456789" is 0xae8b14860a799888.
        let mut d = Crc64Nvme::new();
        d.update(b"1234");
        d.update(b"56789");
        assert_eq!(d.value(), 0xae8b_1486_0a79_9888);
        assert_eq!(crc64nvme(b"123456789"), "rosUhgp5mIg=");
        assert_eq!(crc64nvme(b""), "AAAAAAAAAAA=");
    }

    #[test]
    fn verification() {
        let v = crc64nvme(b"hello");
        verify(&v, &v, Path::Http).unwrap();
        verify(&format!(" {v} "), &v, Path::Rdma).unwrap();
        verify("abc-3", &v, Path::Rdma).unwrap();
        let e = verify(&crc64nvme(b"world"), &v, Path::Rdma).unwrap_err();
        assert!(
            matches!(&e, Error::ChecksumMismatch { path: Path::Rdma, actual, .. } if *actual == v),
            "{e:?}"
        );
        assert!(!e.is_retryable());
    }
}
