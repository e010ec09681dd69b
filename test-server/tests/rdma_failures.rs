//! What the test server answers when an RDMA request goes wrong, and that
//! the store is unchanged after every failed PUT: rejected token forms,
//! unsigned tokens and bad signatures, unknown connections, buffers too
//! small, checksum mismatches, a client that deregisters or vanishes
//! mid-transfer, several client processes at once, and tokens on
//! operations RDMA does not serve.
//!
//! "Mid-transfer" is forced, not hoped for: the client's own soft
//! responder, which serves the server's READs and WRITEs of its buffer,
//! stops at a `testing` gate (`hipobj_fabric::soft::testing::Gate`) with
//! the transfer in flight, and the tests wait on events (the gate, the
//! server's metrics), never on time.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj::Direction;
use hipobj_fabric::soft::testing::Gate;
use hipobj_wire::{headers, DcDescriptor, Gid, LegacySuffix, Reply, Token, Transport};
use http::Method;
use std::net::Ipv4Addr;
use std::time::Duration;

const TOKEN: &str = headers::RDMA_TOKEN;

/// A well-formed RC transfer token naming a QP no server knows.
fn stranger_token(len: u64) -> Token {
    Token {
        transport: Transport::Rc,
        qp_num: 0x00ab_cd01,
        gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
        rkey: 0x1234_5678,
        addr: 0x7f00_0000_1000,
        len,
        port: 1,
        lid: 0,
    }
}

/// Every token form the server must refuse before doing anything.
fn rejected_tokens() -> Vec<(&'static str, String)> {
    let good = stranger_token(4096).encode();
    assert_eq!(good.len(), 88);
    let desc = DcDescriptor {
        addr: 0x0102_0304_0506_0708,
        size: 0x0102_0304,
        rkey: 0x0102_0304,
        lid: 0x0102,
        dct_num: 0x01_0203,
        gid: Some(Gid([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])),
    }
    .format()
    .unwrap();
    assert_eq!(
        desc,
        "0102030405060708:01020304:01020304:0102:010203:1:0102030405060708090a0b0c0d0e0f10"
    );
    let suffix = LegacySuffix {
        addr: 0x1000,
        len: 4096,
    }
    .format();
    let with = |at: usize, s: &str| format!("{}{s}{}", &good[..at], &good[at + s.len()..]);
    let d_with = |at: usize, s: &str| format!("{}{s}{}", &desc[..at], &desc[at + s.len()..]);
    vec![
        ("empty", String::new()),
        ("two digits", "01".to_string()),
        ("86 digits", good[..86].to_string()),
        ("87 digits", good[..87].to_string()),
        ("89 digits", format!("{good}0")),
        ("90 digits", format!("{good}00")),
        ("176 digits (two tokens)", format!("{good}{good}")),
        ("non-hex g", with(10, "g")),
        ("non-hex +1", with(20, "+1")),
        ("interior space", with(30, " 1")),
        ("interior tab", with(30, "\t1")),
        ("0x prefix, 88 characters", format!("0x{}", &good[2..])),
        ("0x prefix, 90 characters", format!("0x{good}")),
        ("transport byte 03", with(0, "03")),
        ("transport byte ff", with(0, "ff")),
        ("descriptor: GID-present flag 2", d_with(47, "2")),
        ("descriptor: non-hex address", d_with(15, "g")),
        ("descriptor: non-hex rkey", d_with(30, "z")),
        ("descriptor: separator -", d_with(16, "-")),
        (
            "descriptor: field widths shifted",
            format!("{}:{}", &desc[..15], &desc[15..80]),
        ),
        ("descriptor: 80 characters", desc[..80].to_string()),
        ("descriptor: 82 characters", format!("{desc}0")),
        (
            "descriptor: non-hex GID with flag 0",
            format!("{}0:{}", &desc[..47], "z".repeat(32)),
        ),
        ("token + bare ':'", format!("{good}:")),
        ("token + half a suffix", format!("{good}{}", &suffix[..17])),
        ("token + short suffix", format!("{good}{}", &suffix[..33])),
        ("token + long suffix", format!("{good}{suffix}0")),
        (
            "token + suffix with '-'",
            format!("{good}{}-{}", &suffix[..17], &suffix[18..]),
        ),
        (
            "token + non-hex suffix",
            format!("{good}:{}:{}", "x".repeat(16), &suffix[18..]),
        ),
        ("token + two suffixes", format!("{good}{suffix}{suffix}")),
        ("descriptor + bare ':'", format!("{desc}:")),
        (
            "descriptor + short suffix",
            format!("{desc}{}", &suffix[..30]),
        ),
        ("whitespace only", "   ".to_string()),
    ]
}

