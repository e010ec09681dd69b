//! A C program moves objects by hipobj-rc-v2 to and from the real test
//! server, through `hipobj.h` only (`hipObjInitV2`, `hipObjPutV2`,
//! `hipObjGetV2` and the `hipObjOpsV2_t` callbacks).
//!
//! `tests/c/v2_client.c` is compiled with gcc (strict flags) against
//! `client/include/hipobj.h` and `libhipobj.so`, and run with the software
//! RDMA provider. A C program has no S3 SDK to sign requests with, so this
//! test plays the application's HTTP client: a relay thread on 127.0.0.1
//! takes one line per control request from the program's callbacks
//! (`PREPARE ...`, `READY ...`, `CANCEL ...`; the grammar is in the C
//! file), sends it as a SigV4-signed, body-less `POST` (UNSIGNED-PAYLOAD,
//! every `x-amz-rdma-*` header signed) to `/.hipobj-rc/prepare`, `/ready`
//! or `/cancel`, and answers the response's fields as one line.
//!
//! The binary is left in `<target>/c-tests/v2_client`; with
//! `HIPOBJ_C_TESTS_VALGRIND=1` (as `.ci/run` sets for a second run) it runs
//! under valgrind (`hipobj::testing::c_programs`).

#![forbid(unsafe_code)]

mod c_relay;
mod common;

use c_relay::{build_program, run_program, Relay};
use common::{pattern, Server, S3};
use hipobj_wire::rc_v2::{
    CANCEL_PATH, H_BYTES, H_CHECKSUM, H_COOKIE, H_ETAG, H_MR_ADDR, H_MR_RKEY, H_OFFSET, H_OP,
    H_PROTOCOL, H_PROTOCOL_STATUS, H_PSN, H_QPN, H_REPLY, H_SESSION, H_SIZE, H_TARGET, H_TOKEN,
    H_VERSION_ID, PREPARE_PATH, PROTOCOL, READY_PATH, UNSUPPORTED,
};
use http::Method;
use std::sync::Mutex;

/// Object sizes: a byte, a page, and a few MiB.
const SIZES: [usize; 3] = [1, 4096, (3 << 20) + 7];
/// The program PUTs `pattern(PUT_SEED_BASE + size)` (as in v2_client.c).
const PUT_SEED_BASE: u64 = 1 << 32;

// ---- The relay ---------------------------------------------------------

/// One control request the relay made.
#[derive(Debug, Clone)]
struct Exchange {
    kind: String,
    status: u16,
    echo: bool,
}

/// A field of an answer line: the value, or `-`.
fn field(v: Option<String>) -> String {
    match v {
        Some(s) if !s.is_empty() && !s.contains([' ', '\n']) => s,
        _ => "-".to_string(),
    }
}

/// Sends one control request and answers its line.
fn control(s3: &S3, fields: &[&str], log: &Mutex<Vec<Exchange>>) -> String {
    let mut h: Vec<(&str, String)> = vec![(H_PROTOCOL, PROTOCOL.to_string())];
    let (kind, path) = match fields {
        ["PREPARE", method, target, token, psn, cookie, size, offset] => {
            h.push((H_OP, method.to_string()));
            h.push((H_TARGET, target.to_string()));
            h.push((H_TOKEN, token.to_string()));
            h.push((H_PSN, psn.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            h.push((H_SIZE, size.to_string()));
            if *offset != "0" {
                h.push((H_OFFSET, offset.to_string()));
            }
            ("PREPARE", PREPARE_PATH)
        }
        ["READY", session, cookie, qpn, addr, rkey] => {
            h.push((H_SESSION, session.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            h.push((H_QPN, qpn.to_string()));
            if *addr != "-" {
                h.push((H_MR_ADDR, addr.to_string()));
                h.push((H_MR_RKEY, rkey.to_string()));
            }
            ("READY", READY_PATH)
        }
        ["CANCEL", session, cookie] => {
            h.push((H_SESSION, session.to_string()));
            h.push((H_COOKIE, cookie.to_string()));
            ("CANCEL", CANCEL_PATH)
        }
        _ => {
            eprintln!("relay: a malformed line {fields:?}");
            return "0".to_string();
        }
    };
    let headers: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = s3.send(Method::POST, path, &headers, Vec::new(), true);
    let status = a.status.as_u16();
    let echo = a.header(H_PROTOCOL).as_deref() == Some(PROTOCOL);
    log.lock().unwrap().push(Exchange {
        kind: kind.to_string(),
        status,
        echo,
    });
    let flag = |b: bool| if b { "1" } else { "0" };
    match kind {
        "PREPARE" => {
            let unsupported = a
                .header(H_PROTOCOL_STATUS)
                .is_some_and(|v| v.eq_ignore_ascii_case(UNSUPPORTED));
            let token = a
                .header(H_REPLY)
                .and_then(|r| r.strip_prefix("200:").map(str::to_string));
            format!(
                "{status} {} {} {} {} {} {} {}",
                flag(echo),
                flag(unsupported),
                field(token),
                field(a.header(H_SESSION)),
                field(a.header(H_PSN)),
                field(a.header(H_MR_ADDR)),
                field(a.header(H_MR_RKEY)),
            )
        }
        "READY" => format!(
            "{status} {} {} {} {} {} {}",
            flag(echo),
            a.header(H_BYTES).unwrap_or_else(|| "0".into()),
            field(a.header(H_COOKIE)),
            field(a.header(H_ETAG)),
            field(a.header(H_VERSION_ID)),
            field(
                a.header(H_CHECKSUM)
                    .and_then(|c| c.strip_prefix("CRC64NVME ").map(str::to_string))
            ),
        ),
        _ => status.to_string(),
    }
}

// ---- The test ----------------------------------------------------------

#[test]
fn c_program_moves_objects_by_rc_v2_through_the_test_server() {
    let exe = build_program("v2_client");
    let server = Server::start(0);
    let s3 = S3::new(&server.url);
    s3.create_bucket("bkt");

    let relay = Relay::start(&server.url, control);
    let mut argv = vec![relay.port.to_string()];
    argv.extend(SIZES.iter().map(|s| s.to_string()));
    let outcome = run_program(&exe, &argv);
    let log = relay.finish();
    let trace: String = log
        .iter()
        .map(|e| format!("  {} -> {} (echo {})\n", e.kind, e.status, e.echo))
        .collect();
    outcome.assert_ok("v2_client", &trace);
    // Every answer echoed the protocol; the missing key was the only
    // refusal of each size (at PREPARE or at READY), and a CANCEL follows
    // only a READY refused.
    assert!(log.iter().all(|e| e.echo), "{trace}");
    let refused = log
        .iter()
        .filter(|e| e.kind != "CANCEL" && e.status != 200)
        .count();
    assert_eq!(refused, SIZES.len(), "{trace}");
    for (i, e) in log.iter().enumerate() {
        if e.kind == "CANCEL" {
            let before = &log[i - 1];
            assert!(before.kind == "READY" && before.status != 200, "{trace}");
        }
    }

    // What the program stored, read back over plain HTTP.
    for size in SIZES {
        let a = s3.get_plain(&format!("/bkt/v2-obj-{size}"));
        assert_eq!(a.status, 200, "GET v2-obj-{size}: {}", a.text());
        assert!(
            a.body == pattern(PUT_SEED_BASE + size as u64, size),
            "v2-obj-{size}: other bytes"
        );
    }
}
