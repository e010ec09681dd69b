//! ListBuckets' answer narrowed to a scope, on arbitrary documents: no
//! panic, and the narrowed document narrows to itself (nothing out of the
//! scope is left in it).
#![no_main]

use hipobj_gateway::tenancy::{list_buckets, BucketScope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let scope = BucketScope::parse("alpha,team-*").expect("a scope");
    if let Some(out) = list_buckets::filter(data, &scope) {
        assert_eq!(list_buckets::filter(&out, &scope).as_deref(), Some(&out[..]));
    }
});
