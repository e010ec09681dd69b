//! Several endpoints (gateways in front of one store): which one requests
//! go to now, which failures move them on, and which endpoints are cooling
//! down after one.
//!
//! Requests go to the current endpoint. An attempt that ends in a failure
//! of the endpoint itself ([`fails_over`]: no connection, a connection
//! reset or a transfer broken off, a timeout, or a 502/503/504 answer)
//! puts that endpoint in a cool-down and makes the next endpoint in the
//! list not cooling down the current one (round robin); the retry policy's
//! next attempt goes there. An endpoint whose cool-down is over is tried
//! again when the rotation comes back to it. With one endpoint nothing
//! changes: every attempt goes to it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::http::{Answer, Endpoint};
use crate::{Error, Result};

/// Whether a failure is the endpoint's (the next attempt goes to another):
/// transport failures (refused, reset, broken off), timeouts, and S3
/// errors 502, 503, 504.
pub(crate) fn fails_over(e: &Error) -> bool {
    match e {
        Error::Transport(_) | Error::Timeout(_) => true,
        Error::S3 { status, .. } => is_gateway_status(*status),
        Error::Library(e) => matches!(e.op, hipobj::OpError::RdmaError),
        _ => false,
    }
}

/// 502, 503 and 504: the gateway could not serve the request now.
pub(crate) fn is_gateway_status(status: u16) -> bool {
    matches!(status, 502..=504)
}

/// Whether the result of a request whose answer was read fails over.
pub(crate) fn answer_fails_over(r: &Result<Answer>) -> bool {
    match r {
        Ok(a) => is_gateway_status(a.status.as_u16()),
        Err(e) => fails_over(e),
    }
}

/// The endpoints of a client, the current one, and their cool-downs.
#[derive(Debug)]
pub(crate) struct Endpoints {
    list: Vec<Endpoint>,
    current: AtomicUsize,
    /// Until when each endpoint is avoided.
    cooling: Mutex<Vec<Option<Instant>>>,
    cooldown: Duration,
}

impl Endpoints {
    /// At least one endpoint.
    pub(crate) fn new(list: Vec<Endpoint>, cooldown: Duration) -> Result<Endpoints> {
        if list.is_empty() {
            return Err(Error::Config("no endpoint".into()));
        }
        let n = list.len();
        Ok(Endpoints {
            list,
            current: AtomicUsize::new(0),
            cooling: Mutex::new(vec![None; n]),
            cooldown,
        })
    }

    /// All of them, in their order.
    pub(crate) fn all(&self) -> &[Endpoint] {
        &self.list
    }

    /// The current endpoint (without moving on).
    pub(crate) fn current(&self) -> &Endpoint {
        &self.list[self.current.load(Ordering::Acquire) % self.list.len()]
    }

    /// The endpoint of the next attempt and its index: the current one,
    /// unless it is cooling down and another is not (which becomes the
    /// current one). When all are cooling down, the current one.
    pub(crate) fn pick(&self) -> (usize, &Endpoint) {
        let n = self.list.len();
        let cur = self.current.load(Ordering::Acquire) % n;
        if n == 1 {
            return (0, &self.list[0]);
        }
        let now = Instant::now();
        let mut cooling = self.cooling.lock().unwrap_or_else(|e| e.into_inner());
        for i in 0..n {
            let j = (cur + i) % n;
            match cooling[j] {
                Some(until) if until > now => continue,
                Some(_) => cooling[j] = None,
                None => {}
            }
            if j != cur {
                self.current.store(j, Ordering::Release);
                tracing::info!(endpoint = %self.list[j].base, "moving on to the next endpoint");
            }
            return (j, &self.list[j]);
        }
        (cur, &self.list[cur])
    }

    /// The endpoint `idx` failed an attempt (`why`): it cools down, and if
    /// it is the current one the next (round robin, one not cooling down
    /// when there is one) becomes current. Nothing with one endpoint.
    pub(crate) fn failed(&self, idx: usize, why: &dyn std::fmt::Display) {
        let n = self.list.len();
        if n == 1 || idx >= n {
            return;
        }
        let now = Instant::now();
        let mut cooling = self.cooling.lock().unwrap_or_else(|e| e.into_inner());
        cooling[idx] = Some(now + self.cooldown);
        tracing::warn!(
            endpoint = %self.list[idx].base,
            cooldown_ms = self.cooldown.as_millis() as u64,
            "endpoint failed, avoided for a while: {why}"
        );
        if self.current.load(Ordering::Acquire) % n != idx {
            // Another attempt moved on already.
            return;
        }
        let next = (1..n)
            .map(|i| (idx + i) % n)
            .find(|&j| cooling[j].is_none_or(|until| until <= now))
            .unwrap_or((idx + 1) % n);
        self.current.store(next, Ordering::Release);
    }

    /// Notes the end of an attempt at `idx`: a failure that
    /// [`fails_over`] makes it fail.
    pub(crate) fn note<T>(&self, idx: usize, r: &Result<T>) {
        if let Err(e) = r {
            if fails_over(e) {
                self.failed(idx, e);
            }
        }
    }

