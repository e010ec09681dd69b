//! Property tests: round trips, and no panic on any input.

#![forbid(unsafe_code)]

use hipobj_wire::{
    detect, DcDescriptor, Detected, Gid, LegacySuffix, Reply, Token, TokenValue, Transport,
    DCT_NUM_MAX,
};
use proptest::prelude::*;

fn transport() -> impl Strategy<Value = Transport> {
    prop_oneof![Just(Transport::Dc), Just(Transport::Rc)]
}

fn token() -> impl Strategy<Value = Token> {
    (
        transport(),
        any::<u32>(),
        any::<[u8; 16]>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u8>(),
        any::<u16>(),
    )
        .prop_map(
            |(transport, qp_num, gid, rkey, addr, len, port, lid)| Token {
                transport,
                qp_num,
                gid: Gid(gid),
                rkey,
                addr,
                len,
                port,
                lid,
            },
        )
}

fn descriptor() -> impl Strategy<Value = DcDescriptor> {
    (
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        0..=DCT_NUM_MAX,
        proptest::option::of(any::<[u8; 16]>()),
    )
        .prop_map(|(addr, size, rkey, lid, dct_num, gid)| DcDescriptor {
            addr,
            size,
            rkey,
            lid,
            dct_num,
            gid: gid.map(Gid),
        })
}

fn suffix() -> impl Strategy<Value = LegacySuffix> {
    (any::<u64>(), any::<u64>()).prop_map(|(addr, len)| LegacySuffix { addr, len })
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        (100u16..=599).prop_map(Reply::Status),
        Just(Reply::Ok),
        Just(Reply::Err),
        token().prop_map(Reply::Peer),
        (prop_oneof![Just(204u16), Just(206u16)], token())
            .prop_map(|(s, t)| Reply::PeerStatus(s, t)),
    ]
}

/// Strings near the valid lengths, built from characters the formats use
/// and a few they do not.
fn near_valid() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        8 => proptest::char::ranges(vec!['0'..='9', 'a'..='f', 'A'..='F'].into()),
        2 => Just(':'),
        1 => proptest::sample::select(vec![' ', '+', 'x', 'g', '\0', '\n', '\r', 'é', '-']),
    ];
    let len = prop_oneof![Just(0usize), 78usize..=92, 112usize..=125, 1usize..=600,];
    len.prop_flat_map(move |n| proptest::collection::vec(ch.clone(), n))
        .prop_map(|v| v.into_iter().collect())
}

