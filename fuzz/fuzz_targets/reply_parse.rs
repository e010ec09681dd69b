//! Reply::parse on arbitrary bytes: no panic, and every reply accepted
//! formats to a value that parses back to it.
#![no_main]

use hipobj_wire::Reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Reply::parse(data) {
        let formatted = r.format();
        assert_eq!(Reply::parse(&formatted), Ok(r));
        assert_eq!(formatted.parse::<Reply>(), Ok(r));
    }
});
