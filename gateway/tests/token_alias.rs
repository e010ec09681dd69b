//! The token under a second header name (`--rdma-token-alias`, for Dell
//! ObjectScale's `x-rdma-info`) against the real gateway binary (embedded
//! store, software RDMA): served like `x-amz-rdma-token`, handshake
//! included; refused unsigned (403), beside the standard name or twice
//! (400); and an ordinary header where no alias is configured.

use hipobj_testkit::{assert_error, client, gateway_with, pattern, RdmaOps, S3};
use http::Method;
use std::path::Path;

const ALIAS: &str = "x-rdma-info";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

#[test]
fn a_token_under_its_second_name_is_served() {
    // Configured in any case; matched without regard to it.
    let gw = gateway_with(bin(), &["--rdma-token-alias", "X-RDMA-Info"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("alias");
    let data = pattern(21, 300_007);
    assert_eq!(s3.put_plain("/alias/obj", data.clone()).status, 200);

    let lib = client();
    let mut back = vec![0u8; data.len()];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/alias/obj").with_token_header(ALIAS);
        buf.get(0, data.len(), &mut ops).unwrap();
        let a = ops.last();
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.reply().as_deref(), Some("200"));
        assert_eq!(
            a.header("x-amz-rdma-bytes-transferred").as_deref(),
            Some("300007")
        );
    }
    assert!(back == data, "the GET under the alias is byte-exact");

    // And a PUT by RDMA READ under it.
    let up = pattern(22, 65_537);
    let mut src = up.clone();
    {
        let buf = lib.register_host(&mut src).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::PUT, "/alias/up").with_token_header(ALIAS);
        buf.put(0, up.len(), &mut ops).unwrap();
        assert_eq!(ops.last().status, 200, "{}", ops.last().text());
    }
    let a = s3.get_plain("/alias/up");
    assert_eq!(a.status, 200);
    assert!(
        a.body[..] == up[..],
        "the PUT under the alias stored the buffer"
    );
}

#[test]
fn the_second_name_follows_the_first_names_rules() {
    let gw = gateway_with(bin(), &["--rdma-token-alias", ALIAS], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("rules");
    assert_eq!(s3.put_plain("/rules/obj", b"data".to_vec()).status, 200);
    let lib = client();
    let token = lib.handshake_token().unwrap();

    // Added after signing: not covered by the signature.
    let secret = hipobj_testkit::SK;
    let a = s3.send_ext(
        Method::GET,
        "/rules/obj",
        &[],
        Vec::new(),
        true,
        secret,
        &[(ALIAS, &token)],
    );
    assert_error(&a, 403, "AccessDenied", Some("403"), "unsigned alias");
    assert!(a.text().contains("must be signed"), "{}", a.text());

    // Both names at once.
    let a = s3.send(
        Method::GET,
        "/rules/obj",
        &[(ALIAS, &token), (hipobj_wire::headers::RDMA_TOKEN, &token)],
        Vec::new(),
        true,
    );
    assert_error(&a, 400, "InvalidRDMAToken", Some("400"), "both names");

    // The alias twice.
    let a = s3.send(
        Method::GET,
        "/rules/obj",
        &[(ALIAS, &token), (ALIAS, &token)],
        Vec::new(),
        true,
    );
    assert_error(&a, 400, "InvalidRDMAToken", Some("400"), "alias twice");

    // Unauthenticated comes first.
    let a = s3.send_ext(
        Method::GET,
        "/rules/obj",
        &[(ALIAS, &token)],
        Vec::new(),
        true,
        "not-the-secret",
        &[],
    );
    assert_error(&a, 403, "SignatureDoesNotMatch", None, "wrong secret");
}

#[test]
fn without_the_setting_the_header_is_an_ordinary_one() {
    let gw = gateway_with(bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("plain");
    assert_eq!(s3.put_plain("/plain/obj", b"data".to_vec()).status, 200);
    let token = client().handshake_token().unwrap();
    let a = s3.send(
        Method::GET,
        "/plain/obj",
        &[(ALIAS, &token)],
        Vec::new(),
        true,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(&a.body[..], b"data");
    assert_eq!(a.reply(), None, "no RDMA without the setting");
}