#[test]
fn rejected_token_forms_answer_400_invalid_token_without_a_reply() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let previous = pattern(1, 1000);
    assert!(s3
        .put_plain("/bkt/existing", previous.clone())
        .status
        .is_success());
    for (i, (what, token)) in rejected_tokens().into_iter().enumerate() {
        // PUT to a new key and over an existing one.
        let key = format!("/bkt/new{i}");
        let a = s3.send(Method::PUT, &key, &[(TOKEN, &token)], Vec::new(), true);
        assert_error(&a, 400, "InvalidRDMAToken", None, what);
        assert_absent(&s3, &key);
        let a = s3.send(
            Method::PUT,
            "/bkt/existing",
            &[(TOKEN, &token)],
            Vec::new(),
            true,
        );
        assert_error(&a, 400, "InvalidRDMAToken", None, what);
        assert_object(&s3, "/bkt/existing", &previous);
        // GET and HEAD are refused the same way.
        let a = s3.send(
            Method::GET,
            "/bkt/existing",
            &[(TOKEN, &token)],
            Vec::new(),
            true,
        );
        assert_error(&a, 400, "InvalidRDMAToken", None, what);
    }
    // Leading and trailing whitespace never reaches the server: HTTP/1.1
    // strips it from header values, so the server sees the token itself
    // (here one naming an unknown QP).
    let padded = format!("  {}  ", stranger_token(4096).encode());
    let a = s3.send(
        Method::PUT,
        "/bkt/padded",
        &[(TOKEN, &padded)],
        Vec::new(),
        true,
    );
    assert_error(
        &a,
        421,
        "RDMAConnectionUnknown",
        Some("421"),
        "padded token",
    );
    assert_absent(&s3, "/bkt/padded");
}

#[test]
fn an_unsigned_token_is_403_access_denied_and_a_bad_signature_403_signature_does_not_match() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let lib = client();
    handshake(&s3, &lib, "/bkt");
    let mut mem = pattern(2, 4096);
    let buf = lib.register_host(&mut mem).unwrap();
    let token = buf.token(Direction::Put, 0, 4096).unwrap();

    // The token added after signing: not among the signed headers.
    let a = s3.send_ext(
        Method::PUT,
        "/bkt/unsigned",
        &[],
        Vec::new(),
        true,
        SK,
        &[(TOKEN, &token)],
    );
    assert_error(&a, 403, "AccessDenied", None, "unsigned token");
    assert!(a.text().contains("x-amz-rdma-token"), "{}", a.text());
    assert_absent(&s3, "/bkt/unsigned");

    // Signed with the wrong secret.
    let a = s3.send_ext(
        Method::PUT,
        "/bkt/badsig",
        &[(TOKEN, &token)],
        Vec::new(),
        true,
        "not-the-secret",
        &[],
    );
    assert_error(&a, 403, "SignatureDoesNotMatch", None, "wrong secret");
    assert_absent(&s3, "/bkt/badsig");

    // The same token, properly signed, works: the pair was untouched.
    let a = s3.send(Method::PUT, "/bkt/ok", &[(TOKEN, &token)], Vec::new(), true);
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.reply().as_deref(), Some("200"));
    drop(buf);
    assert_object(&s3, "/bkt/ok", &pattern(2, 4096));
}

