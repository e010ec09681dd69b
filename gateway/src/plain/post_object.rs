//! Browser-based uploads (POST Object): `POST /bucket` with a
//! `multipart/form-data` body whose fields carry the key, the object's
//! headers, a policy and its signature, and whose `file` part is the
//! object.
//!
//! The body is parsed as it streams (multer): the fields before `file` are
//! bounded ([`MAX_FIELDS_BYTES`] of names and values, [`MAX_PRELUDE`] raw
//! bytes, [`MAX_FIELDS`] fields) and kept; the form is verified
//! ([`crate::auth::post_form`]); then the `file` part is read, the parser
//! fed at most [`MAX_BATCH`] bytes per turn so that its buffer stays
//! small, its length checked against the policy's `content-length-range`
//! as it comes (400 `EntityTooLarge` at once past the maximum, 400
//! `EntityTooSmall` short of the minimum). The store's PUT needs its
//! `Content-Length`, which a form does not give: the file waits in memory
//! or in an unnamed temporary file, within a process-wide budget
//! ([`super::post_spool`]), so the gateway's memory and disk stay bounded
//! whatever the size (at most [`MAX_OBJECT`], S3's single-PUT limit). Then the gateway's own
//! signed PUT streams it to the store, with the form's `Content-Type`,
//! `Cache-Control`, `Content-Disposition`, `x-amz-meta-*`, ... as headers.
//! A refused form or file leaves nothing in the store. Fields after `file`
//! are ignored, as S3 ignores them.
//!
//! The answer is S3's: `success_action_redirect` (303 to it with `bucket`,
//! `key` and `etag` added to its query), else `success_action_status` 200,
//! 201 (with the XML `PostResponse`) or 204 (the default); `ETag` and
//! `Location` headers. A store that refuses the PUT is passed through.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use futures::Stream;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, ETAG, HOST, LOCATION};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Version};
use http_body::Body as _;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::auth::post_form::{self, FormFields};
use crate::auth::{AuthSettings, Credentials};
use crate::body::{Body, BodyStalled, BoxError};
use crate::s3err::S3Error;
use crate::upstream::{Payload, Upstream};

/// The most bytes of field names and values before the `file` part (S3
/// bounds the form fields preceding the file at 20 KB).
pub const MAX_FIELDS_BYTES: usize = 20 << 10;

/// The most raw bytes before the `file` part: fields, their part headers
/// and boundaries.
pub const MAX_PRELUDE: u64 = 64 << 10;

/// The most fields before the `file` part.
pub const MAX_FIELDS: usize = 256;

/// The most bytes handed to the parser in one turn: it buffers what it is
/// given until it yields, so this bounds its buffer.
pub const MAX_BATCH: usize = 256 << 10;

/// The largest file accepted: S3's limit of a single PUT, 5 GiB.
pub const MAX_OBJECT: u64 = 5 << 30;

/// The longest key S3 accepts, in bytes.
const MAX_KEY: usize = 1024;

/// What an object key's path segment leaves unescaped: unreserved
/// characters and `/`.
const KEY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// What a redirect's query values leave unescaped: unreserved characters.
const QUERY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Form fields carried over to the store's PUT as headers of the same name.
const HEADER_FIELDS: &[&str] = &[
    "cache-control",
    "content-type",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
    "x-amz-acl",
    "x-amz-storage-class",
    "x-amz-website-redirect-location",
];

/// Prefixes of form fields carried over as headers.
const HEADER_FIELD_PREFIXES: &[&str] = &[
    "x-amz-meta-",
    "x-amz-server-side-encryption",
    "x-amz-checksum-",
    "x-amz-object-lock-",
];

/// Whether a request is a browser-based upload: `POST /bucket` (no key, no
/// query) with a `multipart/form-data` body and no `Authorization` (its
/// signature is in the form).
pub fn is_post_object(parts: &Parts) -> bool {
    if parts.method != Method::POST
        || parts.headers.contains_key(http::header::AUTHORIZATION)
        || parts.uri.query().is_some_and(|q| !q.is_empty())
    {
        return false;
    }
    let multipart = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .get(..19)
                .is_some_and(|t| t.eq_ignore_ascii_case("multipart/form-data"))
        });
    multipart && path_bucket(parts).is_some()
}

