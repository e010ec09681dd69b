//! Comparing Rust ABI declarations with a real C header: each check is a C
//! expression (a size, an alignment, an offset, a constant) and the value
//! the Rust side says; [`run`] compiles one C program that prints them all
//! and reports every mismatch.

use std::collections::BTreeMap;
use std::process::Command;

/// One value to compare: a label, the C expression that computes it, and
/// what the Rust declarations say.
pub struct Check {
    label: String,
    c_expr: String,
    rust: u64,
}

/// The checks of one header.
#[derive(Default)]
pub struct Checks(pub Vec<Check>);

impl Checks {
    pub fn add(&mut self, label: impl Into<String>, c_expr: impl Into<String>, rust: u64) {
        self.0.push(Check {
            label: label.into(),
            c_expr: c_expr.into(),
            rust,
        });
    }

    /// sizeof and _Alignof of a named C type.
    pub fn layout(&mut self, c_type: &str, size: usize, align: usize) {
        self.add(
            format!("sizeof({c_type})"),
            format!("sizeof({c_type})"),
            size as u64,
        );
        self.add(
            format!("_Alignof({c_type})"),
            format!("_Alignof({c_type})"),
            align as u64,
        );
    }

    /// sizeof and _Alignof of a member expression (for the C structs and
    /// unions that have no name of their own), e.g. `wr.rdma` of
    /// `struct ibv_send_wr`.
    pub fn member_layout(&mut self, c_type: &str, member: &str, size: usize, align: usize) {
        let e = format!("((({c_type} *)0)->{member})");
        self.add(
            format!("sizeof({c_type}.{member})"),
            format!("sizeof{e}"),
            size as u64,
        );
        self.add(
            format!("_Alignof({c_type}.{member})"),
            format!("_Alignof(__typeof__{e})"),
            align as u64,
        );
    }

    pub fn offset(&mut self, c_type: &str, c_member: &str, rust: usize) {
        self.add(
            format!("offsetof({c_type}, {c_member})"),
            format!("offsetof({c_type}, {c_member})"),
            rust as u64,
        );
    }

    pub fn constant(&mut self, c_expr: &str, rust: u64) {
        self.add(c_expr, format!("(unsigned long long)({c_expr})"), rust);
    }
}

/// Compiles a program including `header` that prints every check, runs
/// it and fails the test on any mismatch; skipped (or failed, with
/// `REQUIRE_IBVERBS_HEADERS`) without the header or a compiler.
pub fn run(checks: &Checks, header: &str, tag: &str) {
    let dir = super::temp_dir(tag);
    if let Err(why) = super::header_present_for(&dir, header) {
        super::skip_or_fail(tag, &why);
        return;
    }
    let mut src = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\n\
         int main(void) {{\n"
    );
    for (i, ch) in checks.0.iter().enumerate() {
        src.push_str(&format!(
            "    printf(\"%d %llu\\n\", {i}, (unsigned long long)({}));\n",
            ch.c_expr
        ));
    }
    src.push_str("    return 0;\n}\n");
    let c_file = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c_file, &src).expect("write layout.c");
    let out = Command::new(super::cc())
        .args(["-std=gnu11", "-Wall", "-o"])
        .arg(&exe)
        .arg(&c_file)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {} failed:\n{}",
        c_file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the layout program");
    assert!(run.status.success(), "the layout program failed");
    let printed: BTreeMap<usize, u64> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| {
            let (i, v) = l.split_once(' ').expect("index value");
            (i.parse().unwrap(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(printed.len(), checks.0.len(), "one line per check");
    let mut bad = Vec::new();
    for (i, ch) in checks.0.iter().enumerate() {
        let c_value = printed[&i];
        if c_value != ch.rust {
            bad.push(format!("{}: C {} but Rust {}", ch.label, c_value, ch.rust));
        }
    }
    println!(
        "checked {} sizes, alignments, offsets and constants against <{header}>",
        checks.0.len()
    );
    assert!(bad.is_empty(), "ABI mismatches:\n{}", bad.join("\n"));
}
