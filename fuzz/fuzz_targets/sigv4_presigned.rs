//! SigV4 presigned URLs (`X-Amz-Algorithm`, `X-Amz-Credential`, ...):
//! arbitrary queries and paths, no panic, nothing forged verifies.
#![no_main]

use hipobj_gateway::auth;
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else { return };
    let v = f::fields(rest, 2);
    let path = v.first().map_or("", String::as_str);
    let query = v.get(1).map_or("", String::as_str);
    let uri = format!("/{path}?X-Amz-Algorithm=AWS4-HMAC-SHA256&{query}");
    let Some(parts) = f::parts(f::method(m), &uri, &[("host", b"127.0.0.1:9000")]) else {
        return;
    };
    if let Ok(v) = auth::verify(&parts, &f::creds(), &f::settings(), f::now()) {
        panic!("a forged URL verified: {v:?}");
    }
});
