//! The one retry policy of every request the client makes
//! ([`hipobj_net::retry`], shared with the gateway): at most
//! [`ClientConfig::attempts`](crate::ClientConfig::attempts) attempts,
//! `100 ms × n` after the n-th ([`policy`]), and the client's rules of which
//! outcomes are worth another.
//!
//! Each caller says how one attempt ended ([`Verdict`]); the policy decides
//! whether to try again. The rules for the common cases are here:
//! [`answer`] (a request whose answer is read: transport failures, timeouts
//! and 5xx answers) and [`error`] (an [`Error::is_retryable`] failure).

use std::time::Duration;

use hipobj_net::retry::Backoff;
pub(crate) use hipobj_net::retry::{Retry, Verdict};

use crate::http::Answer;
use crate::{Error, Result};

/// The wait after the n-th failed attempt is `STEP × n`.
const STEP: Duration = Duration::from_millis(100);

/// At most `attempts` attempts (at least one), `100 ms × n` after the n-th.
pub(crate) fn policy(attempts: u32) -> Retry {
    Retry::new(attempts, Backoff::Linear(STEP))
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
        let (r, n) = policy(3)
            .run("t", |n| {
                calls.set(calls.get() + 1);
                async move { answer(ans(if n < 2 { 503 } else { 200 })) }
            })
            .await;
        assert_eq!((r.unwrap().status, n, calls.get()), (StatusCode::OK, 2, 2));
        let (r, n) = policy(3).run("t", |_| async { answer(ans(500)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (500, 3));
        let (r, n) = policy(3).run("t", |_| async { answer(ans(404)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (404, 1));
        let (r, n) = policy(0).run("t", |_| async { answer(ans(500)) }).await;
        assert_eq!((r.unwrap().status.as_u16(), n), (500, 1));
    }

    #[tokio::test]
    async fn errors_by_kind() {
        let (r, n) = policy(2)
            .run("t", |_| async {
                error::<()>(Err(Error::Timeout("slow".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::Timeout(_))));
        assert_eq!(n, 2);
        let (r, n) = policy(2)
            .run("t", |_| async {
                error::<()>(Err(Error::InvalidArgument("x".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
        assert_eq!(n, 1);
        let (r, n) = policy(2)
            .run("t", |_| async {
                answer(Err(Error::Transport("reset".into())))
            })
            .await;
        assert!(matches!(r, Err(Error::Transport(_))));
        assert_eq!(n, 2);
    }

    #[test]
    fn backoff_grows() {
        assert_eq!(policy(3).delay(1), Duration::from_millis(100));
        assert_eq!(policy(3).delay(3), Duration::from_millis(300));
    }
}