#[test]
fn a_token_naming_an_unknown_client_qp_is_421_connection_unknown() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let previous = pattern(3, 4096);
    s3.put_plain("/bkt/existing", previous.clone());

    // A QP number nobody ever used.
    let token = stranger_token(4096).encode();
    for (method, key) in [
        (Method::PUT, "/bkt/new"),
        (Method::PUT, "/bkt/existing"),
        (Method::GET, "/bkt/existing"),
    ] {
        let a = s3.send(method.clone(), key, &[(TOKEN, &token)], Vec::new(), true);
        assert_error(&a, 421, "RDMAConnectionUnknown", Some("421"), key);
    }
    assert_absent(&s3, "/bkt/new");
    assert_object(&s3, "/bkt/existing", &previous);

    // A real client QP that never did the handshake.
    let lib = client();
    let mut mem = vec![0x5au8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let token = buf.token(Direction::Put, 0, 4096).unwrap();
        let a = s3.send(
            Method::PUT,
            "/bkt/new",
            &[(TOKEN, &token)],
            Vec::new(),
            true,
        );
        assert_error(
            &a,
            421,
            "RDMAConnectionUnknown",
            Some("421"),
            "no handshake",
        );
        let token = buf.token(Direction::Get, 0, 4096).unwrap();
        let a = s3.send(
            Method::GET,
            "/bkt/existing",
            &[(TOKEN, &token)],
            Vec::new(),
            true,
        );
        assert_error(
            &a,
            421,
            "RDMAConnectionUnknown",
            Some("421"),
            "no handshake",
        );
    }
    assert_eq!(mem, vec![0x5au8; 4096], "no data moved");
    assert_absent(&s3, "/bkt/new");
}

#[test]
fn a_range_larger_than_the_buffer_is_400_and_nothing_is_written() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let data = pattern(4, 10_000);
    s3.put_plain("/bkt/r", data.clone());
    let lib = client();
    let mut mem = vec![0xa5u8; 100];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/r").with_header("range", "bytes=0-100");
        let e = buf.get(0, 100, &mut ops).unwrap_err();
        assert_eq!(e.op, hipobj::OpError::S3Error);
        let a = ops.last.as_ref().unwrap();
        assert_error(
            a,
            400,
            "InvalidRDMABufferSize",
            Some("400"),
            "range 101 > 100",
        );

        // The same connection still works for a range that fits.
        let mut ops =
            RdmaOps::new(&s3, Method::GET, "/bkt/r").with_header("range", "bytes=500-599");
        buf.get(0, 100, &mut ops).unwrap();
        assert_eq!(ops.last.as_ref().unwrap().status, 206);
    }
    assert_eq!(&mem[..], &data[500..600]);
    let mut mem = vec![0xa5u8; 100];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/r").with_header("range", "bytes=1000-");
        buf.get(0, 100, &mut ops).unwrap_err();
        let a = ops.last.as_ref().unwrap();
        assert_error(a, 400, "InvalidRDMABufferSize", Some("400"), "open range");
    }
    assert_eq!(mem, vec![0xa5u8; 100]);
}