/// The bucket of a path-style upload's path, `/bucket` or `/bucket/`.
pub fn path_bucket(parts: &Parts) -> Option<&str> {
    let path = parts.uri.path().strip_prefix('/')?;
    let bucket = path.strip_suffix('/').unwrap_or(path);
    (!bucket.is_empty() && !bucket.contains('/') && !bucket.contains('%')).then_some(bucket)
}

/// Serves a browser-based upload to `bucket` (see the module's doc): the
/// path's ([`path_bucket`]), or the one a virtual host names.
pub async fn serve(
    upstream: &dyn Upstream,
    creds: &Credentials,
    settings: &AuthSettings,
    spool_settings: &super::post_spool::SpoolSettings,
    bucket: &str,
    parts: Parts,
    body: Body,
) -> Result<Response<Body>, S3Error> {
    crate::metrics::request("PostObject", crate::metrics::PATH_HTTP);
    let bucket = bucket.to_string();
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type)
        .map_err(|_| malformed("the Content-Type has no multipart boundary"))?;

    let in_file = Arc::new(AtomicBool::new(false));
    let stream = Metered {
        body,
        in_file: in_file.clone(),
        prelude: 0,
        batch: 0,
    };
    let mut form = multer::Multipart::new(stream, boundary);

    // The fields before `file`.
    let mut fields = FormFields::new();
    let mut field_bytes = 0usize;
    let mut file = loop {
        let Some(mut field) = form.next_field().await.map_err(|e| parse_error(&e))? else {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                "POST requires exactly one file upload per request.",
            ));
        };
        let name = field.name().unwrap_or("").to_string();
        if name.eq_ignore_ascii_case("file") {
            in_file.store(true, Ordering::Relaxed);
            break field;
        }
        if fields.len() == MAX_FIELDS {
            return Err(too_many_fields());
        }
        field_bytes = field_bytes.saturating_add(name.len());
        let mut value = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(|e| parse_error(&e))? {
            field_bytes = field_bytes.saturating_add(chunk.len());
            if field_bytes > MAX_FIELDS_BYTES {
                return Err(too_many_fields());
            }
            value.extend_from_slice(&chunk);
        }
        let value = String::from_utf8(value).map_err(|_| {
            S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                format!("the form field {name:?} is not UTF-8"),
            )
        })?;
        fields.push(&name, value);
    };

    let grant = match post_form::check(&fields, &bucket, creds, settings, SystemTime::now()) {
        Ok(g) => g,
        Err(e) => {
            crate::metrics::auth_failure(e.code);
            tracing::info!(bucket, code = e.code, reason = %e.message, "POST form refused");
            return Err(e);
        }
    };

    let filename = file.file_name().unwrap_or("").to_string();
    let key_field = fields.get("key").ok_or_else(|| {
        S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.",
        )
    })?;
    let key = key_field.replace("${filename}", &filename);
    if key.is_empty() {
        return Err(S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "User key must have a length greater than 0.",
        ));
    }
    if key.len() > MAX_KEY {
        return Err(S3Error::new(
            StatusCode::BAD_REQUEST,
            "KeyTooLongError",
            "Your key is too long",
        ));
    }

    let mut req = Request::new(Body::empty());
    *req.method_mut() = Method::PUT;
    *req.version_mut() = Version::HTTP_11;
    let path = format!("/{bucket}/{}", utf8_percent_encode(&key, KEY_ENCODE));
    *req.uri_mut() = path
        .parse()
        .map_err(|_| malformed("the key cannot be sent on"))?;
    // The signer's tenant may write here (the same check as a PUT's).
    let policy = creds
        .policy(&grant.access_key)
        .cloned()
        .ok_or_else(|| S3Error::internal("a verified key without a policy"))?;
    let (check, _) = Request::builder()
        .method(Method::PUT)
        .uri(req.uri().clone())
        .body(())
        .map_err(|_| malformed("the key cannot be sent on"))?
        .into_parts();
    if let Err(e) = crate::tenancy::authorize(&policy, &check) {
        crate::metrics::auth_failure("TenantDenied");
        tracing::info!(bucket, access_key = %grant.access_key, "POST form refused: out of the tenant's buckets");
        return Err(e);
    }
    if let Some(store) = &policy.store {
        req.extensions_mut()
            .insert(crate::tenancy::StoreIdentity(Arc::clone(store)));
    }
    *req.headers_mut() = object_headers(&fields)?;

    let (min, max) = grant.length_range.unwrap_or((0, MAX_OBJECT));
    let (spooled, len) =
        super::post_spool::spool(&mut file, min, max.min(MAX_OBJECT), spool_settings).await?;
    drop(file);
    // The parser's other half is no longer needed.
    drop(form);
    req.headers_mut()
        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
    *req.body_mut() = spooled.into_body(len);

    let sent = crate::upstream::timed("PostObject", upstream.send(req, Payload::Unsigned)).await;
    let resp = sent.map_err(|err| {
        tracing::warn!(upstream = %upstream.describe(), error = %err, "store request failed");
        S3Error::bad_gateway("the store failed to answer the request")
    })?;
    if !resp.status().is_success() {
        // The store's own refusal (NoSuchBucket, ...), as it is.
        let (mut head, body) = resp.into_parts();
        crate::header_filter::remove_hop_by_hop(&mut head.headers);
        return Ok(Response::from_parts(head, body));
    }
    let etag = resp.headers().get(ETAG).cloned();
    let version = resp.headers().get("x-amz-version-id").cloned();
    Ok(answer(&parts, &fields, &bucket, &key, etag, version))
}

