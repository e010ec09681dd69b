//! The verbs provider through the real `libibverbs.so.1` on a machine
//! without RDMA devices: listing and opening fail with `NoDevice` saying
//! why (here: a kernel without InfiniBand, where `ibv_get_device_list`
//! fails with ENOSYS), over and over and from several threads without a
//! crash or a leaked descriptor; the symbol table loads, and its optional
//! symbols are reported as `dlsym` sees them.
//!
//! Skipped (with a message) when libibverbs isn't installed, unless
//! `REQUIRE_IBVERBS_HEADERS` is set (`.ci/run` installs it). On a machine
//! that does have RDMA devices the no-device assertions don't apply and
//! the tests check the listing instead.

mod abi;

use hipobj_fabric::ibverbs::loader::{OPTIONAL_SYMBOLS, REQUIRED_SYMBOLS};
use hipobj_fabric::ibverbs::{libibverbs, IbvLib, VerbsProvider, SONAME};
use hipobj_fabric::seam::Provider;
use hipobj_fabric::FabricError;
use std::ffi::c_void;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// One test at a time: the leak test counts the process's descriptors,
/// which the others open and close (loading libraries, listing devices).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn real_lib() -> Option<Arc<IbvLib>> {
    match libibverbs() {
        Ok(lib) => Some(lib),
        Err(e) => {
            abi::skip_or_fail("ibverbs_nodevice", &format!("libibverbs is unusable: {e}"));
            None
        }
    }
}

/// Whether the kernel has the uverbs interface at all; without it
/// libibverbs reports ENOSYS.
fn kernel_has_uverbs() -> bool {
    Path::new("/sys/class/infiniband_verbs/abi_version").exists()
}

/// Checks a listing/opening failure: NoDevice, and on a kernel without
/// uverbs, the ENOSYS explanation.
fn check_no_device(e: &FabricError) {
    let FabricError::NoDevice(msg) = e else {
        panic!("expected NoDevice, got {e:?}");
    };
    assert_eq!(e.errno(), libc::ENODEV);
    if !kernel_has_uverbs() {
        assert_eq!(
            msg,
            "libibverbs found no RDMA devices: the kernel has no InfiniBand support (ENOSYS)"
        );
    }
    assert!(e.to_string().starts_with("no RDMA device: "), "{e}");
}

#[test]
fn the_symbol_table_loads_and_reports_optional_symbols_as_dlsym_sees_them() {
    let _one = serial();
    let Some(lib) = real_lib() else { return };
    assert_eq!(lib.path(), SONAME);
    let symbols = lib.symbols();
    assert_eq!(
        symbols.len(),
        REQUIRED_SYMBOLS.len() + OPTIONAL_SYMBOLS.len()
    );
    // An independent look-up in the same library.
    // SAFETY: the library was loaded already by the provider; loading it
    // again only takes another reference.
    let check = unsafe { libloading::Library::new(SONAME) }.expect("dlopen libibverbs");
    for (name, present) in &symbols {
        let cname = format!("{name}\0");
        // SAFETY: the symbol is only looked up, never called or read.
        let found = unsafe { check.get::<*const c_void>(cname.as_bytes()) }.is_ok();
        assert_eq!(
            found, *present,
            "{name}: dlsym says {found}, the table {present}"
        );
        if REQUIRED_SYMBOLS.contains(name) {
            assert!(present, "required {name} missing");
        }
        println!("{name}: {}", if *present { "present" } else { "absent" });
    }
    assert_eq!(
        lib.has_reg_dmabuf_mr(),
        symbols.contains(&("ibv_reg_dmabuf_mr", true))
    );
    // The inline ones are not exported, which is why the provider uses the
    // context's ops table.
    for inline in ["ibv_poll_cq", "ibv_post_send", "ibv_post_recv"] {
        let cname = format!("{inline}\0");
        // SAFETY: as above.
        let found = unsafe { check.get::<*const c_void>(cname.as_bytes()) }.is_ok();
        println!(
            "{inline}: {}",
            if found { "exported" } else { "inline only" }
        );
    }
}

#[test]
fn listing_devices_without_any_is_no_device_saying_why() {
    let _one = serial();
    if real_lib().is_none() {
        return;
    }
    match VerbsProvider::new().device_names() {
        Ok(names) => {
            assert!(!names.is_empty(), "Ok must list devices");
            println!("this machine has RDMA devices {names:?}: no-device checks skipped");
        }
        Err(e) => {
            println!("{e}");
            check_no_device(&e);
        }
    }
}

#[test]
fn opening_a_device_without_any_is_no_device_saying_why() {
    let _one = serial();
    if real_lib().is_none() {
        return;
    }
    let p = VerbsProvider::new();
    match p.open_device("hipobj-no-such-device") {
        Ok(d) => panic!("opened {d:?}"),
        Err(e) => {
            println!("{e}");
            if let FabricError::NoDevice(msg) = &e {
                if msg.starts_with("no RDMA device named") {
                    // A machine with devices, just not this one.
                    return;
                }
            }
            check_no_device(&e);
        }
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[test]
fn listing_and_opening_repeatedly_neither_crashes_nor_leaks() {
    let _one = serial();
    if real_lib().is_none() {
        return;
    }
    let p = VerbsProvider::new();
    // Warm up (the first call loads the library and its providers).
    let _ = p.device_names();
    let _ = p.open_device("mlx5_0");
    let fds = open_fds();
    for _ in 0..500 {
        if let Err(e) = p.device_names() {
            check_no_device(&e);
        }
        if let Err(e) = p.open_device("mlx5_0") {
            if !matches!(&e, FabricError::NoDevice(m) if m.starts_with("no RDMA device named")) {
                check_no_device(&e);
            }
        }
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let _ = p.device_names();
                    let _ = p.open_device("bnxt_re0");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no thread panicked");
    }
    assert_eq!(open_fds(), fds, "file descriptors leaked");
}

#[test]
fn a_missing_library_is_no_device_saying_it_could_not_be_loaded() {
    let _one = serial();
    let p = VerbsProvider::with_library("libibverbs-hipobj-missing.so.1");
    for r in [
        p.device_names().map(|_| ()),
        p.open_device("mlx5_0").map(|_| ()),
    ] {
        let e = r.expect_err("nothing to load");
        let FabricError::NoDevice(msg) = &e else {
            panic!("expected NoDevice, got {e:?}");
        };
        assert!(
            msg.contains("libibverbs-hipobj-missing.so.1 could not be loaded"),
            "{msg}"
        );
        println!("{e}");
    }
}