fn create_upload(s3: &S3, path: &str) -> String {
    let created = s3.send(
        Method::POST,
        &format!("{path}?uploads"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(created.status, 200, "{}", created.text());
    xml_field(&created.body, "UploadId").unwrap()
}

#[test]
fn checksum_mismatch_is_400_bad_digest_and_stores_nothing() {
    assert_eq!(crc64nvme_b64(b"123456789"), {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(0xae8b_1486_0a79_9888u64.to_be_bytes())
    });
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = (9 << 20) + 7; // two staging chunks
    let data = pattern(5, len);
    let wrong = crc64nvme_b64(&pattern(6, len));
    let right = crc64nvme_b64(&data);
    let previous = pattern(7, 777);
    s3.put_plain("/bkt/existing", previous.clone());
    let lib = client();
    let mut mem = data.clone();
    let buf = lib.register_host(&mut mem).unwrap();

    for key in ["/bkt/new", "/bkt/existing"] {
        let mut ops =
            RdmaOps::new(&s3, Method::PUT, key).with_header(headers::CHECKSUM_CRC64NVME, &wrong);
        buf.put(0, len, &mut ops).unwrap_err();
        assert_error(
            ops.last.as_ref().unwrap(),
            400,
            "BadDigest",
            Some("400"),
            key,
        );
    }
    assert_absent(&s3, "/bkt/new");
    assert_object(&s3, "/bkt/existing", &previous);

    // A matching checksum is accepted.
    let mut ops =
        RdmaOps::new(&s3, Method::PUT, "/bkt/new").with_header(headers::CHECKSUM_CRC64NVME, &right);
    buf.put(0, len, &mut ops).unwrap();
    let a = ops.last.as_ref().unwrap();
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.reply().as_deref(), Some("200"));
    if let Some(echo) = a.header(headers::CHECKSUM_CRC64NVME) {
        assert_eq!(echo, right);
    }
    assert_object(&s3, "/bkt/new", &data);

    // The ETag the part would have: the same bytes stored whole.
    let etag_of_data = a.header("etag").unwrap();

    // UploadPart: a mismatched part is not kept, so completing the upload
    // with it fails. (The listing and the retry use a second upload, so
    // that nothing depends on what a store keeps of an upload whose
    // completion failed.)
    let complete = |path: &str, upload: &str, etag: &str| {
        let body = format!(
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part></CompleteMultipartUpload>"
        );
        s3.send(
            Method::POST,
            &format!("{path}?uploadId={upload}"),
            &[],
            body.into_bytes(),
            false,
        )
    };
    let list_parts = |path: &str, upload: &str| {
        let listed = s3.send(
            Method::GET,
            &format!("{path}?uploadId={upload}"),
            &[],
            Vec::new(),
            false,
        );
        assert_eq!(listed.status, 200, "{}", listed.text());
        listed.text().matches("<Part>").count()
    };
    let bad_part = |path: &str, upload: &str| {
        let part1 = format!("{path}?partNumber=1&uploadId={upload}");
        let mut ops =
            RdmaOps::new(&s3, Method::PUT, &part1).with_header(headers::CHECKSUM_CRC64NVME, &wrong);
        buf.put(0, len, &mut ops).unwrap_err();
        assert_error(
            ops.last.as_ref().unwrap(),
            400,
            "BadDigest",
            Some("400"),
            "UploadPart",
        );
    };
    let upload = create_upload(&s3, "/bkt/mp1");
    bad_part("/bkt/mp1", &upload);
    assert_eq!(list_parts("/bkt/mp1", &upload), 0, "the bad part is listed");
    let done = complete("/bkt/mp1", &upload, &etag_of_data);
    // The store's own answer: 400 InvalidPart, as S3 (a store that finds no
    // part file may say 500 InternalError).
    assert!(!done.status.is_success(), "{}", done.text());
    assert!(
        matches!(
            done.code().as_deref(),
            Some("InvalidPart" | "InternalError")
        ),
        "{}",
        done.text()
    );
    assert_absent(&s3, "/bkt/mp1");

    let upload = create_upload(&s3, "/bkt/mp2");
    bad_part("/bkt/mp2", &upload);
    assert_eq!(list_parts("/bkt/mp2", &upload), 0, "the bad part is listed");
    // The same part with the right checksum.
    let mut ops = RdmaOps::new(
        &s3,
        Method::PUT,
        &format!("/bkt/mp2?partNumber=1&uploadId={upload}"),
    )
    .with_header(headers::CHECKSUM_CRC64NVME, &right);
    buf.put(0, len, &mut ops).unwrap();
    let a = ops.last.as_ref().unwrap();
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.reply().as_deref(), Some("200"));
    let etag = a.header("etag").unwrap();
    assert_eq!(list_parts("/bkt/mp2", &upload), 1);
    let done = complete("/bkt/mp2", &upload, &etag);
    assert_eq!(done.status, 200, "{}", done.text());
    drop(buf);
    assert_object(&s3, "/bkt/mp2", &data);
}

