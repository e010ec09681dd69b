//! Comparing the Rust ABI declarations with a real C header, through
//! `hipobj-c-layout` (one C program prints every check): [`run`] adds the
//! skip-or-fail rule for a missing header.

pub use hipobj_c_layout::Checks;
use hipobj_c_layout::Program;

/// Compiles a program including `header` that prints every check, runs
/// it and fails the test on any mismatch; skipped (or failed, with
/// `REQUIRE_IBVERBS_HEADERS`) without the header or a compiler.
pub fn run(checks: &Checks, header: &str, tag: &str) {
    let dir = super::temp_dir(tag);
    if let Err(why) = super::header_present_for(&dir, header) {
        super::skip_or_fail(tag, &why);
        return;
    }
    let include = format!("<{header}>");
    let cc = super::cc();
    let program = Program {
        include: &include,
        cc: &cc,
        flags: &["-std=gnu11", "-Wall"],
    };
    hipobj_c_layout::assert_matches(checks, program, &dir, &include);
}
