//! What a check found, how it is printed (one line per check, or one JSON
//! document), and the comparisons the checks share: an answer against what
//! the rule expects, bytes against bytes.

use hipobj_s3::RawAnswer;
use hipobj_wire::{headers, Reply};
use serde::Serialize;

/// A check that did not fail: PASS, or SKIP with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server followed the rule; a short note of what was seen.
    Pass(String),
    /// The check could not run, or the server declined as it may.
    Skip(String),
}

/// A check's result: `Err` is a FAIL.
pub type CheckResult = Result<Outcome, Failure>;

/// What was seen of an answer: status, S3 error code, `x-amz-rdma-reply`,
/// bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Observed {
    /// The HTTP status.
    pub status: Option<u16>,
    /// The S3 error code of the XML body.
    pub code: Option<String>,
    /// `x-amz-rdma-reply`, as sent.
    pub reply: Option<String>,
    /// The bytes: `x-amz-rdma-bytes-transferred`, or what a comparison found.
    pub bytes: Option<String>,
}

impl Observed {
    /// What `a` shows.
    pub fn of(a: &RawAnswer) -> Observed {
        Observed {
            status: Some(a.status),
            code: a.code(),
            reply: a.reply(),
            bytes: a
                .header(headers::RDMA_BYTES_TRANSFERRED)
                .map(|n| format!("x-amz-rdma-bytes-transferred {n}")),
        }
    }

    /// Only a note on the bytes.
    pub fn bytes(note: impl Into<String>) -> Observed {
        Observed {
            bytes: Some(note.into()),
            ..Observed::default()
        }
    }
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = self.status {
            parts.push(format!("status {s}"));
        }
        if self.status.is_some() || self.code.is_some() {
            parts.push(format!("code {}", self.code.as_deref().unwrap_or("-")));
        }
        if self.status.is_some() || self.reply.is_some() {
            parts.push(format!(
                "x-amz-rdma-reply {}",
                self.reply
                    .as_deref()
                    .map_or("(none)".to_string(), |r| format!("{r:?}"))
            ));
        }
        if let Some(b) = &self.bytes {
            parts.push(b.clone());
        }
        if parts.is_empty() {
            parts.push("nothing".into());
        }
        f.write_str(&parts.join(", "))
    }
}

/// A FAIL: what the rule expects and what came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The step that failed.
    pub step: String,
    /// What the rule expects.
    pub expected: String,
    /// What came (boxed: results stay small).
    pub got: Box<Observed>,
}

impl Failure {
    /// A failure of `step`.
    pub fn new(step: impl Into<String>, expected: impl Into<String>, got: Observed) -> Failure {
        Failure {
            step: step.into(),
            expected: expected.into(),
            got: Box::new(got),
        }
    }

    /// A step that could not be carried out at all (a request without an
    /// answer, a setup request refused).
    pub fn error(step: impl Into<String>, e: impl std::fmt::Display) -> Failure {
        Failure::new(step, "success", Observed::bytes(format!("error: {e}")))
    }
}

/// What the reply header must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyRule {
    /// Present, strictly parsed, and with this status (`ok` counts as 200).
    Status(u16),
    /// Absent, or present with the answer's status.
    AbsentOrStatus,
}

/// The answer a rule expects.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// The HTTP status.
    pub status: u16,
    /// The S3 error code, for errors.
    pub code: Option<&'a str>,
    /// The reply header.
    pub reply: ReplyRule,
}

impl Expect<'_> {
    /// A success with reply `status`.
    pub fn ok(status: u16) -> Expect<'static> {
        Expect {
            status,
            code: None,
            reply: ReplyRule::Status(status),
        }
    }
}

impl std::fmt::Display for Expect<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "status {}", self.status)?;
        if let Some(c) = self.code {
            write!(f, ", code {c}")?;
        }
        match self.reply {
            ReplyRule::Status(s) => write!(f, ", x-amz-rdma-reply \"{s}\""),
            ReplyRule::AbsentOrStatus => write!(f, ", x-amz-rdma-reply absent or {}", self.status),
        }
    }
}

/// The status a reply value stands for, parsed strictly; `Err` says why it
/// is not one.
pub fn reply_status(value: &str) -> Result<Option<u16>, String> {
    Reply::parse(value.as_bytes())
        .map(|r| r.status())
        .map_err(|e| format!("{value:?} is outside the grammar: {e}"))
}

/// `a` against `want`, in `step`.
pub fn expect(step: &str, a: &RawAnswer, want: Expect<'_>) -> Result<(), Failure> {
    let fail = |why: &str| {
        let mut got = Observed::of(a);
        if !why.is_empty() {
            let b = got.bytes.take().map_or(String::new(), |b| format!("{b}; "));
            got.bytes = Some(format!("{b}{why}"));
        }
        Err(Failure::new(step, want.to_string(), got))
    };
    if a.status != want.status {
        return fail("");
    }
    if let Some(code) = want.code {
        if a.code().as_deref() != Some(code) {
            return fail("");
        }
    }
    let replies = a.all(headers::RDMA_REPLY);
    if replies.len() > 1 {
        return fail("x-amz-rdma-reply sent more than once");
    }
    match (want.reply, replies.first()) {
        (ReplyRule::AbsentOrStatus, None) => Ok(()),
        (ReplyRule::Status(_), None) => fail("no x-amz-rdma-reply"),
        (ReplyRule::Status(s), Some(v)) => match reply_status(v) {
            Err(why) => fail(&why),
            Ok(st) if st == Some(s) => Ok(()),
            Ok(_) => fail(""),
        },
        (ReplyRule::AbsentOrStatus, Some(v)) => match reply_status(v) {
            Err(why) => fail(&why),
            Ok(st) if st == Some(a.status) => Ok(()),
            Ok(_) => fail(""),
        },
    }
}