/// How long a test waits for an event that must come (a bound on a
/// failure, never on how long a success may take).
const LONG: Duration = Duration::from_secs(60);

/// The series of the server's transfer durations (a histogram's count: one
/// per transfer ended) for operation `op` with `result` (`ok`, `error`).
const TRANSFERS: &str = "hipobj_rdma_transfer_seconds_count";

#[test]
fn deregistering_mid_put_fails_the_transfer_and_stores_nothing() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 64 << 20;
    let mut mem = pattern(8, len);
    let addr = mem.as_ptr() as u64;
    let lib = client();
    let buf = lib.register_host(&mut mem).unwrap();
    handshake(&s3, &lib, "/bkt/big");
    let token = buf.token(Direction::Put, 0, len).unwrap();
    // The server READs the buffer; this process's responder serves the
    // READs and stops at its second access to the buffer (a segment, or a
    // same-host grant), holding it: the transfer is in flight.
    let gate = Gate::responder(addr, 2);
    let url = server.url.clone();
    let sender = std::thread::spawn(move || {
        S3::new(&url).send(
            Method::PUT,
            "/bkt/big",
            &[(TOKEN, &token)],
            Vec::new(),
            true,
        )
    });
    let held = gate
        .reached(LONG)
        .expect("the server's READs never reached the buffer");
    assert!(held.offset + held.len < len as u64, "{held:?}");
    std::thread::scope(|s| {
        // The deregistration waits for the held access; then the gate opens.
        s.spawn(|| {
            assert!(gate.deregistering(LONG), "the deregistration never started");
            gate.open();
        });
        drop(buf); // deregisters: the server's next READ meets a dead rkey
    });
    let a = sender.join().unwrap();
    assert_error(&a, 500, "RDMATransferFailed", Some("500"), "deregistered");
    assert_absent(&s3, "/bkt/big");
    drop(mem);
    // The client reconnects and transfers again.
    let mut small = pattern(9, 4096);
    let buf = lib.register_host(&mut small).unwrap();
    let mut ops = RdmaOps::new(&s3, Method::PUT, "/bkt/after");
    buf.put(0, 4096, &mut ops).unwrap();
    drop(buf);
    assert_object(&s3, "/bkt/after", &pattern(9, 4096));
}

#[test]
fn a_put_whose_http_request_is_abandoned_mid_transfer_is_stored_whole() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 64 << 20;
    let data = pattern(15, len);
    let mut mem = data.clone();
    let addr = mem.as_ptr() as u64;
    let lib = client();
    let buf = lib.register_host(&mut mem).unwrap();
    handshake(&s3, &lib, "/bkt/abandoned");
    let token = buf.token(Direction::Put, 0, len).unwrap();
    // The server's READs stop at their second access to the buffer: the
    // client gives up on the request (and closes its connection) while the
    // transfer is in flight; its memory stays registered.
    let gate = Gate::responder(addr, 2);
    let (reached, abandon) = tokio::sync::oneshot::channel::<()>();
    let a = std::thread::scope(|s| {
        s.spawn(|| {
            assert!(
                gate.reached(LONG).is_some(),
                "the server's READs never reached the buffer"
            );
            let _ = reached.send(());
        });
        s3.send_abandoned(Method::PUT, "/bkt/abandoned", &[(TOKEN, &token)], async {
            let _ = abandon.await;
        })
    });
    assert!(
        a.is_none(),
        "the server answered while its transfer was held: {:?}",
        a.map(|a| a.status)
    );
    gate.open();
    // The transfer goes on without the request and ends: the object is
    // there, whole.
    s3.wait_metric(TRANSFERS, &[("op", "PutObject"), ("result", "ok")], |n| {
        n >= 1.0
    });
    assert_eq!(
        s3.metric(TRANSFERS, &[("op", "PutObject"), ("result", "error")]),
        0.0
    );
    drop(buf);
    assert_object(&s3, "/bkt/abandoned", &data);
}

