//! For tests: links `libibverbs.so.1` from the archive of this build (the
//! one cargo built for the test binary that calls it) with `link.sh`, once
//! per process, and says where it is.

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
        let out = profile_dir.join("soft-verbs");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("link.sh");
        let target = profile_dir.parent().expect("target directory");
        let o = Command::new("bash")
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
