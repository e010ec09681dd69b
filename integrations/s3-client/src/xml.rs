//! The XML S3 speaks here, as typed documents read and written by quick-xml
//! with serde: error bodies, ListBuckets and ListObjectsV2 results,
//! InitiateMultipartUpload and CompleteMultipartUpload results, and the
//! CreateBucket and CompleteMultipartUpload request bodies.
//!
//! Elements are matched by their local names (a namespace prefix such as
//! `s3:` is not part of the name), entities are unescaped, unknown elements
//! are skipped, and a list may be split by other elements (`Contents` and
//! `CommonPrefixes` interleaved).

use quick_xml::events::Event;
use quick_xml::se::{QuoteLevel, Serializer};
use serde::{Deserialize, Serialize};

use crate::{BucketEntry, CompletedPart, ListPage, ObjectEntry};

/// The S3 namespace of request bodies.
const S3_NS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// The local name of the document's root element.
fn root(doc: &str) -> Option<String> {
    let mut r = quick_xml::Reader::from_str(doc);
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                return Some(String::from_utf8_lossy(e.local_name().as_ref()).into_owned())
            }
            Ok(Event::Eof) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// `doc` read as `T` when its root element is `name`.
fn parse<'de, T: Deserialize<'de>>(doc: &'de str, name: &str) -> Result<T, String> {
    if root(doc).as_deref() != Some(name) {
        return Err(format!("not a {name} document"));
    }
    quick_xml::de::from_str(doc).map_err(|e| format!("a {name} document that does not parse: {e}"))
}

/// `<Error>`: the body of an S3 error answer.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct ErrorDoc {
    /// `Code` (`NoSuchKey`, `SlowDown`, ...).
    pub code: Option<String>,
    /// `Message`.
    pub message: Option<String>,
    /// `RequestId`.
    pub request_id: Option<String>,
}

/// The fields of an error body; all `None` when it is not an `<Error>`
/// document (an empty body, HTML from a proxy).
pub(crate) fn error_doc(doc: &str) -> ErrorDoc {
    parse(doc, "Error").unwrap_or_default()
}

/// `<ListBucketResult>` of ListObjectsV2.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListBucketResult {
    #[serde(default)]
    contents: Vec<Contents>,
    #[serde(default)]
    common_prefixes: Vec<CommonPrefix>,
    #[serde(default)]
    is_truncated: bool,
    #[serde(default)]
    next_continuation_token: Option<String>,
    #[serde(default)]
    key_count: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Contents {
    key: String,
    size: u64,
    #[serde(rename = "ETag", default)]
    etag: Option<String>,
    #[serde(default)]
    last_modified: Option<String>,
    #[serde(default)]
    storage_class: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CommonPrefix {
    #[serde(default)]
    prefix: Option<String>,
}

/// A ListObjectsV2 result.
pub(crate) fn list_objects(doc: &str) -> Result<ListPage, String> {
    let r: ListBucketResult = parse(doc, "ListBucketResult")?;
    Ok(ListPage {
        objects: r
            .contents
            .into_iter()
            .map(|c| ObjectEntry {
                key: c.key,
                size: c.size,
                etag: c.etag,
                last_modified: c.last_modified,
                storage_class: c.storage_class,
            })
            .collect(),
        common_prefixes: r
            .common_prefixes
            .into_iter()
            .filter_map(|c| c.prefix)
            .collect(),
        is_truncated: r.is_truncated,
        next_continuation_token: r.next_continuation_token.filter(|s| !s.is_empty()),
        key_count: r.key_count,
    })
}

/// `<ListAllMyBucketsResult>` of ListBuckets.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListAllMyBucketsResult {
    #[serde(default)]
    buckets: Buckets,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Buckets {
    #[serde(default)]
    bucket: Vec<Bucket>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Bucket {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    creation_date: Option<String>,
}

/// A ListBuckets result (buckets without a name are left out).
pub(crate) fn list_buckets(doc: &str) -> Result<Vec<BucketEntry>, String> {
    let r: ListAllMyBucketsResult = parse(doc, "ListAllMyBucketsResult")?;
    Ok(r.buckets
        .bucket
        .into_iter()
        .filter_map(|b| {
            Some(BucketEntry {
                name: b.name?,
                creation_date: b.creation_date,
            })
        })
        .collect())
}

/// `<InitiateMultipartUploadResult>` of CreateMultipartUpload.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InitiateMultipartUploadResult {
    #[serde(default)]
    upload_id: Option<String>,
}

/// The `UploadId` of an InitiateMultipartUploadResult.
pub(crate) fn upload_id(doc: &str) -> Result<String, String> {
    parse::<InitiateMultipartUploadResult>(doc, "InitiateMultipartUploadResult")
        .ok()
        .and_then(|r| r.upload_id)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| "no <UploadId> in the CreateMultipartUpload answer".into())
}

