//! The HTTP plumbing under every operation: signed requests with small
//! bodies (retried by the policy), GETs opened for their body, and requests
//! whose body is streamed from a producer.

use std::time::Duration;

use bytes::Bytes;
use hipobj_wire::headers;
use http::header::HeaderMap;
use http::Method;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use sha2::Digest;

use super::{S3Client, SMALL_BODY_CAP};
use crate::http::{self as h, Answer, BoxError};
use crate::retry::{self, Verdict};
use crate::sign::EMPTY_SHA256;
use crate::Result;

/// The receiving end of a streamed request body.
pub(super) type BodyRx = tokio::sync::mpsc::Receiver<std::result::Result<Bytes, BoxError>>;

fn sha256_hex(b: &[u8]) -> String {
    if b.is_empty() {
        EMPTY_SHA256.to_string()
    } else {
        hex::encode(sha2::Sha256::digest(b))
    }
}

impl S3Client {
    /// Reads an answer's (small) body; the answer whatever its status.
    pub(super) async fn read_answer(&self, resp: http::Response<Incoming>) -> Result<Answer> {
        let (parts, mut b) = resp.into_parts();
        let body = h::read_capped(&mut b, SMALL_BODY_CAP, self.inner.cfg.timeouts.request).await?;
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// A signed request with a small body, retried on transport failures,
    /// timeouts and 5xx; the answer whatever its status.
    pub(super) async fn plain(
        &self,
        method: Method,
        path_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer> {
        let limit = self.inner.cfg.timeouts.for_bytes(body.len() as u64);
        self.plain_within(method, path_query, headers, body, limit)
            .await
            .0
    }

    /// [`S3Client::plain`] with `limit` for each attempt (for requests
    /// whose server work is out of proportion to their body, such as
    /// CompleteMultipartUpload); the answer and the attempts made.
    pub(super) async fn plain_within(
        &self,
        method: Method,
        path_query: &str,
        headers: &HeaderMap,
        body: Bytes,
        limit: Duration,
    ) -> (Result<Answer>, u32) {
        let hash = sha256_hex(&body);
        let hash = hash.as_str();
        let what = format!("{method} {path_query}");
        self.retry()
            .run(&what, |_| {
                let (method, body) = (method.clone(), body.clone());
                async move {
                    let len = body.len() as u64;
                    // Signed for the endpoint this attempt goes to (SigV4
                    // signs the Host).
                    let (ei, ep) = self.endpoint_now();
                    let req = ep.target(path_query).and_then(|target| {
                        h::signed(
                            &self.inner.signer,
                            method,
                            target,
                            headers.clone(),
                            h::full(body),
                            len,
                            hash,
                        )
                    });
                    let req = match req {
                        Ok(r) => r,
                        Err(e) => return Verdict::Done(Err(e)),
                    };
                    let r = async {
                        let resp = h::send(&self.inner.http, req, limit).await?;
                        self.read_answer(resp).await
                    }
                    .await;
                    self.inner.endpoints.note_answer(ei, &r);
                    retry::answer(r)
                }
            })
            .await
    }

    /// Sends a GET (one attempt); a successful answer's head and its body,
    /// or the S3 error; the index of the endpoint it went to (for
    /// [`Endpoints::note`](crate::endpoints::Endpoints::note) of a body
    /// broken off) with the body.
    pub(super) async fn open_get(
        &self,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<(Answer, Incoming, usize)> {
        let (ei, ep) = self.endpoint_now();
        let r = self.open_get_at(ep, path_query, hm).await;
        self.inner.endpoints.note(ei, &r);
        r.map(|(a, b)| (a, b, ei))
    }

    async fn open_get_at(
        &self,
        ep: &h::Endpoint,
        path_query: &str,
        hm: &HeaderMap,
    ) -> Result<(Answer, Incoming)> {
        let cfg = &self.inner.cfg;
        let target = ep.target(path_query)?;
        let req = h::signed(
            &self.inner.signer,
            Method::GET,
            target,
            hm.clone(),
            h::empty(),
            0,
            EMPTY_SHA256,
        )?;
        let resp = h::send(&self.inner.http, req, cfg.timeouts.request).await?;
        let (parts, mut body) = resp.into_parts();
        let mut a = Answer {
            status: parts.status,
            headers: parts.headers,
            body: Bytes::new(),
        };
        if !a.status.is_success() {
            a.body = h::read_capped(&mut body, SMALL_BODY_CAP, cfg.timeouts.request).await?;
            return Err(a.error(None));
        }
        Ok((a, body))
    }

    /// Sends a request (one attempt) whose body comes from `rx`, fed by
    /// `producer` concurrently; the answer whatever its status.
    pub(super) async fn send_streamed<P>(
        &self,
        method: Method,
        path_query: &str,
        hm: &HeaderMap,
        rx: BodyRx,
        len: u64,
        producer: P,
    ) -> Result<Answer>
    where
        P: std::future::Future<Output = Result<()>>,
    {
        let cfg = &self.inner.cfg;
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|c| (c.map(Frame::data), rx))
        });
        let body = BodyExt::boxed_unsync(StreamBody::new(stream));
        let (ei, ep) = self.endpoint_now();
        let target = ep.target(path_query)?;
        let req = h::signed(
            &self.inner.signer,
            method,
            target,
            hm.clone(),
            body,
            len,
            headers::UNSIGNED_PAYLOAD,
        )?;
        let limit = cfg.timeouts.for_bytes(len);
        let send = async {
            let resp = h::send(&self.inner.http, req, limit).await?;
            self.read_answer(resp).await
        };
        futures::pin_mut!(send);
        futures::pin_mut!(producer);
        let r = match futures::future::select(send, producer).await {
            futures::future::Either::Left((r, _)) => r,
            futures::future::Either::Right((p, send)) => match p {
                // The producer's failure is the caller's, not the
                // endpoint's.
                Err(e) => return Err(e),
                Ok(()) => send.await,
            },
        };
        self.inner.endpoints.note_answer(ei, &r);
        r
    }

    /// A streamed request (the body made afresh for each attempt by
    /// `producer(tx)`), retried as [`S3Client::plain`] is; the successful
    /// answer and the attempts made.
    pub(super) async fn streamed_with_retries<P, Fut>(
        &self,
        method: Method,
        path_query: &str,
        hm: &HeaderMap,
        len: u64,
        producer: P,
    ) -> Result<(Answer, u32)>
    where
        P: Fn(tokio::sync::mpsc::Sender<std::result::Result<Bytes, BoxError>>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let what = format!("{method} {path_query}");
        let producer = &producer;
        let (r, attempts) = self
            .retry()
            .run(&what, |_| {
                let method = method.clone();
                async move {
                    let (tx, rx) = tokio::sync::mpsc::channel(4);
                    retry::answer(
                        self.send_streamed(method, path_query, hm, rx, len, producer(tx))
                            .await,
                    )
                }
            })
            .await;
        Ok((r?.ok()?, attempts))
    }
}
