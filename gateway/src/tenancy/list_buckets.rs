//! ListBuckets' answer narrowed to a tenant's buckets: every
//! `<Bucket>` element of `ListAllMyBucketsResult` whose `<Name>` is out of
//! the tenant's scope is removed, the rest of the document kept as the
//! store wrote it.
//!
//! The answer is read whole (it is small: a name and a date per bucket),
//! up to [`MAX_LISTING`]; a larger one, or one that does not parse, is
//! not passed on (502), since passing it on unfiltered would show other
//! tenants' buckets.

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, ETAG, TRANSFER_ENCODING};
use http::{HeaderValue, Response};
use http_body_util::BodyExt as _;
use quick_xml::events::Event;
use quick_xml::{Reader, Writer};

use super::BucketScope;
use crate::body::Body;
use crate::s3err::S3Error;

/// The largest ListBuckets answer narrowed (S3 allows 10,000 buckets per
/// account; at about 150 bytes each, 1.5 MB).
pub const MAX_LISTING: usize = 16 << 20;

/// `resp` (the store's answer to ListBuckets) with only the buckets of
/// `scope`; an answer other than 200 is passed on as it is.
pub async fn narrow(resp: Response<Body>, scope: &BucketScope) -> Result<Response<Body>, S3Error> {
    if !resp.status().is_success() || scope.is_all() {
        return Ok(resp);
    }
    let (mut head, body) = resp.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_LISTING);
    let bytes = limited
        .collect()
        .await
        .map_err(|_| S3Error::bad_gateway("the store's bucket listing could not be read"))?
        .to_bytes();
    let narrowed = filter(&bytes, scope)
        .ok_or_else(|| S3Error::bad_gateway("the store's bucket listing does not parse"))?;
    head.headers.remove(TRANSFER_ENCODING);
    head.headers.remove("content-md5");
    head.headers.remove(ETAG);
    head.headers
        .insert(CONTENT_LENGTH, HeaderValue::from(narrowed.len()));
    Ok(Response::from_parts(
        head,
        Body::from(Bytes::from(narrowed)),
    ))
}

/// The document `xml` less the `<Bucket>` elements out of `scope`; `None`
/// when it does not parse.
pub fn filter(xml: &[u8], scope: &BucketScope) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(xml).ok()?;
    let mut reader = Reader::from_str(text);
    let mut writer = Writer::new(Vec::with_capacity(xml.len()));
    // The events of the `<Bucket>` being read, and its name.
    let mut held: Option<(Vec<Event<'_>>, String, usize)> = None;
    loop {
        let event = reader.read_event().ok()?;
        if matches!(event, Event::Eof) {
            break;
        }
        if let Some((events, name, depth)) = held.as_mut() {
            match &event {
                Event::Start(_) => *depth += 1,
                Event::End(e) if *depth == 1 && e.local_name().as_ref() == b"Bucket" => {
                    let (events, name, _) = held.take()?;
                    if scope.allows(&name) {
                        for e in events {
                            writer.write_event(e).ok()?;
                        }
                        writer.write_event(event).ok()?;
                    }
                    continue;
                }
                Event::End(_) => *depth -= 1,
                // The text directly inside `<Name>` (depth 2).
                Event::Text(t) if *depth == 2 && in_name(events) => {
                    name.push_str(&t.xml_content().ok()?);
                }
                Event::GeneralRef(_) if *depth == 2 && in_name(events) => {
                    // An entity in a bucket name: no allowed name has one.
                    name.push('\u{0}');
                }
                _ => {}
            }
            events.push(event);
            continue;
        }
        if let Event::Start(e) = &event {
            if e.local_name().as_ref() == b"Bucket" {
                held = Some((vec![event], String::new(), 1));
                continue;
            }
        }
        writer.write_event(event).ok()?;
    }
    held.is_none().then(|| writer.into_inner())
}

/// Whether the last opened element among `events` is `<Name>`.
fn in_name(events: &[Event<'_>]) -> bool {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Start(s) => Some(s.local_name().as_ref() == b"Name"),
            Event::End(_) => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>o</ID><DisplayName>d</DisplayName></Owner><Buckets><Bucket><Name>alpha</Name><CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket><Bucket><Name>beta</Name><CreationDate>2026-01-02T00:00:00.000Z</CreationDate></Bucket><Bucket><CreationDate>2026-01-03T00:00:00.000Z</CreationDate><Name>team-a</Name></Bucket></Buckets></ListAllMyBucketsResult>"#;

    fn names(xml: &[u8]) -> Vec<String> {
        let s = std::str::from_utf8(xml).unwrap();
        s.split("<Name>")
            .skip(1)
            .map(|p| p.split('<').next().unwrap().to_string())
            .collect()
    }

    #[test]
    fn keeps_only_the_scope() {
        let scope = BucketScope::parse("alpha,team-*").unwrap();
        let out = filter(DOC.as_bytes(), &scope).unwrap();
        assert_eq!(names(&out), ["alpha", "team-a"]);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("<Owner><ID>o</ID>"), "{text}");
        assert!(text.contains("2026-01-03T00:00:00.000Z"), "{text}");
        assert!(!text.contains("2026-01-02"), "{text}");
        let none = filter(DOC.as_bytes(), &BucketScope::parse("gamma").unwrap()).unwrap();
        let text = String::from_utf8(none).unwrap();
        assert!(text.contains("<Buckets></Buckets>"), "{text}");
    }

    #[test]
    fn entities_and_broken_documents() {
        let scope = BucketScope::parse("alpha").unwrap();
        let doc = "<R><Buckets><Bucket><Name>al&amp;pha</Name></Bucket><Bucket><Name>alpha</Name></Bucket></Buckets></R>";
        assert_eq!(names(&filter(doc.as_bytes(), &scope).unwrap()), ["alpha"]);
        assert!(filter(b"<R><Buckets><Bucket><Name>alpha</Name>", &scope).is_none());
        assert!(filter(b"\xff\xfe", &scope).is_none());
    }
}
