//! The value of S3's `x-amz-checksum-crc64nvme` header: base64 (standard
//! alphabet, padded) of the big-endian 64-bit CRC-64/NVME of the bytes.
//! The one place the value is built, for the client, the tests and the
//! gateway alike. Computing the CRC is the caller's (crc64fast-nvme):
//! that crate exports C functions (`digest_new`, ...), and this crate is
//! part of `libhipobj.so`, which must export only `hipObj*`.

use base64::Engine as _;

/// The header value for a CRC-64/NVME already computed.
pub fn crc64nvme_value(crc: u64) -> String {
    base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes())
}

/// The CRC a header value names, decoded strictly (8 bytes, padded, the
/// spare bits zero: the one spelling [`crc64nvme_value`] gives); `None`
/// for anything else, a composite checksum (`...-N`) among them.
pub fn crc64nvme_from_value(v: &str) -> Option<u64> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(v).ok()?;
    let crc = u64::from_be_bytes(bytes.try_into().ok()?);
    (crc64nvme_value(crc) == v).then_some(crc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC-64/NVME check value (of `123456789`) is 0xae8b14860a799888.
    #[test]
    fn check_value() {
        assert_eq!(crc64nvme_value(0xae8b_1486_0a79_9888), "rosUhgp5mIg=");
    }

    /// Values read back; other spellings and composite checksums are not
    /// one CRC's value.
    #[test]
    fn values_read_back_strictly() {
        for crc in [0, 1, 0xae8b_1486_0a79_9888, u64::MAX] {
            assert_eq!(crc64nvme_from_value(&crc64nvme_value(crc)), Some(crc));
        }
        for bad in [
            "rosUhgp5mIg",
            "rosUhgp5mIg=-3",
            "rosUhgp5mIh=",
            " rosUhgp5mIg=",
            "AAAAAAAAAAAAAAA=",
            "",
        ] {
            assert_eq!(crc64nvme_from_value(bad), None, "{bad:?}");
        }
    }

    /// Big-endian, padded: the value of nothing (CRC 0).
    #[test]
    fn zero_and_byte_order() {
        assert_eq!(crc64nvme_value(0), "AAAAAAAAAAA=");
        assert_eq!(crc64nvme_value(1), "AAAAAAAAAAE=");
    }
}
