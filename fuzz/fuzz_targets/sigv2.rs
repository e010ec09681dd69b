//! Signature Version 2, header (`Authorization: AWS key:sig`) and query
//! (`AWSAccessKeyId`, `Signature`, `Expires`), addressed path-style or
//! virtual-hosted: no panic, nothing forged verifies.
#![no_main]

use hipobj_gateway::auth;
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else { return };
    let v = f::fields(rest, 5);
    let get = |i: usize| v.get(i).map_or("", String::as_str);
    let query = m & 0x80 != 0;
    let uri = if query {
        format!("/{}?AWSAccessKeyId={}&{}", get(0), f::AK, get(1))
    } else {
        format!("/{}?{}", get(0), get(1))
    };
    let auth_value = format!("AWS {}", get(2));
    let mut headers: Vec<(&str, &[u8])> = vec![
        ("host", b"bucket.s3.example.test"),
        ("date", get(3).as_bytes()),
        ("x-amz-meta-a", get(4).as_bytes()),
    ];
    if !query {
        headers.push(("authorization", auth_value.as_bytes()));
    }
    let Some(parts) = f::parts(f::method(m), &uri, &headers) else { return };
    // The path-style path the engine would pass for a virtual host.
    let path_style = format!("/bucket{}", parts.uri.path());
    for p in [parts.uri.path(), path_style.as_str()] {
        if let Ok(v) = auth::verify_addressed(&parts, p, &f::creds(), &f::settings(), f::now()) {
            panic!("a forged SigV2 request verified: {v:?}");
        }
    }
});