/// The child client process: what it does comes from [`CHILD_ROLE`].
#[test]
#[ignore = "the entry point of the child client processes the other tests start"]
fn child_client_main() {
    let Ok(role) = std::env::var(CHILD_ROLE) else {
        return;
    };
    let url = std::env::var("HIPOBJ_TEST_URL").unwrap();
    let key = std::env::var("HIPOBJ_TEST_KEY").unwrap();
    let len: usize = std::env::var("HIPOBJ_TEST_LEN").unwrap().parse().unwrap();
    let seed: u64 = std::env::var("HIPOBJ_TEST_SEED").unwrap().parse().unwrap();
    let s3 = S3::new(&url);
    let lib = client();
    match role.as_str() {
        // Starts a large PUT or GET, says ready once the server's transfer
        // is held mid-way (this process's responder stopped at its second
        // access to the buffer), and waits to be killed.
        "put-and-hang" | "get-and-hang" => {
            let put = role == "put-and-hang";
            let mut mem = pattern(seed, len);
            let addr = mem.as_ptr() as u64;
            let buf = lib.register_host(&mut mem).unwrap();
            handshake(&s3, &lib, &key);
            let dir = if put { Direction::Put } else { Direction::Get };
            let token = buf.token(dir, 0, len).unwrap();
            let gate = Gate::responder(addr, 2);
            let method = if put { Method::PUT } else { Method::GET };
            std::thread::spawn(move || {
                let a = S3::new(&url).send(method, &key, &[(TOKEN, &token)], Vec::new(), true);
                println!("the transfer ended before the kill: {}", a.status);
            });
            assert!(
                gate.reached(LONG).is_some(),
                "the server's transfer never reached the buffer"
            );
            println!("{CHILD_READY}");
            // Held mid-transfer until the test kills this process.
            loop {
                std::thread::park();
            }
        }
        // PUT then GET, byte-exact.
        "put-get" => {
            let data = pattern(seed, len);
            let mut mem = data.clone();
            {
                let buf = lib.register_host(&mut mem).unwrap();
                let mut ops = RdmaOps::new(&s3, Method::PUT, &key);
                buf.put(0, len, &mut ops).unwrap();
                assert_eq!(ops.last.as_ref().unwrap().reply().as_deref(), Some("200"));
            }
            let mut back = vec![0u8; len];
            {
                let buf = lib.register_host(&mut back).unwrap();
                let mut ops = RdmaOps::new(&s3, Method::GET, &key);
                buf.get(0, len, &mut ops).unwrap();
                assert_eq!(ops.last.as_ref().unwrap().reply().as_deref(), Some("200"));
            }
            assert!(back == data, "GET of {key} is not what was PUT");
            println!("{CHILD_READY}");
        }
        other => panic!("unknown child role {other}"),
    }
}

fn child_env(url: &str, key: &str, len: usize, seed: u64) -> Vec<(&'static str, String)> {
    vec![
        ("HIPOBJ_TEST_URL", url.to_string()),
        ("HIPOBJ_TEST_KEY", key.to_string()),
        ("HIPOBJ_TEST_LEN", len.to_string()),
        ("HIPOBJ_TEST_SEED", seed.to_string()),
    ]
}

