//! For tests: links `libibverbs.so.1` from the archive of this build (the
//! one cargo built for the test binary that calls it) with `link.sh`, once
//! per process, and says where it is.
//!
//! Cargo builds this package's staticlib in the same compilation as the
//! rlib a test links, as `deps/libhipobj_soft_verbs-<hash>.a`, but copies
//! it to `target/<profile>/libhipobj_soft_verbs.a` only when the package's
//! library is itself a target of the command (not for `cargo test --test
//! NAME`, nor for another package's tests), and builds one per set of
//! dependency features. So the archive is found by a symbol: the mangled
//! name of [`library_dir`], whose hash is that compilation's, is in this
//! test binary and in the one archive built with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory holding `libibverbs.so.1` for this build's profile, to put
/// in `LD_LIBRARY_PATH` (or to load by path). Panics with the linker's
/// output when it cannot be made: a test that needs it cannot run without.
pub fn library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        // target/<profile>/deps/<test> -> target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary is under target/<profile>/deps");
        let profile = profile_dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a profile directory name")
            .to_string();
        let profile = if profile == "release" {
            "release"
        } else {
            "debug"
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("link.sh");
        let target = profile_dir.parent().expect("target directory");
        let mut link = Command::new("bash");
        // Each archive gets its own directory: test binaries of other
        // builds (other features, other packages) may link theirs at the
        // same time.
        let out = match own_archive(&exe, profile_dir) {
            Some(archive) => {
                let stem = archive
                    .file_stem()
                    .expect("an archive's file name")
                    .to_owned();
                link.env("SOFT_VERBS_ARCHIVE", &archive);
                profile_dir.join("soft-verbs").join(stem)
            }
            // Not found (a stripped binary, another symbol mangling): the
            // archive cargo copied last.
            None => profile_dir.join("soft-verbs"),
        };
        let o = link
            .arg(&script)
            .arg(profile)
            .arg(&out)
            .env("SOFT_VERBS_NO_BUILD", "1")
            .env("CARGO_TARGET_DIR", target)
            .output()
            .expect("running soft-verbs/link.sh");
        assert!(
            o.status.success(),
            "soft-verbs/link.sh failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// The library's path.
pub fn library_path() -> PathBuf {
    library_dir().join("libibverbs.so.1")
}

/// The staticlib cargo built in the same compilation as the rlib linked
/// into `exe`: the `deps/libhipobj_soft_verbs-*.a` that holds the same
/// mangled name of this very function (legacy mangling, whose trailing
/// hash differs between compilations), or None.
///
/// The name is looked up in `exe`'s symbol table, so this function must
/// stay a function of its own there: never inlined. (It used to be
/// `library_dir`'s name, found in the debug information while tests were
/// built with full debug information; `library_dir` is inlined into
/// `library_path`, and line tables alone do not carry its mangled name.)
#[inline(never)]
fn own_archive(exe: &Path, profile_dir: &Path) -> Option<PathBuf> {
    const PREFIX: &[u8] = b"17hipobj_soft_verbs7testing11own_archive17h";
    let bin = std::fs::read(exe).ok()?;
    // The prefix, 16 hex digits of hash, and the closing `E` (this
    // constant is in the binary too, followed by other bytes).
    let mut from = 0;
    let symbol = loop {
        let at = from + find(bin.get(from..)?, PREFIX)?;
        let s = bin.get(at..at + PREFIX.len() + 17)?;
        let (hash, end) = s[PREFIX.len()..].split_at(16);
        if hash.iter().all(u8::is_ascii_hexdigit) && end == b"E" {
            break s;
        }
        from = at + 1;
    };
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(profile_dir.join("deps"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libhipobj_soft_verbs-") && n.ends_with(".a"))
        })
        .collect();
    // Newest first: the one built with this binary usually is, and old
    // builds' archives stay in deps.
    candidates
        .sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).and_then(|m| m.modified()).ok()));
    candidates
        .into_iter()
        .find(|p| std::fs::read(p).is_ok_and(|a| find(&a, symbol).is_some()))
}

/// Where `needle` (not empty) first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (first, rest) = needle.split_first()?;
    let mut from = 0;
    while let Some(i) = hay.get(from..)?.iter().position(|b| b == first) {
        let at = from + i;
        if hay.get(at + 1..at + needle.len()) == Some(rest) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}