/// The headers of the store's PUT, from the form fields that name them.
fn object_headers(fields: &FormFields) -> Result<http::HeaderMap, S3Error> {
    let mut out = http::HeaderMap::new();
    for (name, value) in fields.iter() {
        let carried = HEADER_FIELDS.contains(&name)
            || HEADER_FIELD_PREFIXES.iter().any(|p| name.starts_with(p));
        if !carried || out.contains_key(name) {
            continue;
        }
        let bad = || {
            S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                format!("the form field {name:?} is not a valid header"),
            )
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        if !value.is_ascii() {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                format!("the form field {name:?} must be ASCII"),
            ));
        }
        let v = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
        out.insert(n, v);
    }
    Ok(out)
}

/// S3's answer to a stored upload.
fn answer(
    parts: &Parts,
    fields: &FormFields,
    bucket: &str,
    key: &str,
    etag: Option<HeaderValue>,
    version: Option<HeaderValue>,
) -> Response<Body> {
    let etag_text = etag
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let encoded_key = utf8_percent_encode(key, KEY_ENCODE).to_string();
    let location = match parts.headers.get(HOST).and_then(|h| h.to_str().ok()) {
        Some(host) => format!("http://{host}/{bucket}/{encoded_key}"),
        None => format!("/{bucket}/{encoded_key}"),
    };

    let redirect = fields
        .get("success_action_redirect")
        .or_else(|| fields.get("redirect"))
        .and_then(|r| redirect_to(r, bucket, key, &etag_text));
    let (status, body, xml) = if redirect.is_some() {
        (StatusCode::SEE_OTHER, Body::empty(), false)
    } else {
        match fields.get("success_action_status") {
            Some("200") => (StatusCode::OK, Body::empty(), false),
            Some("201") => {
                use quick_xml::escape::partial_escape as escape;
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse><Location>{}</Location><Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></PostResponse>",
                    escape(location.as_str()),
                    escape(bucket),
                    escape(key),
                    escape(etag_text.as_str()),
                );
                (StatusCode::CREATED, Body::from(xml), true)
            }
            // S3 takes any other value as 204.
            _ => (StatusCode::NO_CONTENT, Body::empty(), false),
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if xml {
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    }
    if let Some(e) = etag {
        h.insert(ETAG, e);
    }
    if let Some(v) = version {
        h.insert("x-amz-version-id", v);
    }
    let loc = redirect.or_else(|| HeaderValue::from_str(&location).ok());
    if let Some(l) = loc {
        h.insert(LOCATION, l);
    }
    resp
}

/// The redirect target: `url` with `bucket`, `key` and `etag` added to its
/// query; `None` (S3 then answers by `success_action_status`) when `url`
/// is not an absolute http(s) URL.
fn redirect_to(url: &str, bucket: &str, key: &str, etag: &str) -> Option<HeaderValue> {
    let uri: http::Uri = url.parse().ok()?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return None;
    }
    let (base, fragment) = url
        .split_once('#')
        .map_or((url, None), |(b, f)| (b, Some(f)));
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut out = format!(
        "{base}{sep}bucket={}&key={}&etag={}",
        utf8_percent_encode(bucket, QUERY_ENCODE),
        utf8_percent_encode(key, QUERY_ENCODE),
        utf8_percent_encode(etag, QUERY_ENCODE)
    );
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    HeaderValue::from_str(&out).ok()
}

