//! DcDescriptor::parse on arbitrary input: no panic, and every descriptor
//! accepted formats to a value that parses back to it.
#![no_main]

use hipobj_wire::DcDescriptor;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(d) = DcDescriptor::parse(&s) {
        let formatted = d.format().expect("a parsed descriptor formats");
        assert_eq!(DcDescriptor::parse(&formatted), Ok(d));
        // With a GID the format is canonical: only the case may differ.
        if d.gid.is_some() {
            assert_eq!(formatted, s.to_ascii_lowercase());
        }
    }
});