/// After a client died: the server is up and healthy, and a new client
/// transfers at once.
fn server_still_serves(server: &mut Server, s3: &S3, key: &str) {
    assert!(server.alive(), "the server process died");
    assert!(server.healthy(), "the server is not healthy");
    let lib = client();
    let data = pattern(99, 3 << 20);
    let mut mem = data.clone();
    let buf = lib.register_host(&mut mem).unwrap();
    let mut ops = RdmaOps::new(s3, Method::PUT, key);
    buf.put(0, data.len(), &mut ops).unwrap();
    drop(buf);
    let mut back = vec![0u8; data.len()];
    let buf = lib.register_host(&mut back).unwrap();
    let mut ops = RdmaOps::new(s3, Method::GET, key);
    buf.get(0, data.len(), &mut ops).unwrap();
    drop(buf);
    assert!(back == data, "a new client's transfer after the kill");
}

#[test]
fn a_client_killed_mid_put_leaves_no_object_and_the_server_serves_on() {
    let mut server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 64 << 20;
    let mut child = spawn_child(
        concat!(module_path!(), "::child_client_main"),
        "put-and-hang",
        &child_env(&server.url, "/bkt/killed", len, 10),
    );
    assert!(
        wait_ready(&mut child),
        "the child did not get its PUT held mid-transfer"
    );
    child.kill().unwrap(); // SIGKILL, mid-transfer
    child.wait().unwrap();
    server_still_serves(&mut server, &s3, "/bkt/next");
    // The server's transfer for the dead client ends, in failure (its
    // peer is silent), and stores nothing.
    s3.wait_metric(
        TRANSFERS,
        &[("op", "PutObject"), ("result", "error")],
        |n| n >= 1.0,
    );
    assert_absent(&s3, "/bkt/killed");
    assert!(server.alive() && server.healthy());
}

#[test]
fn a_client_killed_mid_get_leaves_the_object_and_the_server_serves_on() {
    let mut server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 64 << 20;
    let data = pattern(11, len);
    // Stored by RDMA (quicker than a signed HTTP body of this size).
    {
        let lib = client();
        let mut mem = data.clone();
        let buf = lib.register_host(&mut mem).unwrap();
        buf.put(0, len, &mut RdmaOps::new(&s3, Method::PUT, "/bkt/big"))
            .unwrap();
    }
    let mut child = spawn_child(
        concat!(module_path!(), "::child_client_main"),
        "get-and-hang",
        &child_env(&server.url, "/bkt/big", len, 12),
    );
    assert!(
        wait_ready(&mut child),
        "the child did not get its GET held mid-transfer"
    );
    child.kill().unwrap(); // SIGKILL, mid-transfer
    child.wait().unwrap();
    server_still_serves(&mut server, &s3, "/bkt/next");
    // The server's transfer for the dead client ends, in failure; the
    // object is untouched.
    s3.wait_metric(
        TRANSFERS,
        &[("op", "GetObject"), ("result", "error")],
        |n| n >= 1.0,
    );
    assert_object(&s3, "/bkt/big", &data);
    assert!(server.alive() && server.healthy());
}

#[test]
fn four_client_processes_put_and_get_at_once() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let len = 16 << 20;
    let mut children: Vec<_> = (0..4u64)
        .map(|i| {
            spawn_child(
                concat!(module_path!(), "::child_client_main"),
                "put-get",
                &child_env(&server.url, &format!("/bkt/c{i}"), len, 20 + i),
            )
        })
        .collect();
    for (i, c) in children.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(status.success(), "child {i}: {status}");
    }
    for i in 0..4u64 {
        assert_object(&s3, &format!("/bkt/c{i}"), &pattern(20 + i, len));
    }
}