fn no_panic(s: &str) {
    let _ = Token::decode(s);
    let _ = DcDescriptor::parse(s);
    let _ = detect(s);
    let _ = Reply::parse(s);
    let _ = LegacySuffix::parse(s);
    let _ = hipobj_wire::redacted(s);
    if let Ok(t) = Token::decode(s) {
        assert_eq!(Token::decode(&t.encode()), Ok(t));
        assert_eq!(t.encode(), s.to_ascii_lowercase());
    }
    if let Ok(d) = DcDescriptor::parse(s) {
        let f = d.format().expect("a parsed descriptor formats");
        assert_eq!(DcDescriptor::parse(&f), Ok(d));
    }
    if let Ok(r) = Reply::parse(s) {
        assert_eq!(Reply::parse(r.format()), Ok(r));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn token_round_trip(t in token()) {
        let s = t.encode();
        prop_assert_eq!(s.len(), 88);
        prop_assert_eq!(Token::decode(&s), Ok(t));
        prop_assert_eq!(Token::decode(&s.to_uppercase()), Ok(t));
        prop_assert_eq!(Token::from_bytes(&t.to_bytes()), Ok(t));
    }

    #[test]
    fn descriptor_round_trip(d in descriptor()) {
        let s = d.format().unwrap();
        prop_assert_eq!(s.len(), 81);
        prop_assert_eq!(DcDescriptor::parse(&s), Ok(d));
        prop_assert_eq!(DcDescriptor::parse(&s.to_uppercase()), Ok(d));
    }

    #[test]
    fn descriptor_rejects_wide_dct(d in descriptor(), dct in (DCT_NUM_MAX + 1)..=u32::MAX) {
        let d = DcDescriptor { dct_num: dct, ..d };
        prop_assert!(d.format().is_err());
    }

    #[test]
    fn reply_round_trip(r in reply()) {
        prop_assert_eq!(Reply::parse(r.format()), Ok(r));
        prop_assert_eq!(Reply::parse(format!("{r}\r\n\0")), Ok(r));
    }

    #[test]
    fn detect_token(t in token(), sfx in proptest::option::of(suffix())) {
        let s = format!("{}{}", t.encode(), sfx.map(|x| x.format()).unwrap_or_default());
        prop_assert_eq!(detect(&s), Ok(Detected { value: TokenValue::HipObj(t), suffix: sfx }));
    }

    #[test]
    fn detect_descriptor(d in descriptor(), sfx in proptest::option::of(suffix())) {
        let s = format!("{}{}", d.format().unwrap(), sfx.map(|x| x.format()).unwrap_or_default());
        prop_assert_eq!(detect(&s), Ok(Detected { value: TokenValue::CuObj(d), suffix: sfx }));
    }

    #[test]
    fn no_panic_on_strings(s in any::<String>()) {
        no_panic(&s);
    }

    #[test]
    fn no_panic_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..700)) {
        no_panic(&String::from_utf8_lossy(&b));
        let _ = Reply::parse(&b);
    }

    #[test]
    fn no_panic_near_valid(s in near_valid()) {
        no_panic(&s);
    }

    #[test]
    fn no_panic_on_mutated_values(
        t in token(), d in descriptor(), sfx in suffix(),
        at in 0usize..130, c in any::<char>(), cut in 0usize..130,
    ) {
        let d = d.format().unwrap();
        let sfx = sfx.format();
        for base in [t.encode(), d.clone(), format!("{}{sfx}", t.encode()), format!("{d}{sfx}"),
                     format!("200:{}", t.encode())] {
            let mut chars: Vec<char> = base.chars().collect();
            if at < chars.len() {
                chars[at] = c;
            }
            let mutated: String = chars.iter().collect();
            no_panic(&mutated);
            let truncated: String = base.chars().take(cut).collect();
            no_panic(&truncated);
            let mut inserted = base.clone();
            if at <= inserted.len() && inserted.is_char_boundary(at) {
                inserted.insert(at, c);
            }
            no_panic(&inserted);
        }
    }
}

proptest! {
    /// Any bucket (no `/`) and key survive hipobj-rc-v2's target encoding.
    #[test]
    fn rc_v2_targets_round_trip(
        bucket in "[^/\\x00]{1,40}",
        key in "[^\\x00]{1,200}",
        query in proptest::option::of("[a-zA-Z0-9=&]{0,30}"),
    ) {
        let t = hipobj_wire::rc_v2::Target { bucket, key, query };
        let s = t.encode();
        prop_assert!(s.bytes().all(|b| b.is_ascii_graphic()), "{}", s);
        prop_assert_eq!(hipobj_wire::rc_v2::Target::parse(&s).unwrap(), t);
    }

    /// hipobj-rc-v2's target and field parsers never panic.
    #[test]
    fn rc_v2_parsers_are_total(s in ".{0,300}") {
        let _ = hipobj_wire::rc_v2::Target::parse(&s);
        let _ = hipobj_wire::rc_v2::SessionId::parse(&s);
        let _ = hipobj_wire::rc_v2::Cookie::parse(&s);
        let _ = hipobj_wire::rc_v2::Psn::parse(&s);
        let _ = hipobj_wire::rc_v2::Span::parse(&s, Some(&s));
        let _ = hipobj_wire::rc_v2::fields::parse_checksum(&s);
    }
}
