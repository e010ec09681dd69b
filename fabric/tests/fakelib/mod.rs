//! The fake libibverbs (and fake libmlx5) of `tests/abi/`, loaded a second
//! time (same handle) to reach their knobs and logs.
#![allow(dead_code)]

use super::abi::{self, Fake};
use hipobj_fabric::ibverbs::VerbsProvider;
use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// The fake's state is global to the library: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The fake library, loaded a second time (same handle) to reach its knobs.
pub struct FakeLib {
    lib: libloading::Library,
    path: PathBuf,
    /// The fake libmlx5 linked to it, when asked for.
    mlx5: Option<(libloading::Library, PathBuf)>,
    _serial: MutexGuard<'static, ()>,
}

impl FakeLib {
    pub fn get(variant: Fake) -> Option<FakeLib> {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let path = match abi::fake_lib(variant) {
            Ok(p) => p,
            Err(why) => {
                abi::skip_or_fail("ibverbs_fake", &why);
                return None;
            }
        };
        // SAFETY: the fake has no constructors; loading it is inert.
        let lib = unsafe { libloading::Library::new(&path) }.expect("load the fake");
        let f = FakeLib {
            lib,
            path,
            mlx5: None,
            _serial: serial,
        };
        f.set_mode(0);
        f.set_extended(1);
        f.clear_log();
        Some(f)
    }

    /// The fake libibverbs `variant` with the fake libmlx5 linked to it.
    pub fn get_dc(variant: Fake) -> Option<FakeLib> {
        let mut f = FakeLib::get(variant)?;
        let path = match abi::fake_mlx5(variant) {
            Ok(p) => p,
            Err(why) => {
                abi::skip_or_fail("mlx5dv_fake", &why);
                return None;
            }
        };
        // SAFETY: the fake has no constructors; it needs the fake
        // libibverbs, which is loaded already.
        let lib = unsafe { libloading::Library::new(&path) }.expect("load the fake libmlx5");
        f.mlx5 = Some((lib, path));
        f.mlx5_call_int("fake_mlx5_set_supported", 1);
        f.mlx5_call_int("fake_mlx5_set_complete_rc", 0);
        Some(f)
    }

    /// The provider over the fake (and its fake libmlx5, if loaded).
    pub fn provider(&self) -> VerbsProvider {
        let p = VerbsProvider::with_library(self.path.to_string_lossy().into_owned());
        match &self.mlx5 {
            Some((_, path)) => p.mlx5_library(path.to_string_lossy().into_owned()),
            None => p,
        }
    }

    /// Calls the fake libmlx5's `void name(int)`.
    pub fn mlx5_call_int(&self, name: &str, v: c_int) {
        let (lib, _) = self.mlx5.as_ref().expect("the fake libmlx5 is loaded");
        let cname = format!("{name}\0");
        // SAFETY: the fake libmlx5 defines `void name(int)`.
        unsafe {
            let f = lib
                .get::<unsafe extern "C" fn(c_int)>(cname.as_bytes())
                .expect(name);
            f(v)
        }
    }

    pub fn call_int(&self, name: &str, v: c_int) {
        let cname = format!("{name}\0");
        // SAFETY: the fake defines `void name(int)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(c_int)>(cname.as_bytes())
                .expect(name);
            f(v)
        }
    }

    pub fn set_mode(&self, m: c_int) {
        self.call_int("fake_set_mode", m);
    }

    pub fn set_extended(&self, e: c_int) {
        self.call_int("fake_set_extended", e);
    }

    pub fn clear_log(&self) {
        // SAFETY: the fake defines `void fake_clear_log(void)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn()>(b"fake_clear_log\0")
                .expect("fake_clear_log");
            f()
        }
    }

    pub fn log(&self) -> Vec<String> {
        // SAFETY: the fake defines `const char *fake_log(void)`, returning
        // its NUL-terminated log, which is copied out at once.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> *const c_char>(b"fake_log\0")
                .expect("fake_log");
            CStr::from_ptr(f())
                .to_string_lossy()
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    pub fn live_objects(&self) -> c_int {
        // SAFETY: the fake defines `int fake_live_objects(void)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> c_int>(b"fake_live_objects\0")
                .expect("fake_live_objects");
            f()
        }
    }

    /// The log lines starting with `prefix` (a call's name), in order.
    pub fn lines(&self, prefix: &str) -> Vec<String> {
        lines(&self.log(), prefix)
    }

    /// The one log line starting with `prefix`, after clearing nothing.
    pub fn line(&self, prefix: &str) -> String {
        let log = self.log();
        let lines = lines(&log, prefix);
        assert_eq!(lines.len(), 1, "one {prefix:?} line in {log:#?}");
        lines[0].clone()
    }
}

/// The lines of `log` starting with `prefix` (a call's name), in order.
pub fn lines(log: &[String], prefix: &str) -> Vec<String> {
    log.iter()
        .filter(|l| l.starts_with(prefix))
        .cloned()
        .collect()
}

/// Where in `log` the first line starting with `prefix` is; a test failure
/// naming the log when there is none.
pub fn at(log: &[String], prefix: &str) -> usize {
    log.iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{prefix} missing from {log:#?}"))
}
