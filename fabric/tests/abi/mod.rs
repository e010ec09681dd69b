//! Helpers for the libibverbs provider's tests: finding the header and a C
//! compiler, and building the fake libibverbs in `fake_libibverbs.c`.
#![allow(dead_code)]

pub mod checks;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Whether `.ci/run` (or the developer) asked for a failure instead of a
/// skip when the header or compiler is missing.
pub fn header_required() -> bool {
    std::env::var_os("REQUIRE_IBVERBS_HEADERS").is_some_and(|v| !v.is_empty())
}

/// Prints a skip notice, or panics when `REQUIRE_IBVERBS_HEADERS` is set.
pub fn skip_or_fail(test: &str, why: &str) {
    if header_required() {
        panic!("{test}: {why}, and REQUIRE_IBVERBS_HEADERS is set");
    }
    println!(
        "SKIPPED {test}: {why} (install libibverbs-dev and a C compiler; set \
         REQUIRE_IBVERBS_HEADERS=1 to make this a failure)"
    );
}

/// The C compiler (`$CC`, else `cc`).
pub fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// A fresh directory for this test process.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hipobj-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Whether `<infiniband/verbs.h>` compiles; Err says why not.
pub fn header_present(dir: &Path) -> Result<(), String> {
    header_present_for(dir, "infiniband/verbs.h")
}

/// Whether `<header>` compiles; Err says why not.
pub fn header_present_for(dir: &Path, header: &str) -> Result<(), String> {
    let probe = dir.join("probe.c");
    std::fs::write(
        &probe,
        format!("#include <{header}>\nint main(void) {{ return 0; }}\n"),
    )
    .expect("write probe");
    match Command::new(cc()).arg("-fsyntax-only").arg(&probe).output() {
        Err(e) => Err(format!("no C compiler ({}: {e})", cc())),
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains(header) {
                Err(format!("<{header}> is not installed"))
            } else {
                // Another failure: let the real compile report it.
                Ok(())
            }
        }
        Ok(_) => Ok(()),
    }
}

/// The fake library's variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fake {
    /// Everything, optional symbols included.
    Full,
    /// Without `ibv_reg_mr_iova2` and `ibv_reg_dmabuf_mr`.
    NoOptional,
    /// Without the required `ibv_create_qp`.
    NoCreateQp,
}

/// Builds (once per process) the fake libibverbs variant and returns its
/// path, or Err with why it can't be built (no header or compiler).
pub fn fake_lib(variant: Fake) -> Result<PathBuf, String> {
    type Built = Vec<(Fake, Result<PathBuf, String>)>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = built.iter().find(|(v, _)| *v == variant) {
        return r.clone();
    }
    let r = build(variant);
    built.push((variant, r.clone()));
    r
}

fn build(variant: Fake) -> Result<PathBuf, String> {
    let dir = temp_dir("fake-ibverbs");
    header_present(&dir)?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/abi/fake_libibverbs.c");
    let (flag, name) = match variant {
        Fake::Full => (None, "libfake-ibverbs-full.so"),
        Fake::NoOptional => (Some("-DNO_OPTIONAL"), "libfake-ibverbs-no-optional.so"),
        Fake::NoCreateQp => (Some("-DNO_CREATE_QP"), "libfake-ibverbs-no-create-qp.so"),
    };
    let out = dir.join(name);
    let mut cmd = Command::new(cc());
    // The soname lets the fake libmlx5, linked to this file, find it
    // already loaded.
    cmd.args(["-std=gnu11", "-Wall", "-Werror", "-shared", "-fPIC"])
        .arg(format!("-Wl,-soname,{name}"))
        .arg("-o")
        .arg(&out);
    if let Some(f) = flag {
        cmd.arg(f);
    }
    let o = cmd
        .arg(&src)
        .output()
        .map_err(|e| format!("no C compiler ({}: {e})", cc()))?;
    assert!(
        o.status.success(),
        "building the fake libibverbs failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(out)
}

/// Builds (once per process) the fake libmlx5 (`fake_libmlx5.c`) linked
/// to the fake libibverbs `variant`, and returns its path, or Err with why
/// it can't be built (no header or compiler).
pub fn fake_mlx5(variant: Fake) -> Result<PathBuf, String> {
    type Built = Vec<(Fake, Result<PathBuf, String>)>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let ibverbs = fake_lib(variant)?;
    let mut built = BUILT
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = built.iter().find(|(v, _)| *v == variant) {
        return r.clone();
    }
    let r = build_mlx5(variant, &ibverbs);
    built.push((variant, r.clone()));
    r
}

fn build_mlx5(variant: Fake, ibverbs: &Path) -> Result<PathBuf, String> {
    let dir = ibverbs
        .parent()
        .expect("the fake's directory")
        .to_path_buf();
    header_present_for(&dir, "infiniband/mlx5dv.h")?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/abi/fake_libmlx5.c");
    let out = dir.join(format!("libfake-mlx5-{variant:?}.so"));
    let o = Command::new(cc())
        .args(["-std=gnu11", "-Wall", "-Werror", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .arg(ibverbs)
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output()
        .map_err(|e| format!("no C compiler ({}: {e})", cc()))?;
    assert!(
        o.status.success(),
        "building the fake libmlx5 failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(out)
}
