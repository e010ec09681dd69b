//! Listings over a bucket's index: prefix, delimiter, a resume point
//! (marker, start-after or continuation token) and a page size, in UTF-8
//! byte order as S3 lists. Also the `encoding-type=url` form of keys.

use std::collections::BTreeMap;
use std::ops::Bound;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a page asks for.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// Only keys starting with this.
    pub prefix: &'a str,
    /// Keys with this after the prefix roll up into common prefixes
    /// (`None` or empty: no rollup).
    pub delimiter: Option<&'a str>,
    /// Only entries after this (exclusive).
    pub after: Option<&'a str>,
    /// At most this many entries (keys and common prefixes together).
    pub max: usize,
}

/// One page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The keys listed, with their values, in order.
    pub entries: Vec<(String, T)>,
    /// The common prefixes, in order.
    pub prefixes: Vec<String>,
    /// Whether more entries follow.
    pub truncated: bool,
    /// The last key or prefix on this page, when truncated: where the
    /// next page starts after.
    pub next_after: Option<String>,
}

/// The page of `index` that `q` asks for.
pub fn page<T: Clone>(index: &BTreeMap<String, T>, q: &Query<'_>) -> Page<T> {
    let delimiter = q.delimiter.filter(|d| !d.is_empty());
    let start = match q.after {
        Some(after) if after >= q.prefix => Bound::Excluded(after),
        _ => Bound::Included(q.prefix),
    };
    let mut out = Page {
        entries: Vec::new(),
        prefixes: Vec::new(),
        truncated: false,
        next_after: None,
    };
    if q.max == 0 {
        return out;
    }
    let mut count = 0usize;
    let mut last: Option<String> = None;
    for (key, value) in index.range::<str, _>((start, Bound::Unbounded)) {
        if !key.starts_with(q.prefix) {
            break;
        }
        let rolled = delimiter.and_then(|d| {
            let rest = &key[q.prefix.len()..];
            rest.find(d).map(|at| &key[..q.prefix.len() + at + d.len()])
        });
        if let Some(cp) = rolled {
            if out.prefixes.last().is_some_and(|p| p == cp) {
                continue;
            }
            if q.after.is_some_and(|a| cp <= a) {
                // The resume point is inside this common prefix: it was
                // listed on an earlier page.
                continue;
            }
            if count == q.max {
                out.truncated = true;
                break;
            }
            out.prefixes.push(cp.to_owned());
            last = Some(cp.to_owned());
        } else {
            if count == q.max {
                out.truncated = true;
                break;
            }
            out.entries.push((key.clone(), value.clone()));
            last = Some(key.clone());
        }
        count += 1;
    }
    if out.truncated {
        out.next_after = last;
    }
    out
}

/// What `encoding-type=url` leaves alone: unreserved characters and `/`.
/// Everything else (`+` and space included) is percent-encoded, so clients
/// that decode with `unquote_plus` (boto3, minio-py) get the key back.
const URL_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `s` as a listing with `encoding-type=url` carries it.
pub fn url_encode(s: &str) -> String {
    utf8_percent_encode(s, URL_ENCODE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(keys: &[&str]) -> BTreeMap<String, ()> {
        keys.iter().map(|k| (k.to_string(), ())).collect()
    }

    fn keys(p: &Page<()>) -> Vec<&str> {
        p.entries.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn prefix_and_delimiter() {
        let ix = index(&["a", "b/1", "b/2", "b/c/3", "c", "d/"]);
        let p = page(
            &ix,
            &Query {
                prefix: "",
                delimiter: Some("/"),
                after: None,
                max: 1000,
            },
        );
        assert_eq!(keys(&p), ["a", "c"]);
        assert_eq!(p.prefixes, ["b/", "d/"]);
        assert!(!p.truncated);
        let p = page(
            &ix,
            &Query {
                prefix: "b/",
                delimiter: Some("/"),
                after: None,
                max: 1000,
            },
        );
        assert_eq!(keys(&p), ["b/1", "b/2"]);
        assert_eq!(p.prefixes, ["b/c/"]);
    }

    #[test]
    fn pages_resume_after_the_last_entry_or_prefix() {
        let ix = index(&["a", "b/1", "b/2", "c", "d"]);
        let q = |after| Query {
            prefix: "",
            delimiter: Some("/"),
            after,
            max: 2,
        };
        let p1 = page(&ix, &q(None));
        assert_eq!(keys(&p1), ["a"]);
        assert_eq!(p1.prefixes, ["b/"]);
        assert!(p1.truncated);
        assert_eq!(p1.next_after.as_deref(), Some("b/"));
        let p2 = page(&ix, &q(p1.next_after.as_deref()));
        assert_eq!(keys(&p2), ["c", "d"]);
        assert!(p2.prefixes.is_empty());
        assert!(!p2.truncated);
        assert_eq!(p2.next_after, None);
    }

    #[test]
    fn order_is_utf8_bytes() {
        let ix = index(&["\u{e9}", "z", "Z", "\u{1F600}", "a"]);
        let p = page(
            &ix,
            &Query {
                prefix: "",
                delimiter: None,
                after: Some("Z"),
                max: 10,
            },
        );
        assert_eq!(keys(&p), ["a", "z", "\u{e9}", "\u{1F600}"]);
    }

    #[test]
    fn zero_max_lists_nothing() {
        let ix = index(&["a"]);
        let p = page(
            &ix,
            &Query {
                prefix: "",
                delimiter: None,
                after: None,
                max: 0,
            },
        );
        assert!(p.entries.is_empty());
        assert!(!p.truncated);
    }

    #[test]
    fn url_encoding() {
        assert_eq!(url_encode("a b+c/%\u{e9}~"), "a%20b%2Bc/%25%C3%A9~");
    }
}
