//! Runs the real `hipobj` binary against the vectors of `docs/protocol.md` ("Test vectors").

#![forbid(unsafe_code)]

use std::process::{Command, Output};

use serde_json::{json, Value};

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
const SUFFIX: &str = ":00007f0000001000:0000000000001000";

fn hipobj(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hipobj"))
        .args(args)
        .output()
        .expect("run hipobj")
}

/// Runs a command that must succeed with exactly one line of JSON.
fn json_of(args: &[&str]) -> Value {
    let out = hipobj(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    serde_json::from_str(&stdout).unwrap()
}

/// Runs a command that must fail with exit status 2 and return its stderr.
fn invalid(args: &[&str]) -> String {
    let out = hipobj(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

fn v1_json() -> Value {
    json!({
        "dialect": "hipobj", "transport": "rc", "qp_num": 0x0102_0304u32,
        "gid": "fe000000000000000000000000000080", "rkey": 0xa5a5_a5a5u32,
        "addr": u64::MAX, "len": 1, "port": 255, "lid": 0xabcd,
        "client_ip": null, "suffix": null
    })
}

fn v2_json() -> Value {
    json!({
        "dialect": "hipobj", "transport": "rc", "qp_num": 42,
        "gid": "00000000000000000000000000000000", "rkey": 0xdead_beefu32,
        "addr": 0x7f00_0000_1000u64, "len": 4096, "port": 1, "lid": 0,
        "client_ip": null, "suffix": null
    })
}

fn v3_json() -> Value {
    json!({
        "dialect": "hipobj", "transport": "rc", "qp_num": 0,
        "gid": "00000000000000000000ffffc0a8012a", "rkey": 0,
        "addr": 0, "len": 0, "port": 0, "lid": 0,
        "client_ip": "192.168.1.42", "suffix": null
    })
}

fn d_json(addr: u64, len: u64) -> Value {
    json!({
        "dialect": "cuobj", "transport": "dc", "qp_num": 0x01_0203,
        "gid": "0102030405060708090a0b0c0d0e0f10", "rkey": 0x0102_0304,
        "addr": addr, "len": len, "port": null, "lid": 0x0102,
        "client_ip": null, "suffix": null
    })
}

#[test]
fn decode_token_vectors() {
    assert_eq!(json_of(&["token", "decode", V1]), v1_json());
    assert_eq!(json_of(&["token", "decode", V2]), v2_json());
    assert_eq!(json_of(&["token", "decode", V3]), v3_json());
    assert_eq!(json_of(&["token", "decode", &V1.to_uppercase()]), v1_json());
}

#[test]
fn decode_u64_exactly() {
    let v = json_of(&["token", "decode", V1]);
    assert_eq!(v["addr"].as_u64(), Some(u64::MAX));
    let stdout = String::from_utf8(hipobj(&["token", "decode", V1]).stdout).unwrap();
    assert!(stdout.contains("\"addr\":18446744073709551615"), "{stdout}");
}

#[test]
fn decode_descriptor_vectors() {
    assert_eq!(
        json_of(&["token", "decode", D1]),
        d_json(0x0102_0304_0506_0708, 0x0102_0304)
    );
    assert_eq!(json_of(&["token", "decode", D2]), d_json(u64::MAX, 1));
}

#[test]
fn decode_descriptor_without_gid() {
    let d = "0102030405060708:01020304:01020304:0102:010203:0:00000000000000000000000000000000";
    let mut want = d_json(0x0102_0304_0506_0708, 0x0102_0304);
    want["gid"] = Value::Null;
    assert_eq!(json_of(&["token", "decode", d]), want);
}

#[test]
fn decode_descriptor_ipv4_gid() {
    let d = "0000000000001000:00001000:00000001:0000:000001:1:00000000000000000000ffff0a000001";
    let v = json_of(&["token", "decode", d]);
    assert_eq!(v["client_ip"], json!("10.0.0.1"));
    assert_eq!(v["gid"], json!("00000000000000000000ffff0a000001"));
}

#[test]
fn decode_legacy_suffix() {
    let suffix = json!({"addr": 0x7f00_0000_1000u64, "len": 4096});
    let mut want = v2_json();
    want["suffix"] = suffix.clone();
    assert_eq!(
        json_of(&["token", "decode", &format!("{V2}{SUFFIX}")]),
        want
    );
    let mut want = d_json(u64::MAX, 1);
    want["suffix"] = suffix;
    assert_eq!(
        json_of(&["token", "decode", &format!("{D2}{SUFFIX}")]),
        want
    );
}

#[test]
fn decode_rejects() {
    assert_eq!(
        invalid(&["token", "decode", &V1[..87]]),
        "error: invalid x-amz-rdma-token value: token is 87 characters, expected 88\n"
    );
    assert_eq!(
        invalid(&["token", "decode", &format!("{V1}0")]),
        "error: invalid x-amz-rdma-token value: token is 89 characters, expected 88\n"
    );
    assert_eq!(
        invalid(&["token", "decode", &format!("03{}", &V1[2..])]),
        "error: invalid x-amz-rdma-token value: transport byte 0x03 is neither DC (0) nor RC (1)\n"
    );
    assert_eq!(
        invalid(&["token", "decode", &format!("0104g{}", &V1[5..])]),
        "error: invalid x-amz-rdma-token value: non-hex character 'g' at position 4\n"
    );
    for pair in ["+1", " 1", "0x", "g0"] {
        let s = format!("{}{pair}{}", &V1[..10], &V1[12..]);
        assert!(invalid(&["token", "decode", &s]).contains("non-hex character"));
    }
    assert_eq!(
        invalid(&["token", "decode", &format!(" {V1}")]),
        "error: invalid x-amz-rdma-token value: token value has whitespace at position 0; values are not trimmed\n"
    );
    assert_eq!(
        invalid(&["token", "decode", &D1[..80]]),
        "error: invalid x-amz-rdma-token value: cuObject descriptor is 80 characters, expected 81\n"
    );
    assert_eq!(
        invalid(&["token", "decode", &D1.replace(":1:", ":2:")]),
        "error: invalid x-amz-rdma-token value: cuObject descriptor GID present flag is '2', expected '0' or '1'\n"
    );
    assert!(invalid(&["token", "decode", "-1"]).contains("token is 2 characters"));
    assert!(invalid(&["token", "decode", ""]).contains("token value is empty"));
    // Missing argument: clap's usage error, also 2.
    assert!(invalid(&["token", "decode"]).contains("VALUE"));
}

#[test]
fn encode_vectors() {
    let encode = |args: &[&str]| {
        let mut all = vec!["token", "encode"];
        all.extend_from_slice(args);
        let out = hipobj(&all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        encode(&[
            "--transport",
            "rc",
            "--qp-num",
            "0x01020304",
            "--gid",
            "fe000000000000000000000000000080",
            "--rkey",
            "0xa5a5a5a5",
            "--addr",
            "0xffffffffffffffff",
            "--len",
            "1",
            "--port",
            "0xff",
            "--lid",
            "0xabcd",
        ]),
        format!("{V1}\n")
    );
    assert_eq!(
        encode(&[
            "--transport",
            "rc",
            "--qp-num",
            "42",
            "--gid",
            "00000000000000000000000000000000",
            "--rkey",
            "0xdeadbeef",
            "--addr",
            "0x7f0000001000",
            "--len",
            "4096",
        ]),
        format!("{V2}\n")
    );
    assert_eq!(
        encode(&[
            "--transport",
            "rc",
            "--qp-num",
            "0",
            "--gid",
            "00000000000000000000FFFFC0A8012A",
            "--rkey",
            "0",
            "--addr",
            "0",
            "--len",
            "0",
            "--port",
            "0",
        ]),
        format!("{V3}\n")
    );
    let dc = encode(&[
        "--transport",
        "dc",
        "--qp-num",
        "42",
        "--gid",
        "00000000000000000000000000000000",
        "--rkey",
        "3735928559",
        "--addr",
        "139637976731648",
        "--len",
        "4096",
    ]);
    assert_eq!(dc, format!("00{}\n", &V2[2..]));
}

#[test]
fn encode_rejects() {
    let base = [
        "token",
        "encode",
        "--transport",
        "rc",
        "--qp-num",
        "42",
        "--gid",
        "00000000000000000000000000000000",
        "--rkey",
        "1",
        "--addr",
        "0",
        "--len",
        "0",
    ];
    let with = |extra: &[&str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        invalid(&v)
    };
    assert!(with(&["--port", "256"]).contains("\"256\" is too large (at most 255)"));
    assert!(with(&["--lid", "0x10000"]).contains("too large (at most 65535)"));
    assert!(with(&["--port", "+1"]).contains("not a decimal or 0x-prefixed hex number"));
    let mut v = base.to_vec();
    v[3] = "xx";
    assert!(invalid(&v).contains("invalid value 'xx'"));
    let mut v = base.to_vec();
    v[7] = "0000";
    assert!(invalid(&v).contains("expected 32 hex digits"));
    // A required option missing.
    assert!(invalid(&base[..12]).contains("--len"));
}

#[test]
fn reply_forms() {
    let status = |n: u16, success: bool, declined: bool| json!({"form": "status", "status": n, "success": success, "declined": declined, "peer": null});
    assert_eq!(
        json_of(&["reply", "parse", "200"]),
        status(200, true, false)
    );
    assert_eq!(
        json_of(&["reply", "parse", "204"]),
        status(204, true, false)
    );
    assert_eq!(
        json_of(&["reply", "parse", "206"]),
        status(206, true, false)
    );
    assert_eq!(
        json_of(&["reply", "parse", "501"]),
        status(501, false, true)
    );
    assert_eq!(
        json_of(&["reply", "parse", "404"]),
        status(404, false, false)
    );
    assert_eq!(
        json_of(&["reply", "parse", "200\r\n"]),
        status(200, true, false)
    );
    assert_eq!(
        json_of(&["reply", "parse", "ok"]),
        json!({"form": "ok", "status": 200, "success": true, "declined": false, "peer": null})
    );
    assert_eq!(
        json_of(&["reply", "parse", "err"]),
        json!({"form": "err", "status": null, "success": false, "declined": false, "peer": null})
    );
    assert_eq!(
        json_of(&["reply", "parse", &format!("200:{V3}")]),
        json!({"form": "peer", "status": 200, "success": true, "declined": false, "peer": v3_json()})
    );
    // As hipObject's library: 206 may carry a token, and 501 followed by
    // anything is a decline.
    assert_eq!(
        json_of(&["reply", "parse", &format!("206:{V3}")]),
        json!({"form": "peer", "status": 206, "success": true, "declined": false, "peer": v3_json()})
    );
    assert_eq!(
        json_of(&["reply", "parse", "501:not here"]),
        status(501, false, true)
    );
}

#[test]
fn reply_rejects() {
    assert_eq!(
        invalid(&["reply", "parse", &format!("201:{V1}")]),
        "error: invalid x-amz-rdma-reply value: reply prefix \"201\" cannot carry a token: only \"200:\", \"204:\" and \"206:\" do\n"
    );
    assert!(invalid(&["reply", "parse", &format!("0200:{V1}")]).contains("\"0200\""));
    assert!(invalid(&["reply", "parse", &format!("+200:{V1}")]).contains("\"+200\""));
    assert_eq!(
        invalid(&["reply", "parse", &format!("200:{}", &V1[..87])]),
        "error: invalid x-amz-rdma-reply value: reply carries an invalid token: token is 87 characters, expected 88\n"
    );
    assert!(invalid(&["reply", "parse", &format!("200:{V1}0")]).contains("89 characters"));
    assert!(invalid(&["reply", "parse", &format!("200:03{}", &V1[2..])])
        .contains("transport byte 0x03"));
    assert!(invalid(&["reply", "parse", ""]).contains("reply is empty"));
    assert!(invalid(&["reply", "parse", "600"]).contains("status 600 is outside 100 to 599"));
    assert!(invalid(&["reply", "parse", "-200"]).contains("is not ok, err"));
    assert!(invalid(&["reply", "parse", " 200"]).contains("is not ok, err"));
}