    /// Notes the end of an attempt whose answer was read.
    pub(crate) fn note_answer(&self, idx: usize, r: &Result<Answer>) {
        if answer_fails_over(r) {
            match r {
                Ok(a) => self.failed(idx, &format!("HTTP {}", a.status.as_u16())),
                Err(e) => self.failed(idx, e),
            }
        }
    }
}

/// The endpoints of a comma-separated list (blanks around each ignored,
/// empty entries an error), each parsed: what
/// [`ClientConfig::endpoint`](crate::ClientConfig::endpoint) holds.
pub(crate) fn parse_list(s: &str) -> Result<Vec<Endpoint>> {
    split(s)
        .map_err(Error::Config)?
        .iter()
        .map(|e| Endpoint::parse(e))
        .collect()
}

/// The entries of a comma-separated list of endpoints, trimmed; an empty
/// entry (`a,,b`, a trailing comma) or an empty list is an error.
pub(crate) fn split(s: &str) -> std::result::Result<Vec<String>, String> {
    let v: Vec<String> = s.split(',').map(|e| e.trim().to_string()).collect();
    if v.iter().any(String::is_empty) {
        return Err(format!(
            "endpoint list {s:?} has an empty entry (endpoints are separated by single commas)"
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eps(n: usize, cooldown: Duration) -> Endpoints {
        let list = (0..n)
            .map(|i| Endpoint::parse(&format!("http://127.0.0.1:{}", 9000 + i)).unwrap())
            .collect();
        Endpoints::new(list, cooldown).unwrap()
    }

    #[test]
    fn lists_parse_and_are_checked() {
        let v = parse_list(" http://a:1 ,http://b").unwrap();
        let bases: Vec<&str> = v.iter().map(|e| e.base.as_str()).collect();
        assert_eq!(bases, ["http://a:1", "http://b:80"]);
        assert_eq!(parse_list("http://a:1").unwrap().len(), 1);
        assert!(matches!(parse_list("http://a:1,"), Err(Error::Config(_))));
        assert!(matches!(parse_list(""), Err(Error::Config(_))));
        assert!(matches!(
            parse_list("http://a:1,,http://b:2"),
            Err(Error::Config(_))
        ));
        // Each entry is validated.
        let e = parse_list("http://a:1,https://b:2").unwrap_err();
        assert!(e.to_string().contains("https"), "{e}");
        assert!(parse_list("http://a:1,b:2").is_err());
        assert!(Endpoints::new(Vec::new(), Duration::from_secs(1)).is_err());
    }

    #[test]
    fn one_endpoint_never_moves() {
        let e = eps(1, Duration::from_secs(60));
        e.failed(0, &"reset");
        assert_eq!(e.pick().0, 0);
        assert_eq!(e.current().base, "http://127.0.0.1:9000");
    }

    #[test]
    fn rotation_round_robin_and_cool_down() {
        let e = eps(3, Duration::from_secs(60));
        assert_eq!(e.pick().0, 0);
        assert_eq!(e.pick().0, 0, "sticky while it works");
        e.failed(0, &"connection refused");
        assert_eq!(e.pick().0, 1);
        // A second failure of 0 (a parallel part) does not move on again.
        e.failed(0, &"connection reset");
        assert_eq!(e.pick().0, 1);
        e.failed(1, &"HTTP 502");
        // 0 is cooling down: 2, not 0.
        assert_eq!(e.pick().0, 2);
        assert_eq!(e.current().base, "http://127.0.0.1:9002");
        e.failed(2, &"timeout");
        // All cooling down: the next in turn all the same.
        let (i, _) = e.pick();
        assert_eq!(i, 0);
    }

    #[test]
    fn a_cooled_down_endpoint_is_tried_again() {
        let e = eps(2, Duration::from_millis(50));
        e.failed(0, &"reset");
        assert_eq!(e.pick().0, 1);
        std::thread::sleep(Duration::from_millis(80));
        // Current stays where it works...
        assert_eq!(e.pick().0, 1);
        // ... and comes back to 0 when 1 fails, 0's cool-down being over.
        e.failed(1, &"reset");
        assert_eq!(e.pick().0, 0);
        // A current endpoint found cooling at pick time is skipped.
        let e = eps(2, Duration::from_secs(60));
        e.failed(1, &"reset"); // not current: only cools down
        assert_eq!(e.pick().0, 0);
        e.failed(0, &"reset");
        // Both cooling: the next in turn.
        assert_eq!(e.pick().0, 1);
    }

    #[test]
    fn which_failures_fail_over() {
        assert!(fails_over(&Error::Transport("reset".into())));
        assert!(fails_over(&Error::Timeout("slow".into())));
        let s3 = |status| Error::S3 {
            status,
            code: "X".into(),
            message: String::new(),
            request_id: None,
            reply: None,
        };
        for s in [502, 503, 504] {
            assert!(fails_over(&s3(s)), "{s}");
        }
        for s in [500, 501, 403, 404, 421] {
            assert!(!fails_over(&s3(s)), "{s}");
        }
        assert!(!fails_over(&Error::InvalidArgument("x".into())));
    }
}
