//! Comparing Rust declarations of a C ABI with the real C header.
//!
//! Each [`Check`] is a C expression (a size, an alignment, an offset, an
//! enumerator, a constant) and the value the Rust side says. [`compare`]
//! generates one C program that includes the header and prints every
//! expression, compiles and runs it, and returns every mismatch, so one
//! run reports them all. Used by the layout tests of the verbs and mlx5dv
//! mirrors (`hipobj-fabric`) and of `include/hipobj.h` (`hipobj-client`).

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// One value to compare.
#[derive(Clone, Debug)]
pub struct Check {
    /// What a mismatch is reported as.
    pub label: String,
    /// The C expression that computes the value.
    pub c_expr: String,
    /// What the Rust declarations say.
    pub rust: i128,
    /// Whether the C value is printed as signed (`long long`) rather than
    /// unsigned (`unsigned long long`).
    pub signed: bool,
}

/// The checks of one header.
#[derive(Clone, Debug, Default)]
pub struct Checks(Vec<Check>);

impl Checks {
    /// An unsigned value: `c_expr` is cast to `unsigned long long`.
    pub fn add(&mut self, label: impl Into<String>, c_expr: impl Into<String>, rust: u64) {
        self.push(label.into(), c_expr.into(), i128::from(rust), false);
    }

    /// A signed value: `c_expr` is cast to `long long`.
    pub fn add_signed(&mut self, label: impl Into<String>, c_expr: impl Into<String>, rust: i64) {
        self.push(label.into(), c_expr.into(), i128::from(rust), true);
    }

    fn push(&mut self, label: String, c_expr: String, rust: i128, signed: bool) {
        self.0.push(Check {
            label,
            c_expr,
            rust,
            signed,
        });
    }

    /// `sizeof` and `_Alignof` of a named C type.
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

    /// `sizeof` and `_Alignof` of a member (for the C structs and unions
    /// that have no name of their own), e.g. `wr.rdma` of
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

    /// `offsetof(c_type, member)`.
    pub fn offset(&mut self, c_type: &str, member: &str, rust: usize) {
        self.add(
            format!("offsetof({c_type}, {member})"),
            format!("offsetof({c_type}, {member})"),
            rust as u64,
        );
    }

    /// An unsigned constant expression, labelled by itself.
    pub fn constant(&mut self, c_expr: &str, rust: u64) {
        self.add(c_expr, c_expr, rust);
    }

    /// An enumerator or a `#define`d number that may be negative.
    pub fn value(&mut self, name: &str, rust: i64) {
        self.add_signed(name, name, rust);
    }

    /// The checks, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &Check> {
        self.0.iter()
    }

    /// How many checks there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How to build the C program.
#[derive(Clone, Copy, Debug)]
pub struct Program<'a> {
    /// The operand of `#include`: `<infiniband/verbs.h>` or `"/path/x.h"`.
    pub include: &'a str,
    /// The C compiler.
    pub cc: &'a str,
    /// Its flags (before `-o`).
    pub flags: &'a [&'a str],
}

/// The C source that prints every check as `index value`, one per line.
pub fn source(checks: &Checks, include: &str) -> String {
    let mut src =
        format!("#include <stddef.h>\n#include <stdio.h>\n#include {include}\nint main(void) {{\n");
    for (i, ch) in checks.0.iter().enumerate() {
        let (fmt, ty) = if ch.signed {
            ("%lld", "long long")
        } else {
            ("%llu", "unsigned long long")
        };
        let _ = writeln!(
            src,
            "    printf(\"%d {fmt}\\n\", {i}, ({ty})({}));",
            ch.c_expr
        );
    }
    src.push_str("    return 0;\n}\n");
    src
}

/// Builds the program in `dir`, runs it and returns one line per mismatch
/// (`label: C x but Rust y`); `Err` when it does not compile or run.
pub fn compare(checks: &Checks, program: Program<'_>, dir: &Path) -> Result<Vec<String>, String> {
    let c_file = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c_file, source(checks, program.include))
        .map_err(|e| format!("writing {}: {e}", c_file.display()))?;
    let out = Command::new(program.cc)
        .args(program.flags)
        .arg("-o")
        .arg(&exe)
        .arg(&c_file)
        .output()
        .map_err(|e| format!("running {}: {e}", program.cc))?;
    if !out.status.success() {
        return Err(format!(
            "compiling {} failed:\n{}",
            c_file.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("running the layout program: {e}"))?;
    if !run.status.success() {
        return Err(format!("the layout program failed: {}", run.status));
    }
    let printed = parse(&String::from_utf8_lossy(&run.stdout))?;
    if printed.len() != checks.len() {
        return Err(format!(
            "the layout program printed {} values for {} checks",
            printed.len(),
            checks.len()
        ));
    }
    Ok(checks
        .0
        .iter()
        .enumerate()
        .filter(|(i, ch)| printed[i] != ch.rust)
        .map(|(i, ch)| format!("{}: C {} but Rust {}", ch.label, printed[&i], ch.rust))
        .collect())
}

fn parse(stdout: &str) -> Result<BTreeMap<usize, i128>, String> {
    stdout
        .lines()
        .map(|l| {
            let bad = || format!("a line that is not `index value`: {l:?}");
            let (i, v) = l.split_once(' ').ok_or_else(bad)?;
            Ok((i.parse().map_err(|_| bad())?, v.parse().map_err(|_| bad())?))
        })
        .collect()
}

/// [`compare`], failing the calling test on any mismatch or build error,
/// and printing how many values were checked against `what`.
pub fn assert_matches(checks: &Checks, program: Program<'_>, dir: &Path, what: &str) {
    match compare(checks, program, dir) {
        Err(e) => panic!("{e}"),
        Ok(bad) => {
            println!(
                "checked {} sizes, alignments, offsets and values against {what}",
                checks.len()
            );
            assert!(bad.is_empty(), "ABI mismatches:\n{}", bad.join("\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_prints_signed_and_unsigned_values_by_index() {
        let mut c = Checks::default();
        c.layout("int", 4, 4);
        c.value("EINVAL", -22);
        let src = source(&c, "<errno.h>");
        assert!(src.contains("#include <errno.h>"));
        assert!(src.contains("printf(\"%d %llu\\n\", 0, (unsigned long long)(sizeof(int)));"));
        assert!(src.contains("printf(\"%d %lld\\n\", 2, (long long)(EINVAL));"));
    }

    #[test]
    fn a_wrong_value_is_reported_and_the_right_ones_are_not() {
        if Command::new("cc").arg("--version").output().is_err() {
            eprintln!("skipped: no C compiler");
            return;
        }
        let dir = std::env::temp_dir().join(format!("hipobj-c-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Checks::default();
        c.layout("long long", 8, 8);
        c.value("(-1)", -1);
        c.add("wrong", "sizeof(char)", 2);
        let program = Program {
            include: "<stdint.h>",
            cc: "cc",
            flags: &["-std=c11"],
        };
        let bad = compare(&c, program, &dir).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(bad, vec!["wrong: C 1 but Rust 2".to_string()]);
    }
}
