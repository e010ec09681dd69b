//! A whole browser upload through the gateway's form handling: arbitrary
//! `multipart/form-data` bodies (fields, their bounds, the file part, the
//! spool) against a store that accepts anything. No panic, and no store
//! request for a form that is not signed.
#![no_main]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hipobj_gateway::body::Body;
use hipobj_gateway::plain::post_spool::{SpoolBudget, SpoolSettings};
use hipobj_gateway::upstream::{Payload, Upstream, UpstreamError};
use hipobj_gateway_fuzz as f;
use http::{Request, Response};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Default)]
struct Store(AtomicUsize);

impl Upstream for Store {
    fn send(
        &self,
        _req: Request<Body>,
        _payload: Payload,
    ) -> BoxFuture<'static, Result<Response<Body>, UpstreamError>> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Ok(Response::new(Body::empty())) })
    }

    fn describe(&self) -> String {
        "fuzz store".into()
    }
}

fuzz_target!(|data: &[u8]| {
    let boundary = "fuzzboundary";
    let Some(parts) = f::parts(
        "POST",
        "/bucket",
        &[("content-type", format!("multipart/form-data; boundary={boundary}").as_bytes())],
    ) else {
        return;
    };
    let store = Store::default();
    let spool = SpoolSettings {
        budget: SpoolBudget::new(8 << 20),
        dir: None,
        deadline: Duration::from_secs(5),
    };
    let body = Body::from(data.to_vec());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let _ = rt.block_on(hipobj_gateway::plain::post_object::serve(
        &store,
        &f::creds(),
        &f::settings(),
        &spool,
        "bucket",
        parts,
        body,
    ));
    // Random bytes carry no valid signature: nothing reaches the store.
    assert_eq!(store.0.load(Ordering::Relaxed), 0);
    let _ = Arc::new(());
});
