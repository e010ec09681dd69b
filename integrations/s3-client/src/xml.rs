//! The little XML S3 speaks here: error bodies, ListObjectsV2 and
//! ListBuckets results, multipart upload ids, and the Complete request.
//! S3's documents are flat and regular; elements are found by name.

use crate::{BucketEntry, CompletedPart, ListPage, ObjectEntry};

/// The inner text of each `<tag>…</tag>` (or `<tag/>`, empty) in `doc`, in
/// order, not unescaped. Elements of that name must not nest.
fn raw_all<'a>(doc: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let open_attr = format!("<{tag} ");
    let empty = format!("<{tag}/>");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = doc;
    loop {
        let candidates = [
            rest.find(&open).map(|i| (i, open.len(), false)),
            rest.find(&open_attr)
                .and_then(|i| rest[i..].find('>').map(|j| (i, j + 1, false))),
            rest.find(&empty).map(|i| (i, empty.len(), true)),
        ];
        let Some((i, len, is_empty)) = candidates.into_iter().flatten().min_by_key(|c| c.0) else {
            break;
        };
        let start = i + len;
        if is_empty || rest[..start].ends_with("/>") {
            out.push("");
            rest = &rest[start..];
            continue;
        }
        let Some(end) = rest[start..].find(&close) else {
            break;
        };
        out.push(&rest[start..start + end]);
        rest = &rest[start + end + close.len()..];
    }
    out
}

fn unescape(s: &str) -> String {
    quick_xml::escape::unescape(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| s.to_string())
}

/// The unescaped text of the first `<tag>` in `doc`.
pub(crate) fn first(doc: &str, tag: &str) -> Option<String> {
    raw_all(doc, tag).first().map(|s| unescape(s))
}

fn escape(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

/// `doc` without the `<tag>…</tag>` elements (so that their children are
/// not taken for the document's own fields).
fn without(doc: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(i) = rest.find(&open) {
        out.push_str(&rest[..i]);
        match rest[i..].find(&close) {
            Some(j) => rest = &rest[i + j + close.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A ListObjectsV2 result.
pub(crate) fn list_objects(doc: &str) -> Result<ListPage, String> {
    if !doc.contains("<ListBucketResult") {
        return Err("not a ListBucketResult document".into());
    }
    let mut objects = Vec::new();
    for c in raw_all(doc, "Contents") {
        let key = first(c, "Key").ok_or("a <Contents> without <Key>")?;
        let size = first(c, "Size")
            .and_then(|s| s.trim().parse().ok())
            .ok_or("a <Contents> without a numeric <Size>")?;
        objects.push(ObjectEntry {
            key,
            size,
            etag: first(c, "ETag"),
            last_modified: first(c, "LastModified"),
            storage_class: first(c, "StorageClass"),
        });
    }
    let common_prefixes = raw_all(doc, "CommonPrefixes")
        .into_iter()
        .filter_map(|c| first(c, "Prefix"))
        .collect();
    let top = without(&without(doc, "Contents"), "CommonPrefixes");
    Ok(ListPage {
        objects,
        common_prefixes,
        is_truncated: first(&top, "IsTruncated").is_some_and(|v| v.trim() == "true"),
        next_continuation_token: first(&top, "NextContinuationToken").filter(|s| !s.is_empty()),
        key_count: first(&top, "KeyCount").and_then(|s| s.trim().parse().ok()),
    })
}

/// A ListBuckets result.
pub(crate) fn list_buckets(doc: &str) -> Result<Vec<BucketEntry>, String> {
    if !doc.contains("<ListAllMyBucketsResult") {
        return Err("not a ListAllMyBucketsResult document".into());
    }
    Ok(raw_all(doc, "Bucket")
        .into_iter()
        .filter_map(|b| {
            Some(BucketEntry {
                name: first(b, "Name")?,
                creation_date: first(b, "CreationDate"),
            })
        })
        .collect())
}

/// The `<UploadId>` of an InitiateMultipartUploadResult.
pub(crate) fn upload_id(doc: &str) -> Result<String, String> {
    first(doc, "UploadId")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| "no <UploadId> in the CreateMultipartUpload answer".into())
}

/// The CompleteMultipartUpload request body.
pub(crate) fn complete_body(parts: &[CompletedPart]) -> String {
    let mut s =
        String::from("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for p in parts {
        s.push_str("<Part>");
        s.push_str(&format!("<PartNumber>{}</PartNumber>", p.part_number));
        s.push_str(&format!("<ETag>{}</ETag>", escape(&p.etag)));
        s.push_str("</Part>");
    }
    s.push_str("</CompleteMultipartUpload>");
    s
}

/// The CreateBucketConfiguration for a region other than us-east-1.
pub(crate) fn create_bucket_body(region: &str) -> String {
    format!(
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>",
        escape(region)
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
}
