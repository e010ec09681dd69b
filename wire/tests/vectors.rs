//! Every vector and every rejected form in `docs/protocol.md` ("Test vectors").

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;

use hipobj_wire::{
    detect, DcDescriptor, DescriptorError, Detected, DialectError, Gid, LegacySuffix, Reply,
    ReplyError, SuffixError, Token, TokenError, TokenValue, Transport,
};

const V1: &str =
    "0104030201fe000000000000000000000000000080a5a5a5a5ffffffffffffffff0100000000000000ffcdab";
const V2: &str =
    "012a00000000000000000000000000000000000000efbeadde00100000007f00000010000000000000010000";
const V3: &str =
    "010000000000000000000000000000ffffc0a8012a0000000000000000000000000000000000000000000000";

const D1: &str =
    "0102030405060708:01020304:01020304:0102:010203:1:0102030405060708090a0b0c0d0e0f10";
const D2: &str =
    "ffffffffffffffff:00000001:01020304:0102:010203:1:0102030405060708090a0b0c0d0e0f10";

fn t1() -> Token {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[15] = 0x80;
    Token {
        transport: Transport::Rc,
        qp_num: 0x0102_0304,
        gid: Gid(gid),
        rkey: 0xa5a5_a5a5,
        addr: u64::MAX,
        len: 1,
        port: 0xff,
        lid: 0xabcd,
    }
}

fn t2() -> Token {
    Token {
        transport: Transport::Rc,
        qp_num: 42,
        gid: Gid::ZERO,
        rkey: 0xdead_beef,
        addr: 0x7f00_0000_1000,
        len: 4096,
        port: 1,
        lid: 0,
    }
}

fn t3() -> Token {
    Token {
        transport: Transport::Rc,
        qp_num: 0,
        gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 42)),
        rkey: 0,
        addr: 0,
        len: 0,
        port: 0,
        lid: 0,
    }
}

fn seq_gid() -> Gid {
    Gid([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])
}

fn d1() -> DcDescriptor {
    DcDescriptor {
        addr: 0x0102_0304_0506_0708,
        size: 0x0102_0304,
        rkey: 0x0102_0304,
        lid: 0x0102,
        dct_num: 0x01_0203,
        gid: Some(seq_gid()),
    }
}

fn d2() -> DcDescriptor {
    DcDescriptor {
        addr: u64::MAX,
        size: 1,
        ..d1()
    }
}

#[test]
fn token_vectors_encode() {
    assert_eq!(t1().encode(), V1);
    assert_eq!(t2().encode(), V2);
    assert_eq!(t3().encode(), V3);
    assert_eq!(t1().to_string(), V1);
}

#[test]
fn token_vectors_decode() {
    for (s, t) in [(V1, t1()), (V2, t2()), (V3, t3())] {
        assert_eq!(Token::decode(s), Ok(t));
        assert_eq!(Token::decode(&s.to_uppercase()), Ok(t));
        assert_eq!(s.parse::<Token>(), Ok(t));
        let bytes = t.to_bytes();
        assert_eq!(Token::from_bytes(&bytes), Ok(t));
    }
}

