//! The tenant rules: credentials-file lines, `buckets=` lists, and the
//! check of a request's path and copy source against a scope. No panic,
//! and a request granted names (decoded) only a bucket of the scope.
#![no_main]

use hipobj_gateway::credentials_file;
use hipobj_gateway::tenancy::{self, authorize::Access, BucketScope, Policy};
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else { return };
    let v = f::fields(rest, 4);
    let get = |i: usize| v.get(i).map_or("", String::as_str);
    let _ = credentials_file::parse(get(3), &[]);
    let _ = BucketScope::parse(get(2));
    let policy = Policy {
        buckets: BucketScope::parse("alpha,team-*").expect("a scope"),
        store: None,
    };
    let uri = format!("/{}", get(0));
    let mut headers: Vec<(&str, &[u8])> = Vec::new();
    if m & 0x80 != 0 {
        headers.push(("x-amz-copy-source", get(1).as_bytes()));
    }
    let Some(parts) = f::parts(f::method(m), &uri, &headers) else { return };
    if let Ok(Access::Granted) = tenancy::authorize(&policy, &parts) {
        let path = percent_encoding::percent_decode_str(parts.uri.path())
            .decode_utf8()
            .expect("a granted path decodes");
        let bucket = path.trim_start_matches('/').split('/').next().unwrap_or("");
        assert!(policy.buckets.allows(bucket), "granted {path:?}");
        assert!(!path.split('/').any(|s| s == ".."), "granted {path:?}");
    }
});