#[test]
fn a_transfer_token_on_an_operation_rdma_does_not_serve_is_501() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let previous = pattern(13, 4096);
    s3.put_plain("/bkt/o", previous.clone());
    let lib = client();
    handshake(&s3, &lib, "/bkt");
    let mut mem = vec![0x3cu8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        // A token sets the client QP's access for its direction: mint the
        // PUT one first so the GET one is the last.
        let put = buf.token(Direction::Put, 0, 4096).unwrap();
        let get = buf.token(Direction::Get, 0, 4096).unwrap();
        let copy = ("x-amz-copy-source", "/bkt/o");
        let cases = [
            (Method::DELETE, "/bkt/o", get.as_str(), None),
            (Method::GET, "/bkt", get.as_str(), None),
            (Method::GET, "/bkt?list-type=2", get.as_str(), None),
            (Method::HEAD, "/bkt/o", get.as_str(), None),
            (Method::PUT, "/bkt/copy", put.as_str(), Some(copy)),
            (Method::POST, "/bkt/o?uploads", put.as_str(), None),
        ];
        for (method, path, token, extra) in cases {
            let mut h: Vec<(&str, &str)> = extra.into_iter().collect();
            h.push((TOKEN, token));
            let a = s3.send(method.clone(), path, &h, Vec::new(), true);
            let what = format!("{method} {path}");
            if method == Method::HEAD {
                // A HEAD answer has no body to carry the code.
                assert_eq!(a.status, 501, "{what}");
                assert_eq!(a.reply().as_deref(), Some("501"), "{what}");
            } else {
                assert_error(&a, 501, "NotImplemented", Some("501"), &what);
            }
        }
        // The pair is still good for a GET.
        let a = s3.send(Method::GET, "/bkt/o", &[(TOKEN, &get)], Vec::new(), true);
        assert_eq!(a.status, 200, "{}", a.text());
    }
    assert_eq!(mem, previous);
    assert_object(&s3, "/bkt/o", &previous);
    assert_absent(&s3, "/bkt/copy");
    // The POST ?uploads created no upload.
    let uploads = s3.get_plain("/bkt?uploads");
    assert_eq!(uploads.status, 200, "{}", uploads.text());
    assert!(!uploads.text().contains("<UploadId>"), "{}", uploads.text());
}

#[test]
fn a_handshake_token_on_any_method_is_200_with_the_server_token_and_does_nothing() {
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");
    let previous = pattern(14, 4096);
    s3.put_plain("/bkt/o", previous.clone());
    let lib = client();
    let cases = [
        (Method::HEAD, "/bkt/missing"),
        (Method::HEAD, "/bkt"),
        (Method::GET, "/bkt"),
        (Method::GET, "/bkt/o"),
        (Method::PUT, "/bkt/new"),
        (Method::PUT, "/bkt/o"),
        (Method::DELETE, "/bkt/o"),
        (Method::DELETE, "/bkt"),
        (Method::POST, "/bkt/o?uploads"),
    ];
    for (method, path) in cases {
        let token = lib.handshake_token().unwrap();
        let a = s3.send(method.clone(), path, &[(TOKEN, &token)], Vec::new(), true);
        let what = format!("{method} {path}");
        assert_eq!(a.status, 200, "{what}: {}", a.text());
        assert!(a.body.is_empty(), "{what}");
        let reply = a.reply().unwrap();
        assert!(reply.starts_with("200:"), "{what}: {reply}");
        match Reply::parse(&reply).unwrap() {
            Reply::Peer(t) => {
                assert_eq!(t.transport, Transport::Rc, "{what}");
                assert!(t.is_handshake(), "{what}");
                assert_eq!(t.gid, Gid::from_ipv4(Ipv4Addr::LOCALHOST), "{what}");
            }
            r => panic!("{what}: {r:?}"),
        }
        lib.complete_handshake(&reply).unwrap();
    }
    assert_absent(&s3, "/bkt/new");
    assert_object(&s3, "/bkt/o", &previous);
    let list = s3.get_plain("/bkt");
    assert_eq!(list.status, 200);
    assert!(list.text().contains("<Key>o</Key>"), "{}", list.text());
    assert!(!list.text().contains("<Key>new</Key>"), "{}", list.text());
    // The POST ?uploads created no upload.
    let uploads = s3.get_plain("/bkt?uploads");
    assert_eq!(uploads.status, 200, "{}", uploads.text());
    assert!(!uploads.text().contains("<UploadId>"), "{}", uploads.text());
}