#[test]
fn token_byte_layout() {
    let b = t1().to_bytes();
    assert_eq!(b[0], 1);
    assert_eq!(b[1..5], [4, 3, 2, 1]);
    assert_eq!(b[5], 0xfe);
    assert_eq!(b[20], 0x80);
    assert_eq!(b[21..25], [0xa5; 4]);
    assert_eq!(b[25..33], [0xff; 8]);
    assert_eq!(b[33..41], [1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(b[41], 0xff);
    assert_eq!(b[42..44], [0xcd, 0xab]);
}

#[test]
fn token_client_ip() {
    assert_eq!(t3().client_ip(), Some(Ipv4Addr::new(192, 168, 1, 42)));
    assert_eq!(t1().client_ip(), None);
    assert_eq!(t2().client_ip(), None);
    assert!(t3().is_handshake());
    assert!(!t2().is_handshake());
}

#[test]
fn token_rejects_lengths() {
    assert_eq!(
        Token::decode(&V1[..87]),
        Err(TokenError::Length { len: 87 })
    );
    assert_eq!(
        Token::decode(&format!("{V1}0")),
        Err(TokenError::Length { len: 89 })
    );
    assert_eq!(Token::decode(""), Err(TokenError::Length { len: 0 }));
    assert_eq!(
        Token::decode(&V1[..86]),
        Err(TokenError::Length { len: 86 })
    );
    assert_eq!(
        Token::decode(&"0".repeat(176)),
        Err(TokenError::Length { len: 176 })
    );
}

#[test]
fn token_rejects_non_hex_pairs() {
    // Each rejected pair of `docs/protocol.md`, at the start and in the middle.
    for pair in ["+1", " 1", "0x", "g0"] {
        let bad_ch = pair.chars().find(|c| !c.is_ascii_hexdigit()).unwrap();
        let offset = pair.find(bad_ch).unwrap();
        for at in [0usize, 2, 10, 86] {
            let s = format!("{}{}{}", &V2[..at], pair, &V2[at + 2..]);
            assert_eq!(s.len(), 88);
            assert_eq!(
                Token::decode(&s),
                Err(TokenError::NonHex {
                    position: at + offset,
                    ch: bad_ch
                }),
                "{s}"
            );
        }
    }
    // 88 characters, one of them not ASCII.
    let s = format!("é{}", &V2[1..]);
    assert_eq!(
        Token::decode(&s),
        Err(TokenError::NonHex {
            position: 0,
            ch: 'é'
        })
    );
}

#[test]
fn token_rejects_transport_bytes() {
    for b in ["02", "03", "ff", "80", "10"] {
        let s = format!("{b}{}", &V2[2..]);
        let byte = u8::from_str_radix(b, 16).unwrap();
        assert_eq!(Token::decode(&s), Err(TokenError::Transport { byte }));
    }
    let mut raw = t2().to_bytes();
    raw[0] = 3;
    assert_eq!(
        Token::from_bytes(&raw),
        Err(TokenError::Transport { byte: 3 })
    );
    assert_eq!(
        TokenError::Transport { byte: 3 }.to_string(),
        "transport byte 0x03 is neither DC (0) nor RC (1)"
    );
    let dc = format!("00{}", &V2[2..]);
    assert_eq!(Token::decode(&dc).map(|t| t.transport), Ok(Transport::Dc));
}

#[test]
fn token_rejects_suffix() {
    let s = format!("{V2}:00007f0000001000:0000000000001000");
    assert_eq!(
        Token::decode(&s),
        Err(TokenError::Suffix { suffix_len: 34 })
    );
}

#[test]
fn token_error_messages() {
    assert_eq!(
        TokenError::Length { len: 87 }.to_string(),
        "token is 87 characters, expected 88"
    );
    assert_eq!(
        TokenError::NonHex {
            position: 5,
            ch: 'g'
        }
        .to_string(),
        "non-hex character 'g' at position 5"
    );
}

#[test]
fn descriptor_vectors() {
    assert_eq!(DcDescriptor::parse(D1), Ok(d1()));
    assert_eq!(DcDescriptor::parse(D2), Ok(d2()));
    assert_eq!(d1().format().as_deref(), Ok(D1));
    assert_eq!(d2().format().as_deref(), Ok(D2));
    assert_eq!(DcDescriptor::parse(&D1.to_uppercase()), Ok(d1()));
    assert_eq!(D2.parse::<DcDescriptor>(), Ok(d2()));
}

#[test]
fn descriptor_without_gid() {
    let d = DcDescriptor { gid: None, ..d1() };
    let s = d.format().unwrap();
    assert_eq!(
        s,
        "0102030405060708:01020304:01020304:0102:010203:0:00000000000000000000000000000000"
    );
    assert_eq!(DcDescriptor::parse(&s), Ok(d));
    // With the flag 0, the GID field must be hex but its value is ignored.
    let other = D1.replace(":1:", ":0:");
    assert_eq!(DcDescriptor::parse(&other), Ok(d));
    let bad = format!("{}z", &other[..80]);
    assert_eq!(
        DcDescriptor::parse(&bad),
        Err(DescriptorError::NonHex {
            field: "GID",
            position: 80,
            ch: 'z'
        })
    );
}

#[test]
fn descriptor_dct_num_must_fit_24_bits() {
    let d = DcDescriptor {
        dct_num: 0x0100_0000,
        ..d1()
    };
    assert_eq!(
        d.format(),
        Err(DescriptorError::DctNumTooLarge {
            dct_num: 0x0100_0000
        })
    );
    let d = DcDescriptor {
        dct_num: 0xff_ffff,
        ..d1()
    };
    assert!(d.format().unwrap().contains(":ffffff:"));
}

#[test]
fn descriptor_rejects() {
    assert_eq!(
        DcDescriptor::parse(&D1[..80]),
        Err(DescriptorError::Length { len: 80 })
    );
    assert_eq!(
        DcDescriptor::parse(&format!("{D1}0")),
        Err(DescriptorError::Length { len: 82 })
    );
    // A colon moved: field widths are exact.
    let moved = format!("{}:{}{}", &D1[..15], &D1[15..16], &D1[17..]);
    assert_eq!(
        DcDescriptor::parse(&moved),
        Err(DescriptorError::NonHex {
            field: "address",
            position: 15,
            ch: ':'
        })
    );
    let no_colon = D1.replacen(':', "0", 1);
    assert_eq!(
        DcDescriptor::parse(&no_colon),
        Err(DescriptorError::Separator {
            position: 16,
            ch: '0'
        })
    );
    let flag2 = D1.replace(":1:", ":2:");
    assert_eq!(
        DcDescriptor::parse(&flag2),
        Err(DescriptorError::PresentFlag { ch: '2' })
    );
    let plus = format!("+{}", &D1[1..]);
    assert_eq!(
        DcDescriptor::parse(&plus),
        Err(DescriptorError::NonHex {
            field: "address",
            position: 0,
            ch: '+'
        })
    );
    let ox = D1.replacen(":01020304:", ":0x020304:", 1);
    assert_eq!(
        DcDescriptor::parse(&ox),
        Err(DescriptorError::NonHex {
            field: "size",
            position: 18,
            ch: 'x'
        })
    );
    let space = format!("{} ", &D1[..80]);
    assert!(matches!(
        DcDescriptor::parse(&space),
        Err(DescriptorError::NonHex { position: 80, .. })
    ));
}

#[test]
fn detect_dialects() {
    assert_eq!(
        detect(V1),
        Ok(Detected {
            value: TokenValue::HipObj(t1()),
            suffix: None
        })
    );
    assert_eq!(
        detect(D1),
        Ok(Detected {
            value: TokenValue::CuObj(d1()),
            suffix: None
        })
    );
    let suffix = LegacySuffix {
        addr: 0x7f00_0000_1000,
        len: 4096,
    };
    assert_eq!(
        detect(&format!("{V2}{}", suffix.format())),
        Ok(Detected {
            value: TokenValue::HipObj(t2()),
            suffix: Some(suffix)
        })
    );
    assert_eq!(
        detect(&format!("{D2}{}", suffix.format())),
        Ok(Detected {
            value: TokenValue::CuObj(d2()),
            suffix: Some(suffix)
        })
    );
}

#[test]
fn detect_rejects() {
    assert_eq!(detect(""), Err(DialectError::Empty));
    assert_eq!(
        detect(&format!(" {V1}")),
        Err(DialectError::Whitespace { position: 0 })
    );
    assert_eq!(
        detect(&format!("{V1}\n")),
        Err(DialectError::Whitespace { position: 88 })
    );
    assert_eq!(
        detect(&V1[..87]),
        Err(DialectError::Token(TokenError::Length { len: 87 }))
    );
    assert_eq!(
        detect(&format!("03{}", &V1[2..])),
        Err(DialectError::Token(TokenError::Transport { byte: 3 }))
    );
    assert_eq!(
        detect(&D1[..80]),
        Err(DialectError::Descriptor(DescriptorError::Length {
            len: 80
        }))
    );
    assert_eq!(
        detect(&format!("{V1}:1234")),
        Err(DialectError::Suffix(SuffixError::Length { len: 5 }))
    );
    assert_eq!(
        detect(&format!("{D1}:00007f0000001000")),
        Err(DialectError::Suffix(SuffixError::Length { len: 17 }))
    );
    assert_eq!(
        detect(&format!("{V1}:00007f0000001000:000000000000100g")),
        Err(DialectError::Suffix(SuffixError::NonHex {
            position: 33,
            ch: 'g'
        }))
    );
}

#[test]
fn reply_forms() {
    assert_eq!(Reply::parse("ok"), Ok(Reply::Ok));
    assert_eq!(Reply::parse("err"), Ok(Reply::Err));
    assert_eq!(Reply::parse("200"), Ok(Reply::Status(200)));
    assert_eq!(Reply::parse("206"), Ok(Reply::Status(206)));
    assert_eq!(Reply::parse("501"), Ok(Reply::Status(501)));
    assert_eq!(Reply::parse("100"), Ok(Reply::Status(100)));
    assert_eq!(Reply::parse("599"), Ok(Reply::Status(599)));
    assert_eq!(Reply::parse(format!("200:{V1}")), Ok(Reply::Peer(t1())));
    assert_eq!(
        Reply::parse(format!("200:{}", V3.to_uppercase())),
        Ok(Reply::Peer(t3()))
    );
    // Trailing NUL, CR and LF are stripped, in any mix.
    assert_eq!(Reply::parse("200\r\n"), Ok(Reply::Status(200)));
    assert_eq!(Reply::parse(b"ok\0\0\0".as_slice()), Ok(Reply::Ok));
    assert_eq!(Reply::parse(b"204\n\0\r"), Ok(Reply::Status(204)));
}

#[test]
fn reply_semantics() {
    for r in [
        Reply::success(),
        Reply::Status(204),
        Reply::partial(),
        Reply::Ok,
        Reply::peer(t2()),
    ] {
        assert!(r.is_success(), "{r:?}");
        assert!(!r.is_declined());
    }
    assert!(Reply::declined().is_declined());
    assert!(!Reply::declined().is_success());
    assert!(!Reply::Err.is_success());
    assert!(!Reply::Status(201).is_success());
    assert_eq!(Reply::Ok.status(), Some(200));
    assert_eq!(Reply::peer(t1()).status(), Some(200));
    assert_eq!(Reply::Err.status(), None);
    assert_eq!(Reply::partial().status(), Some(206));
    assert_eq!(Reply::peer(t1()).peer_token(), Some(&t1()));
}

#[test]
fn reply_format() {
    assert_eq!(Reply::Ok.format(), "ok");
    assert_eq!(Reply::Err.to_string(), "err");
    assert_eq!(Reply::declined().format(), "501");
    assert_eq!(Reply::peer(t1()).format(), format!("200:{V1}"));
}

#[test]
fn reply_rejects() {
    let bad_peer = |s: String| Reply::parse(s);
    assert_eq!(
        bad_peer(format!("201:{V1}")),
        Err(ReplyError::TokenPrefix {
            prefix: "201".into()
        })
    );
    assert_eq!(
        bad_peer(format!("0206:{V1}")),
        Err(ReplyError::TokenPrefix {
            prefix: "0206".into()
        })
    );
    assert_eq!(
        bad_peer(format!("0200:{V1}")),
        Err(ReplyError::TokenPrefix {
            prefix: "0200".into()
        })
    );
    assert_eq!(
        bad_peer(format!("+200:{V1}")),
        Err(ReplyError::TokenPrefix {
            prefix: "+200".into()
        })
    );
    assert_eq!(
        bad_peer(format!("200:{}", &V1[..87])),
        Err(ReplyError::Peer(TokenError::Length { len: 87 }))
    );
    assert_eq!(
        bad_peer(format!("200:{V1}0")),
        Err(ReplyError::Peer(TokenError::Length { len: 89 }))
    );
    assert_eq!(
        bad_peer(format!("200:03{}", &V1[2..])),
        Err(ReplyError::Peer(TokenError::Transport { byte: 3 }))
    );
    assert_eq!(Reply::parse(""), Err(ReplyError::Empty));
    assert_eq!(Reply::parse("\r\n\0"), Err(ReplyError::Empty));
    assert_eq!(
        Reply::parse("099"),
        Err(ReplyError::StatusRange { status: 99 })
    );
    assert_eq!(
        Reply::parse("600"),
        Err(ReplyError::StatusRange { status: 600 })
    );
    for s in [
        "0200", "+200", " 200", "200 ", "2 00", "20", "2000", "OK", "Ok", "ERR", "ok ", "-99",
        "20a",
    ] {
        assert!(
            matches!(Reply::parse(s), Err(ReplyError::Unrecognized { .. })),
            "{s:?}: {:?}",
            Reply::parse(s)
        );
    }
    assert_eq!(
        Reply::parse(b"\xff00".as_slice()),
        Err(ReplyError::NotUtf8 { position: 0 })
    );
    assert_eq!(
        Reply::parse("2".repeat(513)),
        Err(ReplyError::TooLong { len: 513 })
    );
    // A NUL inside (not trailing) is not stripped.
    assert!(Reply::parse("200\0x").is_err());
    // Other statuses followed by more stay refused, where hipObject's
    // library would read the first three characters: only a decline is
    // read that loosely.
    for s in ["200x", "206 partial", "421:again", "500err", "404\0x"] {
        assert!(Reply::parse(s).is_err(), "{s:?}: {:?}", Reply::parse(s));
    }
}

/// hipObject's library (ROCm/hipObject v1) accepts `204:` and `206:` with
/// a token, and reads `501` followed by anything as a decline; so does
/// this parser.
#[test]
fn reply_as_loose_as_hipobject_where_it_is_safe() {
    assert_eq!(
        Reply::parse(format!("206:{V1}")),
        Ok(Reply::PeerStatus(206, t1()))
    );
    assert_eq!(
        Reply::parse(format!("204:{V2}\r\n")),
        Ok(Reply::PeerStatus(204, t2()))
    );
    let r = Reply::parse(format!("206:{V1}")).unwrap();
    assert_eq!(r.status(), Some(206));
    assert!(r.is_success());
    assert_eq!(r.peer_token(), Some(&t1()));
    assert_eq!(r.format(), format!("206:{V1}"));
    assert_eq!(
        Reply::parse(format!("206:{}", &V1[..87])),
        Err(ReplyError::Peer(TokenError::Length { len: 87 }))
    );
    for s in [
        "501:",
        "501:not implemented",
        "501 declined",
        "5010",
        "501\0junk",
    ] {
        assert_eq!(Reply::parse(s), Ok(Reply::Status(501)), "{s:?}");
        assert!(Reply::parse(s).unwrap().is_declined());
    }
    assert_eq!(
        Reply::parse(b"501\xff\xfe".as_slice()),
        Ok(Reply::Status(501))
    );
}