/// `x-amz-rdma-bytes-transferred` of `a` (NooBaa's `x-amz-rdma-bytes`
/// accepted) equals `n`.
pub fn expect_transferred(step: &str, a: &RawAnswer, n: u64) -> Result<(), Failure> {
    let v = a
        .header(headers::RDMA_BYTES_TRANSFERRED)
        .or_else(|| a.header(headers::NOOBAA_RDMA_BYTES));
    if v.as_deref().map(str::trim) == Some(n.to_string().as_str()) {
        return Ok(());
    }
    let mut got = Observed::of(a);
    got.bytes = Some(match v {
        Some(v) => format!("x-amz-rdma-bytes-transferred {v}"),
        None => "no x-amz-rdma-bytes-transferred".into(),
    });
    Err(Failure::new(
        step,
        format!("x-amz-rdma-bytes-transferred {n}"),
        got,
    ))
}

/// `got` equals `want`, byte for byte.
pub fn expect_bytes(step: &str, got: &[u8], want: &[u8]) -> Result<(), Failure> {
    if got == want {
        return Ok(());
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let note = match (got.get(at), want.get(at)) {
        (Some(g), Some(w)) => format!(
            "{} bytes, first difference at offset {at}: {g:#04x} where {w:#04x} is due",
            got.len()
        ),
        _ => format!("{} bytes where {} are due", got.len(), want.len()),
    };
    Err(Failure::new(
        step,
        format!("{} bytes equal to the reference", want.len()),
        Observed::bytes(note),
    ))
}

/// A check's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// Its id.
    pub id: &'static str,
    /// The rule it tests.
    pub rule: &'static str,
    /// PASS, FAIL or SKIP.
    pub result: &'static str,
    /// The PASS or SKIP note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a FAIL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

impl Line {
    /// The line of a check's result.
    pub fn new(id: &'static str, rule: &'static str, r: CheckResult) -> Line {
        let (result, note, failure) = match r {
            Ok(Outcome::Pass(n)) => ("PASS", Some(n), None),
            Ok(Outcome::Skip(n)) => ("SKIP", Some(n), None),
            Err(f) => ("FAIL", None, Some(f)),
        };
        Line {
            id,
            rule,
            result,
            note,
            failure,
        }
    }

    /// The text form: `ID RESULT note`, and for a FAIL the step, the
    /// expectation and what came, and the rule.
    pub fn text(&self) -> String {
        match &self.failure {
            None => format!(
                "{:<34} {}  {}",
                self.id,
                self.result,
                self.note.as_deref().unwrap_or("")
            ),
            Some(f) => format!(
                "{:<34} FAIL  {}\n    expected: {}\n    got:      {}\n    rule:     {}",
                self.id, f.step, f.expected, f.got, self.rule
            ),
        }
    }
}

/// The JSON document of a run.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The server.
    pub endpoint: &'a str,
    /// The bucket used.
    pub bucket: &'a str,
    /// Every check, in order.
    pub checks: &'a [Line],
    /// Counts.
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn answer(status: u16, reply: Option<&str>, body: &str) -> RawAnswer {
        let mut headers = HeaderMap::new();
        if let Some(r) = reply {
            headers.insert(headers::RDMA_REPLY, r.parse().unwrap());
        }
        RawAnswer {
            status,
            headers,
            body: bytes::Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn answers_against_rules() {
        let ok = answer(206, Some("206"), "");
        assert!(expect("s", &ok, Expect::ok(206)).is_ok());
        let f = expect("s", &answer(200, Some("200"), ""), Expect::ok(206)).unwrap_err();
        assert_eq!(f.expected, "status 206, x-amz-rdma-reply \"206\"");
        assert_eq!(f.got.status, Some(200));
        assert_eq!(
            f.got.to_string(),
            "status 200, code -, x-amz-rdma-reply \"200\""
        );
        let f = expect("s", &answer(206, Some("206:x"), ""), Expect::ok(206)).unwrap_err();
        assert!(f.got.bytes.unwrap().contains("outside the grammar"));
        let f = expect("s", &answer(206, None, ""), Expect::ok(206)).unwrap_err();
        assert_eq!(f.got.bytes.as_deref(), Some("no x-amz-rdma-reply"));
        let err = answer(400, None, "<Error><Code>InvalidRDMAToken</Code></Error>");
        let want = Expect {
            status: 400,
            code: Some("InvalidRDMAToken"),
            reply: ReplyRule::AbsentOrStatus,
        };
        assert!(expect("s", &err, want).is_ok());
        let bad = answer(
            400,
            Some("500"),
            "<Error><Code>InvalidRDMAToken</Code></Error>",
        );
        assert!(expect("s", &bad, want).is_err());
        assert!(expect("s", &answer(200, Some("ok"), ""), Expect::ok(200)).is_ok());
    }

    #[test]
    fn bytes_name_the_first_difference() {
        assert!(expect_bytes("s", b"abc", b"abc").is_ok());
        let f = expect_bytes("s", b"abd", b"abc").unwrap_err();
        assert_eq!(
            f.got.bytes.as_deref(),
            Some("3 bytes, first difference at offset 2: 0x64 where 0x63 is due")
        );
        let f = expect_bytes("s", b"ab", b"abc").unwrap_err();
        assert_eq!(f.got.bytes.as_deref(), Some("2 bytes where 3 are due"));
    }
}
