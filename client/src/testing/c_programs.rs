//! C test programs against `libhipobj.so`: where cargo put the library,
//! compiling a program against `include/hipobj.h` and it, and running one,
//! under valgrind when [`ENV_VALGRIND`] is set (as `.ci/run` does for every
//! C program the tests build).
//!
//! Used by the client's tests (`c_abi.rs`, `exports.rs`) and by the test
//! server's (`c_client.rs`); everything is found from the running test
//! binary, `target/<profile>/deps/<test>-<hash>`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to `1` to run every C test program under valgrind (memcheck, full
/// leak check; an error or a definite leak fails the program).
pub const ENV_VALGRIND: &str = "HIPOBJ_C_TESTS_VALGRIND";

/// The exit status valgrind gives a program in which it found an error.
pub const VALGRIND_ERROR_EXIT: i32 = 97;

/// Strict warnings for the programs: any warning fails the build.
pub const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// `target/<profile>/deps`, where the running test binary is.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// Where cargo put `libhipobj.so`: `target/<profile>/deps` when it was built
/// for the tests (as the package or a dev-dependency), `target/<profile>`
/// after a `cargo build`; the newer of the two when both are there (a
/// `cargo build` from before the last change leaves a stale copy).
pub fn lib_dir() -> PathBuf {
    let deps = deps_dir();
    let profile = deps.parent().expect("target/<profile>");
    let modified = |d: &Path| {
        std::fs::metadata(d.join("libhipobj.so"))
            .and_then(|m| m.modified())
            .ok()
    };
    [deps.as_path(), profile]
        .into_iter()
        .filter_map(|d| Some((modified(d)?, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d.to_path_buf())
        .unwrap_or_else(|| {
            panic!(
                "no libhipobj.so in {} or {}",
                profile.display(),
                deps.display()
            )
        })
}

/// `libhipobj.so` itself.
pub fn cdylib() -> PathBuf {
    lib_dir().join("libhipobj.so")
}

/// `target/c-tests`, created: where the programs are left.
pub fn out_dir() -> PathBuf {
    let dir = deps_dir()
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile> has a parent")
        .join("c-tests");
    std::fs::create_dir_all(&dir).expect("create target/c-tests");
    dir
}

/// `client/include`, where `hipobj.h` is.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// Compiles `source` with `compiler` (`gcc`, `g++`) in language standard
/// `std` and the [`STRICT`] flags, with `include/` and `includes` on the
/// search path, linked to libhipobj with an rpath to it, into
/// `target/c-tests/<name>`; panics with the compiler's output on failure.
pub fn build(compiler: &str, std: &str, source: &Path, includes: &[&Path], name: &str) -> PathBuf {
    let lib = lib_dir();
    let exe = out_dir().join(name);
    let mut cmd = Command::new(compiler);
    cmd.arg(format!("-std={std}"))
        .args(STRICT)
        .arg("-I")
        .arg(include_dir());
    for dir in includes {
        cmd.arg("-I").arg(dir);
    }
    let out = cmd
        .arg(source)
        .arg(format!("-L{}", lib.display()))
        .arg("-lhipobj")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        source.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Whether [`ENV_VALGRIND`] asks for valgrind.
pub fn under_valgrind() -> bool {
    std::env::var(ENV_VALGRIND).is_ok_and(|v| v == "1")
}

/// A command that runs the program `exe` against [`lib_dir`]'s library:
/// under valgrind when [`ENV_VALGRIND`] is `1` (an error or a definite
/// leak exits with [`VALGRIND_ERROR_EXIT`]; threads the software provider
/// leaves running at exit only show as "possibly lost").
///
/// `LD_LIBRARY_PATH` names the library's directory: cargo's own would come
/// before the program's rpath (a `DT_RUNPATH`) and could load a stale
/// `libhipobj.so` an older `cargo build` left in `target/<profile>`.
pub fn command(exe: &Path) -> Command {
    let mut cmd = if under_valgrind() {
        let mut v = Command::new("valgrind");
        v.arg("--quiet")
            .arg(format!("--error-exitcode={VALGRIND_ERROR_EXIT}"))
            .arg("--leak-check=full")
            .arg("--errors-for-leak-kinds=definite")
            .arg(exe);
        v
    } else {
        Command::new(exe)
    };
    cmd.env("LD_LIBRARY_PATH", lib_dir());
    cmd
}
