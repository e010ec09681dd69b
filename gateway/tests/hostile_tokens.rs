//! A request with two `x-amz-rdma-token` headers, both signed, against the
//! real gateway binary (embedded store, software RDMA): refused with 400
//! `InvalidRDMAToken` before any RDMA, whatever the tokens; authentication
//! still comes first.

use hipobj_testkit::{assert_error, gateway_with, S3};
use http::Method;
use std::path::Path;

const TOKEN: &str = hipobj_wire::headers::RDMA_TOKEN;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

#[test]
fn two_token_headers_are_refused() {
    let gw = gateway_with(bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("tokens");
    assert_eq!(
        s3.put_plain("/tokens/obj", b"data".to_vec())
            .status
            .as_u16(),
        200
    );
    for method in [Method::GET, Method::PUT, Method::HEAD] {
        let a = s3.send(
            method.clone(),
            "/tokens/obj",
            &[(TOKEN, "first-token"), (TOKEN, "second-token")],
            Vec::new(),
            true,
        );
        if method == Method::HEAD {
            // No body to carry the code.
            assert_eq!(a.status.as_u16(), 400, "{method}");
        } else {
            assert_error(&a, 400, "InvalidRDMAToken", None, &format!("{method}"));
            assert!(
                a.text().contains("more than one x-amz-rdma-token"),
                "{}",
                a.text()
            );
        }
    }
    // Empty values count as headers too.
    let a = s3.send(
        Method::GET,
        "/tokens/obj",
        &[(TOKEN, "t"), (TOKEN, "")],
        Vec::new(),
        true,
    );
    assert_error(&a, 400, "InvalidRDMAToken", None, "one empty");
    // Unauthenticated, the request is refused as such first.
    let a = s3.send_ext(
        Method::GET,
        "/tokens/obj",
        &[(TOKEN, "first-token"), (TOKEN, "second-token")],
        Vec::new(),
        true,
        "not-the-secret",
        &[],
    );
    assert_error(&a, 403, "SignatureDoesNotMatch", None, "wrong secret");
    // The object is untouched, and plain requests are served.
    let a = s3.get_plain("/tokens/obj");
    assert_eq!(a.status.as_u16(), 200);
    assert_eq!(&a.body[..], b"data");
}
