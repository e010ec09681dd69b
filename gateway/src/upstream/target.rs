//! The request target sent to the store: the client's path re-encoded
//! canonically, its query less what the store mishandles.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::error::UpstreamError;

/// What AWS's URI encoding leaves alone in a path: unreserved characters
/// and `/`.
const PATH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The path-and-query to send to the store for a client's raw one.
///
/// The path is decoded and encoded again the way SigV4 canonicalizes it
/// (every byte but unreserved characters and `/` percent-encoded), so the
/// store's canonical path matches the one signed whatever escaping the
/// client chose. The query is kept as sent, less an empty `delimiter`
/// parameter (s3s-fs lists nothing for `delimiter=`, which minio-py sends).
pub(crate) fn upstream_path_and_query(uri: &http::Uri) -> Result<String, UpstreamError> {
    let raw_path = uri.path();
    let path = percent_decode_str(raw_path)
        .decode_utf8()
        .map_err(|_| UpstreamError::InvalidTarget("path is not UTF-8 once decoded".into()))?;
    let mut out = String::with_capacity(raw_path.len() + uri.query().map_or(0, |q| q.len() + 1));
    if !path.starts_with('/') {
        out.push('/');
    }
    out.extend(utf8_percent_encode(&path, PATH_ENCODE));
    if let Some(query) = uri.query() {
        let mut first = true;
        for param in query.split('&') {
            if param.is_empty() || param == "delimiter" || param == "delimiter=" {
                continue;
            }
            out.push(if first { '?' } else { '&' });
            out.push_str(param);
            first = false;
        }
    }
    Ok(out)
}

/// `path_and_query` less any `encoding-type` parameter.
///
/// s3s-fs echoes `encoding-type=url` back as `<EncodingType>url</EncodingType>`
/// in a listing but leaves the keys unencoded, so a client that asked for it
/// (boto3 always does, minio-py too) URL-decodes raw keys: `a+b` comes back
/// as `a b`, `100%25` as `100%`. Without the parameter the store answers
/// with raw keys and no `EncodingType`, which clients take as they are.
/// Done for a remote store when [`RemoteOptions::drop_encoding_type`](super::RemoteOptions::drop_encoding_type) says
/// so (the embedded store encodes keys as asked).
pub(crate) fn without_encoding_type(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            let name = p.split_once('=').map_or(*p, |(n, _)| n);
            !name.eq_ignore_ascii_case("encoding-type")
        })
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}
