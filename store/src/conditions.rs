//! Conditional requests: If-Match, If-None-Match, If-Modified-Since and
//! If-Unmodified-Since on reads (304/412 as S3 answers), on copy sources
//! (412 only) and on writes (If-Match / If-None-Match: `*`).

use s3s::dto::{ETag, ETagCondition, Timestamp};
use s3s::{s3_error, S3Error};

use crate::meta::millis;

/// The read conditions of a request.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadConditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

/// What the conditions say about an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

fn matches(c: &ETagCondition, etag: &str, weak: bool) -> bool {
    match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(t) => {
            let ours = ETag::Strong(etag.to_owned());
            if weak {
                ours.weak_cmp(t)
            } else {
                ours.strong_cmp(t)
            }
        }
    }
}

/// The verdict for an object with `etag`, last modified at
/// `last_modified_ms`. HTTP dates have whole seconds, so times are
/// compared in seconds. If-Match overrides If-Unmodified-Since, and
/// If-None-Match overrides If-Modified-Since, as S3 documents.
pub fn evaluate(c: &ReadConditions<'_>, etag: &str, last_modified_ms: i64) -> Verdict {
    let lm = last_modified_ms.div_euclid(1000);
    let secs = |t: &Timestamp| millis(t).div_euclid(1000);
    if let Some(m) = c.if_match {
        if !matches(m, etag, false) {
            return Verdict::Failed;
        }
    } else if let Some(t) = c.if_unmodified_since {
        if lm > secs(t) {
            return Verdict::Failed;
        }
    }
    if let Some(m) = c.if_none_match {
        if matches(m, etag, true) {
            return Verdict::NotModified;
        }
    } else if let Some(t) = c.if_modified_since {
        if lm <= secs(t) {
            return Verdict::NotModified;
        }
    }
    Verdict::Proceed
}

/// The error for a verdict on a GET or HEAD.
pub fn read_error(v: Verdict) -> Option<S3Error> {
    match v {
        Verdict::Proceed => None,
        Verdict::NotModified => Some(s3_error!(NotModified)),
        Verdict::Failed => Some(s3_error!(
            PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold"
        )),
    }
}

/// The error for a verdict on a copy source: S3 answers 412 for all.
pub fn copy_error(v: Verdict) -> Option<S3Error> {
    match v {
        Verdict::Proceed => None,
        _ => Some(s3_error!(
            PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold"
        )),
    }
}

/// A conditional write (PutObject, CompleteMultipartUpload) against the
/// object now there (`current`: its ETag).
pub fn check_write(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    current: Option<&str>,
) -> Result<(), S3Error> {
    if let Some(m) = if_match {
        let Some(etag) = current else {
            return Err(s3_error!(NoSuchKey, "The specified key does not exist."));
        };
        if !matches(m, etag, false) {
            return Err(s3_error!(
                PreconditionFailed,
                "At least one of the pre-conditions you specified did not hold"
            ));
        }
    }
    if let Some(m) = if_none_match {
        if let Some(etag) = current {
            if matches(m, etag, true) {
                return Err(s3_error!(
                    PreconditionFailed,
                    "At least one of the pre-conditions you specified did not hold"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::timestamp;

    fn tag(s: &str) -> ETagCondition {
        ETagCondition::ETag(ETag::Strong(s.into()))
    }

    #[test]
    fn verdicts() {
        let lm = 1_700_000_000_500;
        let e = "abc";
        let t_before = timestamp(1_699_999_999_000);
        let t_same = timestamp(1_700_000_000_000);
        let v = |c: ReadConditions<'_>| evaluate(&c, e, lm);
        assert_eq!(v(ReadConditions::default()), Verdict::Proceed);
        assert_eq!(
            v(ReadConditions {
                if_match: Some(&tag("abc")),
                ..Default::default()
            }),
            Verdict::Proceed
        );
        assert_eq!(
            v(ReadConditions {
                if_match: Some(&tag("x")),
                ..Default::default()
            }),
            Verdict::Failed
        );
        assert_eq!(
            v(ReadConditions {
                if_none_match: Some(&tag("abc")),
                ..Default::default()
            }),
            Verdict::NotModified
        );
        assert_eq!(
            v(ReadConditions {
                if_none_match: Some(&ETagCondition::Any),
                ..Default::default()
            }),
            Verdict::NotModified
        );
        // Modified since a second before; not modified since its own second.
        assert_eq!(
            v(ReadConditions {
                if_modified_since: Some(&t_before),
                ..Default::default()
            }),
            Verdict::Proceed
        );
        assert_eq!(
            v(ReadConditions {
                if_modified_since: Some(&t_same),
                ..Default::default()
            }),
            Verdict::NotModified
        );
        assert_eq!(
            v(ReadConditions {
                if_unmodified_since: Some(&t_before),
                ..Default::default()
            }),
            Verdict::Failed
        );
        // If-Match that holds overrides If-Unmodified-Since that fails.
        assert_eq!(
            v(ReadConditions {
                if_match: Some(&tag("abc")),
                if_unmodified_since: Some(&t_before),
                ..Default::default()
            }),
            Verdict::Proceed
        );
        // If-None-Match that holds overrides If-Modified-Since.
        assert_eq!(
            v(ReadConditions {
                if_none_match: Some(&tag("zzz")),
                if_modified_since: Some(&t_same),
                ..Default::default()
            }),
            Verdict::Proceed
        );
    }

    #[test]
    fn writes() {
        assert!(check_write(None, Some(&ETagCondition::Any), None).is_ok());
        assert!(check_write(None, Some(&ETagCondition::Any), Some("a")).is_err());
        assert!(check_write(Some(&tag("a")), None, Some("a")).is_ok());
        assert!(check_write(Some(&tag("b")), None, Some("a")).is_err());
        let e = check_write(Some(&tag("a")), None, None).unwrap_err();
        assert_eq!(e.code().as_str(), "NoSuchKey");
    }
}