/// `<CompleteMultipartUploadResult>` of CompleteMultipartUpload.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CompleteMultipartUploadResult {
    #[serde(rename = "ETag", default)]
    etag: Option<String>,
}

/// The object's `ETag` in a CompleteMultipartUploadResult, if the body is
/// one and has it.
pub(crate) fn completed_etag(doc: &str) -> Option<String> {
    parse::<CompleteMultipartUploadResult>(doc, "CompleteMultipartUploadResult")
        .ok()?
        .etag
}

/// `doc` as the body of a request, the root named `root`. Quotes in text
/// are escaped too (`&quot;` in ETags), as the SDKs write them.
fn to_xml<T: Serialize>(root: &str, doc: &T) -> String {
    let mut s = String::new();
    let mut ser = Serializer::with_root(&mut s, Some(root))
        .unwrap_or_else(|e| unreachable!("{root} is a valid element name: {e}"));
    ser.set_quote_level(QuoteLevel::Full);
    doc.serialize(ser)
        .unwrap_or_else(|e| unreachable!("request bodies are plain structs: {e}"));
    s
}

#[derive(Serialize)]
struct CompleteMultipartUpload<'a> {
    #[serde(rename = "@xmlns")]
    xmlns: &'a str,
    #[serde(rename = "Part")]
    parts: Vec<PartRef<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PartRef<'a> {
    part_number: u32,
    #[serde(rename = "ETag")]
    etag: &'a str,
}

/// The CompleteMultipartUpload request body.
pub(crate) fn complete_body(parts: &[CompletedPart]) -> String {
    to_xml(
        "CompleteMultipartUpload",
        &CompleteMultipartUpload {
            xmlns: S3_NS,
            parts: parts
                .iter()
                .map(|p| PartRef {
                    part_number: p.part_number,
                    etag: &p.etag,
                })
                .collect(),
        },
    )
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct CreateBucketConfiguration<'a> {
    #[serde(rename = "@xmlns")]
    xmlns: &'a str,
    location_constraint: &'a str,
}

