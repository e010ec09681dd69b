//! The one retry policy of every request the client makes: at most
//! [`ClientConfig::attempts`](crate::ClientConfig::attempts) attempts,
//! `100 ms × n` after the n-th, and which outcomes are worth another.
//!
//! Each caller says how one attempt ended ([`Verdict`]); the policy decides
//! whether to try again. The rules for the common cases are here too:
//! [`answer`] (a request whose answer is read: transport failures, timeouts
//! and 5xx answers) and [`error`] (an [`Error::is_retryable`] failure).

use std::future::Future;
use std::time::Duration;

use crate::http::Answer;
use crate::{Error, Result};

/// How an attempt ended, as the policy sees it.
#[derive(Debug)]
pub(crate) enum Verdict<T> {
    /// Final, whatever attempts are left.
    Done(T),
    /// Worth another attempt while one is left (`why` is logged); `result`
    /// is what the caller gets when none is.
    Again {
        /// The result if this was the last attempt.
        result: T,
        /// Why another attempt may do better.
        why: String,
    },
}

/// At most `attempts` attempts (at least one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retry {
    attempts: u32,
}

impl Retry {
    pub(crate) fn new(attempts: u32) -> Retry {
        Retry {
            attempts: attempts.max(1),
        }
    }

    /// The pause after the `attempt`-th attempt failed.
    pub(crate) fn backoff(attempt: u32) -> Duration {
        Duration::from_millis(100 * u64::from(attempt))
    }

    /// Runs `attempt(n)` for n = 1, 2, … until it is [`Verdict::Done`] or
    /// the attempts run out; the last result and the attempts made.
    /// `what` names the request in the logs.
    pub(crate) async fn run<T, F, Fut>(self, what: &str, mut attempt: F) -> (T, u32)
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Verdict<T>>,
    {
        let mut n = 0;
        loop {
            n += 1;
            match attempt(n).await {
                Verdict::Done(result) => return (result, n),
                Verdict::Again { result, .. } if n >= self.attempts => return (result, n),
                Verdict::Again { why, .. } => {
                    tracing::debug!(attempt = n, "{what} failed, retrying: {why}");
                    tokio::time::sleep(Self::backoff(n)).await;
                }
            }
        }
    }
}

/// A request whose answer was read: tried again after a retryable failure
/// (transport, timeout) or a 5xx answer.
pub(crate) fn answer(r: Result<Answer>) -> Verdict<Result<Answer>> {
    let why = match &r {
        Ok(a) if a.status.is_server_error() => format!("HTTP {}", a.status.as_u16()),
        Ok(_) => return Verdict::Done(r),
        Err(e) if e.is_retryable() => e.to_string(),
        Err(_) => return Verdict::Done(r),
    };
    Verdict::Again { result: r, why }
}

/// Tried again after an [`Error::is_retryable`] failure.
pub(crate) fn error<T>(r: Result<T>) -> Verdict<Result<T>> {
    match r {
        Err(e) if e.is_retryable() => {
            let why = e.to_string();
            Verdict::Again {
                result: Err::<T, Error>(e),
                why,
            }
        }
        r => Verdict::Done(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};
    use std::cell::Cell;

    fn ans(status: u16) -> Result<Answer> {
        Ok(Answer {
            status: StatusCode::from_u16(status).unwrap(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
        })
    }

    #[tokio::test]
    async fn retries_until_done_or_out_of_attempts() {
        let calls = Cell::new(0);
        let (r, n) = Retry::new(3)
            .run("t", |n| {
                calls.set(calls.get() + 1);
                async move { answer(ans(if n < 2 { 503 } else { 200 })) }
            })
            .await;
        assert_eq!((r.unwrap().status, n, calls.get()), (StatusCode::OK, 2, 2));
        let (r, n) = Retry::new(3).run("t", |_| async { answer(ans(500)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (500, 3));
        let (r, n) = Retry::new(3).run("t", |_| async { answer(ans(404)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (404, 1));
        let (r, n) = Retry::new(0).run("t", |_| async { answer(ans(500)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (500, 1));
    }

    #[tokio::test]
    async fn errors_by_kind() {
        let (r, n) = Retry::new(2)
            .run("t", |_| async {
                error::<()>(Err(Error::Timeout("slow".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::Timeout(_))));
        assert_eq!(n, 2);
        let (r, n) = Retry::new(2)
            .run("t", |_| async {
                error::<()>(Err(Error::InvalidArgument("x".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
        assert_eq!(n, 1);
        let (r, n) = Retry::new(2)
            .run("t", |_| async {
                answer(Err(Error::Transport("reset".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::Transport(_))));
        assert_eq!(n, 2);
    }

    #[test]
    fn backoff_grows() {
        assert_eq!(Retry::backoff(1), Duration::from_millis(100));
        assert_eq!(Retry::backoff(3), Duration::from_millis(300));
    }
}
