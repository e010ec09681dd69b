//! Names: which bucket names and keys are valid, and where a key's files
//! live. A key's text never becomes a path: its files are named by the hex
//! SHA-256 of the key, so `../`, `//`, very long keys and any UTF-8 all map
//! to a fixed-shape name inside the bucket's own directory.

use sha2::{Digest, Sha256};

/// The longest key S3 accepts, in bytes of UTF-8.
pub const MAX_KEY_LEN: usize = 1024;

/// Whether `name` is a valid S3 bucket name: 3 to 63 characters of
/// lowercase letters, digits, dots and hyphens, starting and ending with a
/// letter or digit, no `..`, not an IPv4 address. Such a name is safe as a
/// directory name (no `/`, never `.` or `..`).
pub fn valid_bucket_name(name: &str) -> bool {
    let b = name.as_bytes();
    if !(3..=63).contains(&b.len()) {
        return false;
    }
    if !b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return false;
    }
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    if name.contains("..") || name.parse::<std::net::Ipv4Addr>().is_ok() {
        return false;
    }
    true
}

/// Whether `key` is a valid object key: 1 to [`MAX_KEY_LEN`] bytes.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN
}

/// The name of a key's files: the lowercase hex SHA-256 of its bytes (64
/// characters).
pub fn key_hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The two fan-out directory levels for a hash: its first two and next two
/// hex digits.
pub fn fan_out(hash: &str) -> (&str, &str) {
    (&hash[0..2], &hash[2..4])
}

/// Whether `s` is shaped like a name this store draws ([`random_id`]): 32
/// lowercase hex digits.
pub fn is_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Whether `s` is shaped like a [`key_hash`]: 64 lowercase hex digits.
pub fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// 16 bytes from the OS's random source as 32 lowercase hex digits: upload
/// ids and the names of data and temporary files.
pub fn random_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names() {
        for ok in ["abc", "a.b-c", "bucket-1", &"a".repeat(63)] {
            assert!(valid_bucket_name(ok), "{ok}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "..",
            "../x",
            "a/b",
            "192.168.1.1",
            "",
        ] {
            assert!(!valid_bucket_name(bad), "{bad}");
        }
    }

    #[test]
    fn keys() {
        assert!(valid_key("a"));
        assert!(valid_key(&"k".repeat(1024)));
        assert!(!valid_key(&"k".repeat(1025)));
        assert!(!valid_key(""));
    }

    #[test]
    fn hashes_are_fixed_shape_whatever_the_key() {
        for key in [
            "../../etc/passwd",
            "a//b",
            "./",
            &"\u{1F600}".repeat(256),
            "/",
        ] {
            let h = key_hash(key);
            assert!(is_hash(&h), "{h}");
            assert!(!h.contains('/') && !h.contains('.'));
        }
        assert_ne!(key_hash("a"), key_hash("b"));
        let (a, b) = fan_out("0123456789");
        assert_eq!((a, b), ("01", "23"));
    }

    #[test]
    fn ids() {
        let a = random_id().unwrap();
        assert!(is_id(&a));
        assert_ne!(a, random_id().unwrap());
        assert!(!is_id("../../../../../../../../../../aa"));
        assert!(!is_id(&"A".repeat(32)));
    }
}