/// The CreateBucketConfiguration for a region other than us-east-1.
pub(crate) fn create_bucket_body(region: &str) -> String {
    to_xml(
        "CreateBucketConfiguration",
        &CreateBucketConfiguration {
            xmlns: S3_NS,
            location_constraint: region,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_results_are_parsed() {
        let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>a/</Prefix>
<KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
<Contents><Key>a/x&amp;y</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>"e1"</ETag><Size>10</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>a/z</Key><Size>0</Size></Contents>
<CommonPrefixes><Prefix>a/d/</Prefix></CommonPrefixes>
<NextContinuationToken>tok==</NextContinuationToken></ListBucketResult>"#;
        let p = list_objects(doc).unwrap();
        assert_eq!(p.objects.len(), 2);
        assert_eq!(p.objects[0].key, "a/x&y");
        assert_eq!(p.objects[0].size, 10);
        assert_eq!(p.objects[0].etag.as_deref(), Some("\"e1\""));
        assert_eq!(p.objects[1].size, 0);
        assert_eq!(p.common_prefixes, vec!["a/d/".to_string()]);
        assert!(p.is_truncated);
        assert_eq!(p.next_continuation_token.as_deref(), Some("tok=="));
        assert_eq!(p.key_count, Some(3));
        let empty = list_objects(
            "<ListBucketResult><Prefix/><IsTruncated>false</IsTruncated></ListBucketResult>",
        )
        .unwrap();
        assert!(empty.objects.is_empty() && !empty.is_truncated);
        assert!(list_objects("<Error/>").is_err());
    }

    #[test]
    fn buckets_upload_ids_and_complete() {
        let doc = "<ListAllMyBucketsResult><Owner><ID>o</ID></Owner><Buckets><Bucket><Name>b1</Name><CreationDate>d</CreationDate></Bucket><Bucket><Name>b2</Name></Bucket></Buckets></ListAllMyBucketsResult>";
        let b = list_buckets(doc).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].name, "b2");
        assert_eq!(
            upload_id("<InitiateMultipartUploadResult><UploadId>u-1</UploadId></InitiateMultipartUploadResult>").unwrap(),
            "u-1"
        );
        let body = complete_body(&[CompletedPart {
            part_number: 1,
            etag: "\"e\"".into(),
        }]);
        assert!(body.contains("<Part><PartNumber>1</PartNumber><ETag>&quot;e&quot;</ETag></Part>"));
    }

    #[test]
    fn entities_are_unescaped_everywhere() {
        let doc = "<ListBucketResult><Contents><Key>a&amp;b&lt;c&gt;&quot;d&apos;&#233;&#x41;</Key><Size>1</Size><ETag>&quot;e&quot;</ETag></Contents>\
                   <CommonPrefixes><Prefix>p&amp;q/</Prefix></CommonPrefixes>\
                   <NextContinuationToken>t&amp;u</NextContinuationToken></ListBucketResult>";
        let p = list_objects(doc).unwrap();
        assert_eq!(p.objects[0].key, "a&b<c>\"d'\u{e9}A");
        assert_eq!(p.objects[0].etag.as_deref(), Some("\"e\""));
        assert_eq!(p.common_prefixes, ["p&q/"]);
        assert_eq!(p.next_continuation_token.as_deref(), Some("t&u"));
        let b = list_buckets(
            "<ListAllMyBucketsResult><Buckets><Bucket><Name>x&amp;y</Name></Bucket></Buckets></ListAllMyBucketsResult>",
        )
        .unwrap();
        assert_eq!(b[0].name, "x&y");
        let e = error_doc(
            "<Error><Code>NoSuchKey</Code><Message>no &quot;k&amp;1&quot;</Message></Error>",
        );
        assert_eq!(e.message.as_deref(), Some("no \"k&1\""));
    }

    #[test]
    fn namespaces_and_prefixes_are_not_part_of_names() {
        let doc = r#"<s3:ListBucketResult xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/">
<s3:Contents><s3:Key>k</s3:Key><s3:Size>5</s3:Size></s3:Contents>
<s3:IsTruncated>false</s3:IsTruncated></s3:ListBucketResult>"#;
        let p = list_objects(doc).unwrap();
        assert_eq!(p.objects.len(), 1);
        assert_eq!((p.objects[0].key.as_str(), p.objects[0].size), ("k", 5));
        let doc = r#"<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Buckets><Bucket><Name>b</Name></Bucket></Buckets></ListAllMyBucketsResult>"#;
        assert_eq!(list_buckets(doc).unwrap()[0].name, "b");
        let doc = r#"<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key><UploadId>u-2</UploadId></InitiateMultipartUploadResult>"#;
        assert_eq!(upload_id(doc).unwrap(), "u-2");
        let doc = r#"<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Location>l</Location><Bucket>b</Bucket><Key>k</Key><ETag>"abc-2"</ETag></CompleteMultipartUploadResult>"#;
        assert_eq!(completed_etag(doc).as_deref(), Some("\"abc-2\""));
    }

    #[test]
    fn empty_lists() {
        let p = list_objects(
            r#"<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>"#,
        )
        .unwrap();
        assert!(p.objects.is_empty() && p.common_prefixes.is_empty());
        assert_eq!(p.key_count, Some(0));
        assert_eq!(p.next_continuation_token, None);
        assert!(list_objects("<ListBucketResult/>")
            .unwrap()
            .objects
            .is_empty());
        for doc in [
            "<ListAllMyBucketsResult><Owner><ID>o</ID></Owner><Buckets></Buckets></ListAllMyBucketsResult>",
            "<ListAllMyBucketsResult><Buckets/></ListAllMyBucketsResult>",
            "<ListAllMyBucketsResult/>",
        ] {
            assert_eq!(list_buckets(doc).unwrap(), vec![], "{doc}");
        }
        assert_eq!(
            complete_body(&[]),
            format!("<CompleteMultipartUpload xmlns=\"{S3_NS}\"/>")
        );
    }

    #[test]
    fn missing_optional_fields() {
        let p = list_objects(
            "<ListBucketResult><Contents><Key>k</Key><Size>3</Size></Contents></ListBucketResult>",
        )
        .unwrap();
        let o = &p.objects[0];
        assert_eq!(
            (
                o.etag.as_ref(),
                o.last_modified.as_ref(),
                o.storage_class.as_ref()
            ),
            (None, None, None)
        );
        assert!(!p.is_truncated);
        assert_eq!((p.key_count, p.next_continuation_token), (None, None));
        // An empty continuation token is no token.
        let p =
            list_objects("<ListBucketResult><NextContinuationToken/></ListBucketResult>").unwrap();
        assert_eq!(p.next_continuation_token, None);
        // A bucket without a name is left out; without a date it is kept.
        let b = list_buckets(
            "<ListAllMyBucketsResult><Buckets><Bucket><CreationDate>d</CreationDate></Bucket><Bucket><Name>n</Name></Bucket></Buckets></ListAllMyBucketsResult>",
        )
        .unwrap();
        assert_eq!(
            b,
            vec![BucketEntry {
                name: "n".into(),
                creation_date: None
            }]
        );
        assert_eq!(
            error_doc("<Error><Code>SlowDown</Code></Error>"),
            ErrorDoc {
                code: Some("SlowDown".into()),
                ..ErrorDoc::default()
            }
        );
        assert_eq!(
            completed_etag(
                "<CompleteMultipartUploadResult><Key>k</Key></CompleteMultipartUploadResult>"
            ),
            None
        );
        assert!(upload_id(
            "<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>"
        )
        .is_err());
        assert!(upload_id("<InitiateMultipartUploadResult/>").is_err());
    }

    #[test]
    fn required_fields_and_wrong_documents_are_errors() {
        // A <Contents> without <Key> or with a non-numeric <Size>.
        assert!(list_objects(
            "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>"
        )
        .is_err());
        assert!(list_objects(
            "<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents></ListBucketResult>"
        )
        .is_err());
        assert!(list_objects("<ListAllMyBucketsResult/>").is_err());
        assert!(list_buckets("<ListBucketResult/>").is_err());
        assert!(list_objects("").is_err());
        assert!(list_objects("not xml").is_err());
        // Not an error document: nothing read from it.
        assert_eq!(error_doc(""), ErrorDoc::default());
        assert_eq!(
            error_doc("<html><body><Code>x</Code></body></html>"),
            ErrorDoc::default()
        );
        assert_eq!(completed_etag(""), None);
    }

    #[test]
    fn interleaved_lists() {
        let doc = "<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents>\
                   <CommonPrefixes><Prefix>b/</Prefix></CommonPrefixes>\
                   <Contents><Key>c</Key><Size>2</Size></Contents>\
                   <CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes></ListBucketResult>";
        let p = list_objects(doc).unwrap();
        let keys: Vec<_> = p.objects.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["a", "c"]);
        assert_eq!(p.common_prefixes, ["b/", "d/"]);
    }

    #[test]
    fn request_bodies() {
        assert_eq!(
            create_bucket_body("eu-west-1&"),
            format!("<CreateBucketConfiguration xmlns=\"{S3_NS}\"><LocationConstraint>eu-west-1&amp;</LocationConstraint></CreateBucketConfiguration>")
        );
        let body = complete_body(&[
            CompletedPart {
                part_number: 1,
                etag: "\"a\"".into(),
            },
            CompletedPart {
                part_number: 2,
                etag: "b<".into(),
            },
        ]);
        assert_eq!(
            body,
            format!("<CompleteMultipartUpload xmlns=\"{S3_NS}\"><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part><Part><PartNumber>2</PartNumber><ETag>b&lt;</ETag></Part></CompleteMultipartUpload>")
        );
    }
}
