//! What the store records about buckets, objects, uploads and parts, as
//! JSON files next to the data (serde_json). The real key is in the
//! object's record; the file names only carry its hash.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format version written in every record.
pub const FORMAT: u32 = 1;

/// A bucket's record, `bucket.json` in its directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BucketMeta {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// The bucket's name (also its directory's name).
    pub name: String,
    /// When it was created, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// The checksums of an object's or part's bytes, base64 as S3 sends them;
/// only those a client asked for are computed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Checksums {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc64nvme: Option<String>,
}

impl Checksums {
    /// From s3s's form.
    pub fn from_dto(c: s3s::dto::Checksum) -> Checksums {
        Checksums {
            crc32: c.checksum_crc32,
            crc32c: c.checksum_crc32c,
            sha1: c.checksum_sha1,
            sha256: c.checksum_sha256,
            crc64nvme: c.checksum_crc64nvme,
        }
    }
}

/// The headers an object is stored with and answered with.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Attributes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// `Expires`, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_redirect_location: Option<String>,
    /// `x-amz-meta-*`, names without the prefix (any UTF-8 values).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_metadata: BTreeMap<String, String>,
}

/// An object's record, `<hash>.json` in its fan-out directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// The key, exactly as stored.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// The ETag, without quotes: the MD5 of the bytes in hex, or for a
    /// multipart object the MD5 of the parts' MD5s and `-<parts>`.
    pub etag: String,
    /// When it was stored, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
    /// Its headers.
    #[serde(default)]
    pub attributes: Attributes,
    /// Its whole-object checksums.
    #[serde(default)]
    pub checksums: Checksums,
    /// For a multipart object, the size of each part in order; else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_sizes: Vec<u64>,
    /// The id in the data file's name (`<hash>.<data>.data`).
    pub data: String,
}

/// A multipart upload's record, `upload.json` in its directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UploadMeta {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// The upload id (also its directory's name).
    pub upload_id: String,
    /// The key the object will have.
    pub key: String,
    /// When it was created, milliseconds since the Unix epoch.
    pub initiated_ms: i64,
    /// The headers the object will have.
    #[serde(default)]
    pub attributes: Attributes,
    /// The checksum algorithm the client named at creation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
}

/// An uploaded part's record, `part-<n>.json` in its upload's directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartMeta {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// Its number, 1 to 10000.
    pub number: i32,
    /// Its size in bytes.
    pub size: u64,
    /// The MD5 of its bytes, hex.
    pub etag: String,
    /// When it was stored, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
    /// Its checksums.
    #[serde(default)]
    pub checksums: Checksums,
    /// The id in the data file's name (`part-<n>.<data>.data`).
    pub data: String,
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the Unix epoch as s3s's timestamp.
pub fn timestamp(ms: i64) -> s3s::dto::Timestamp {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    s3s::dto::Timestamp::from(t)
}

/// s3s's timestamp as milliseconds since the Unix epoch.
pub fn millis(t: &s3s::dto::Timestamp) -> i64 {
    let t: time::OffsetDateTime = t.clone().into();
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_meta_round_trips_through_json() {
        let mut m = ObjectMeta {
            format: FORMAT,
            key: "../a//\u{e9}\n".into(),
            size: 3,
            etag: "abc".into(),
            last_modified_ms: 1_700_000_000_123,
            attributes: Attributes::default(),
            checksums: Checksums {
                crc32: Some("AAAAAA==".into()),
                ..Default::default()
            },
            part_sizes: vec![],
            data: "00".repeat(16),
        };
        m.attributes
            .user_metadata
            .insert("na\u{ef}ve".into(), "v\u{e4}lue".into());
        let json = serde_json::to_vec(&m).unwrap();
        let back: ObjectMeta = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn timestamps_round_trip_to_the_millisecond() {
        let ms = 1_700_000_000_123;
        assert_eq!(millis(&timestamp(ms)), ms);
    }
}