fn malformed(detail: &str) -> S3Error {
    S3Error::new(
        StatusCode::BAD_REQUEST,
        "MalformedPOSTRequest",
        format!("The body of your POST request is not well-formed multipart/form-data: {detail}"),
    )
}

fn too_many_fields() -> S3Error {
    S3Error::new(
        StatusCode::BAD_REQUEST,
        "MaxPostPreDataLengthExceededError",
        "Your POST request fields preceding the upload file were too large.",
    )
}

/// The error `e` of the parser (or of the body under it) answers with.
impl super::post_spool::FilePart for multer::Field<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, S3Error> {
        self.chunk().await.map_err(|e| parse_error(&e))
    }
}

fn parse_error(e: &multer::Error) -> S3Error {
    if let multer::Error::StreamReadFailed(inner) = e {
        if inner.downcast_ref::<PreludeTooLarge>().is_some() {
            return too_many_fields();
        }
        if let Some(s3) = stream_error(&**inner) {
            return s3;
        }
        return S3Error::new(
            StatusCode::BAD_REQUEST,
            "IncompleteBody",
            "the request body could not be read whole",
        );
    }
    malformed(&e.to_string())
}

/// A stalled body's error (400 `RequestTimeout`), if `e` is one.
fn stream_error(e: &(dyn std::error::Error + 'static)) -> Option<S3Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(s) = err.downcast_ref::<BodyStalled>() {
            return Some(S3Error::new(
                StatusCode::BAD_REQUEST,
                "RequestTimeout",
                format!("your socket connection was not read from within the timeout: {s}"),
            ));
        }
        cur = err.source();
    }
    None
}

/// The raw bytes before the `file` part passed [`MAX_PRELUDE`].
#[derive(Debug, thiserror::Error)]
#[error("the form fields preceding the file are too large")]
struct PreludeTooLarge;

/// The request body as the parser's stream: its data frames, the bytes
/// before the `file` part bounded by [`MAX_PRELUDE`], and a turn given up
/// (woken at once) every [`MAX_BATCH`] bytes, since the parser takes all
/// that is ready before it yields.
struct Metered {
    body: Body,
    in_file: Arc<AtomicBool>,
    prelude: u64,
    batch: usize,
}

impl Stream for Metered {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.batch >= MAX_BATCH {
            this.batch = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        loop {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => {
                    this.batch = 0;
                    return Poll::Pending;
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into_inner()))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers
                    };
                    if !this.in_file.load(Ordering::Relaxed) {
                        this.prelude = this.prelude.saturating_add(data.len() as u64);
                        if this.prelude > MAX_PRELUDE {
                            return Poll::Ready(Some(Err(Box::new(PreludeTooLarge))));
                        }
                    }
                    this.batch = this.batch.saturating_add(data.len());
                    return Poll::Ready(Some(Ok(data)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn which_requests_are_uploads() {
        let ct = ("content-type", "multipart/form-data; boundary=x");
        assert!(is_post_object(&parts("POST", "/b", &[ct])));
        assert!(is_post_object(&parts("POST", "/b/", &[ct])));
        assert!(!is_post_object(&parts("POST", "/b/k", &[ct])));
        assert!(!is_post_object(&parts("POST", "/b?delete", &[ct])));
        assert!(!is_post_object(&parts("PUT", "/b", &[ct])));
        assert!(!is_post_object(&parts("POST", "/", &[ct])));
        assert!(!is_post_object(&parts(
            "POST",
            "/b",
            &[("content-type", "application/xml")]
        )));
        assert!(!is_post_object(&parts(
            "POST",
            "/b",
            &[ct, ("authorization", "AWS4-HMAC-SHA256 x")]
        )));
    }

    #[test]
    fn redirects() {
        let to = redirect_to("https://example.com/done?x=1", "b", "a b/c", "\"e\"").unwrap();
        assert_eq!(
            to,
            "https://example.com/done?x=1&bucket=b&key=a%20b%2Fc&etag=%22e%22"
        );
        assert!(redirect_to("/relative", "b", "k", "e").is_none());
        assert!(redirect_to("ftp://h/x", "b", "k", "e").is_none());
    }
}
