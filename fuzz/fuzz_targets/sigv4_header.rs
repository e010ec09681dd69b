//! SigV4 header authentication (`Authorization: AWS4-HMAC-SHA256 ...`)
//! and the canonical request, on arbitrary header values and paths: no
//! panic, and nothing forged verifies.
#![no_main]

use hipobj_gateway::auth;
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else { return };
    let v = f::fields(rest, 6);
    let get = |i: usize| v.get(i).map_or("", String::as_str);
    let uri = format!("/{}", get(0));
    let headers: [(&str, &[u8]); 5] = [
        ("host", b"127.0.0.1:9000"),
        ("authorization", get(1).as_bytes()),
        ("x-amz-date", get(2).as_bytes()),
        ("x-amz-content-sha256", get(3).as_bytes()),
        ("x-amz-meta-a", get(4).as_bytes()),
    ];
    let Some(parts) = f::parts(f::method(m), &uri, &headers) else { return };
    if let Ok(v) = auth::verify(&parts, &f::creds(), &f::settings(), f::now()) {
        panic!("a forged request verified: {v:?}");
    }
});
