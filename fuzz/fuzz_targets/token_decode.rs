//! Token::decode and detect on arbitrary input: no panic, and every value
//! accepted encodes back to itself.
#![no_main]

use hipobj_wire::{detect, Detected, Token, TokenValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(t) = Token::decode(&s) {
        let encoded = t.encode();
        assert_eq!(encoded, s.to_ascii_lowercase());
        assert_eq!(Token::decode(&encoded), Ok(t));
    }
    if let Ok(d) = detect(&s) {
        let head = match d.value {
            TokenValue::HipObj(t) => t.encode(),
            TokenValue::CuObj(c) => c.format().expect("a parsed descriptor formats"),
        };
        let suffix = d.suffix.map(|x| x.format()).unwrap_or_default();
        let again: Detected = detect(&format!("{head}{suffix}")).expect("re-detect");
        assert_eq!(again, d);
    }
});
