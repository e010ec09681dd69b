//! The retry policy of the gateway's requests to its store and of the S3
//! client's requests: how many attempts ([`Retry`]), how long to wait
//! between them ([`Backoff`]), and the loop that runs them
//! ([`Retry::run`]). Which outcomes are worth another attempt stays with
//! each caller: its attempt says so ([`Verdict`]), or a closure of its
//! rules does ([`Retry::run_while`]).

use std::future::Future;
use std::time::Duration;

/// The wait after a failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// `step × n` after the n-th failed attempt.
    Linear(Duration),
    /// The n-th entry after the n-th failed attempt, the last one repeating
    /// (none: no wait).
    Steps(Vec<Duration>),
}

impl Backoff {
    /// The wait after the `failed`-th failed attempt (from 1).
    pub fn delay(&self, failed: u32) -> Duration {
        match self {
            Backoff::Linear(step) => step.saturating_mul(failed),
            Backoff::Steps(steps) => Backoff::step(steps, failed),
        }
    }

    /// [`Backoff::Steps`]'s wait after the `failed`-th failed attempt, for
    /// a table the caller keeps: its entry `failed - 1`, the last one
    /// repeating; no wait for an empty table.
    pub fn step(steps: &[Duration], failed: u32) -> Duration {
        let i = (failed.saturating_sub(1) as usize).min(steps.len().saturating_sub(1));
        steps.get(i).copied().unwrap_or(Duration::ZERO)
    }
}

/// How an attempt ended, as the policy sees it.
#[derive(Debug)]
pub enum Verdict<T> {
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

/// At most `attempts` attempts (at least one), `backoff` apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    attempts: u32,
    backoff: Backoff,
}

impl Retry {
    /// At most `attempts` attempts (0 counts as 1), waiting `backoff`
    /// between them.
    pub fn new(attempts: u32, backoff: Backoff) -> Retry {
        Retry {
            attempts: attempts.max(1),
            backoff,
        }
    }

    /// The most attempts.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait after the `failed`-th failed attempt (from 1).
    pub fn delay(&self, failed: u32) -> Duration {
        self.backoff.delay(failed)
    }

    /// Runs `attempt(n)` for n = 1, 2, … until it is [`Verdict::Done`] or
    /// the attempts run out; the last result and the attempts made.
    /// `what` names the request in the logs.
    pub async fn run<T, F, Fut>(&self, what: &str, mut attempt: F) -> (T, u32)
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
                    tokio::time::sleep(self.delay(n)).await;
                }
            }
        }
    }

    /// [`Retry::run`] with the caller's rules apart: `again(&result)` is
    /// why the result is worth another attempt, `None` when it is final.
    pub async fn run_while<T, F, Fut, A>(&self, what: &str, mut attempt: F, again: A) -> (T, u32)
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = T>,
        A: Fn(&T) -> Option<String>,
    {
        let again = &again;
        self.run(what, |n| {
            let fut = attempt(n);
            async move {
                let result = fut.await;
                match again(&result) {
                    Some(why) => Verdict::Again { result, why },
                    None => Verdict::Done(result),
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn backoffs() {
        let linear = Backoff::Linear(Duration::from_millis(100));
        assert_eq!(linear.delay(1), Duration::from_millis(100));
        assert_eq!(linear.delay(3), Duration::from_millis(300));
        let steps = Backoff::Steps(vec![Duration::from_millis(50), Duration::from_millis(200)]);
        assert_eq!(steps.delay(1), Duration::from_millis(50));
        assert_eq!(steps.delay(2), Duration::from_millis(200));
        assert_eq!(steps.delay(6), Duration::from_millis(200));
        assert_eq!(Backoff::Steps(Vec::new()).delay(1), Duration::ZERO);
        assert_eq!(Backoff::step(&[], 0), Duration::ZERO);
    }

    #[tokio::test]
    async fn runs_until_done_or_out_of_attempts() {
        let retry = Retry::new(3, Backoff::Linear(Duration::from_millis(100)));
        let calls = Cell::new(0);
        let again = |r: &u16| (*r >= 500).then(|| format!("HTTP {r}"));
        let (r, n) = retry
            .run_while(
                "t",
                |n| {
                    calls.set(calls.get() + 1);
                    async move {
                        if n < 2 {
                            503
                        } else {
                            200
                        }
                    }
                },
                again,
            )
            .await;
        assert_eq!((r, n, calls.get()), (200, 2, 2));
        let (r, n) = retry.run_while("t", |_| async { 500 }, again).await;
        assert_eq!((r, n), (500, 3));
        let (r, n) = retry.run_while("t", |_| async { 404 }, again).await;
        assert_eq!((r, n), (404, 1));
        let once = Retry::new(0, Backoff::Steps(Vec::new()));
        assert_eq!(once.attempts(), 1);
        let (r, n) = once.run_while("t", |_| async { 500 }, again).await;
        assert_eq!((r, n), (500, 1));
        let (r, n) = retry
            .run("t", |n| async move {
                if n == 1 {
                    Verdict::Again {
                        result: "first",
                        why: "busy".into(),
                    }
                } else {
                    Verdict::Done("second")
                }
            })
            .await;
        assert_eq!((r, n), ("second", 2));
    }
}
