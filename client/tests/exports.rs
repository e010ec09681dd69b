//! `libhipobj.so` exports the C API's `hipObj*` functions and nothing
//! else.

#![forbid(unsafe_code)]

use hipobj::testing::c_programs::cdylib;
use std::process::Command;

/// Every defined dynamic symbol as `(type, name)`, version names dropped.
fn defined_dynamic_symbols() -> Vec<(String, String)> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(cdylib())
        .output()
        .expect("run nm (binutils)");
    assert!(
        out.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("nm prints UTF-8")
        .lines()
        .filter_map(|line| {
            // `<value> <type> <name>`; the value is absent for some types.
            let mut fields = line.split_whitespace().rev();
            let name = fields.next()?;
            let kind = fields.next()?;
            let name = name.split('@').next().unwrap_or(name);
            Some((kind.to_string(), name.to_string()))
        })
        .collect()
}

/// The functions of `include/hipobj.h`.
const API: &[&str] = &[
    "hipObjBufDeregister",
    "hipObjBufRegister",
    "hipObjBufRegisterHost",
    "hipObjBufSync",
    "hipObjCompleteRdmaHandshake",
    "hipObjGet",
    "hipObjGetErrorString",
    "hipObjGetRdmaHandshakeToken",
    "hipObjGetRdmaToken",
    "hipObjGetRdmaTokenAt",
    "hipObjGetV2",
    "hipObjGetVersion",
    "hipObjGetVersionString",
    "hipObjInit",
    "hipObjInitV2",
    "hipObjParseRdmaReply",
    "hipObjPut",
    "hipObjPutRdmaToken",
    "hipObjPutV2",
    "hipObjShutdown",
    "hipObjTokenClientNic",
];

#[test]
fn only_hipobj_symbols_are_exported() {
    let leaked: Vec<_> = defined_dynamic_symbols()
        .into_iter()
        // `A`: absolute symbols, such as version definitions.
        .filter(|(kind, name)| kind != "A" && !name.starts_with("hipObj"))
        .collect();
    assert!(
        leaked.is_empty(),
        "libhipobj.so exports more than hipObj*: {leaked:?}"
    );
}

#[test]
fn every_api_function_is_exported_as_code() {
    let symbols = defined_dynamic_symbols();
    for f in API {
        assert!(
            symbols.iter().any(|(kind, name)| kind == "T" && name == f),
            "{f} is not exported as a function: {symbols:?}"
        );
    }
    let extra: Vec<_> = symbols
        .iter()
        .filter(|(kind, name)| kind != "A" && !API.contains(&name.as_str()))
        .collect();
    assert!(extra.is_empty(), "exports beyond the header: {extra:?}");
}

#[test]
fn the_header_declares_every_export() {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/hipobj.h"))
        .expect("read include/hipobj.h");
    for f in API {
        assert!(
            header.contains(&format!(" {f}(")),
            "include/hipobj.h does not declare {f}"
        );
    }
}

/// The test doubles (`hipobj::testing`, feature `testing`) never reach the
/// shared library: nothing exported calls them, so even a build with the
/// feature (as this test's) leaves them out. `.ci/run` checks a default
/// build's `libhipobj.a`, which keeps every function, for them too.
#[test]
fn the_test_doubles_are_not_in_the_library() {
    let out = Command::new("nm")
        .arg("-C")
        .arg(cdylib())
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed");
    let symbols = String::from_utf8_lossy(&out.stdout);
    let doubles: Vec<_> = symbols
        .lines()
        .filter(|l| {
            [
                "hipobj::testing::",
                "FakeHip",
                "FakeTopology",
                "ServerPeer",
                "GpuView",
            ]
            .iter()
            .any(|d| l.contains(d))
        })
        .collect();
    assert!(
        doubles.is_empty(),
        "test doubles in libhipobj.so: {doubles:?}"
    );
}
