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

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC-64/NVME check value (of `123456789`) is 0xae8b14860a799888.
    #[test]
    fn check_value() {
        assert_eq!(crc64nvme_value(0xae8b_1486_0a79_9888), "rosUhgp5mIg=");
    }

    /// Big-endian, padded: the value of nothing (CRC 0).
    #[test]
    fn zero_and_byte_order() {
        assert_eq!(crc64nvme_value(0), "AAAAAAAAAAA=");
        assert_eq!(crc64nvme_value(1), "AAAAAAAAAAE=");
    }
}
