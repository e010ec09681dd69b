//! Loading `libmlx5.so.1` at run time, as [`crate::ibverbs::loader`] loads
//! libibverbs: opened by soname (package `ibverbs-providers`) the first time
//! a device is opened, never linked, and kept for the life of the process.
//! libibverbs loads the same file as its mlx5 driver, so the `dlopen()`
//! here finds it already mapped and the `mlx5dv_*` functions act on the
//! driver's own objects.

use super::abi::{CreateQpFn, IsSupportedFn, QpExFromIbvQpExFn};
use libloading::Library;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The soname the DC support opens.
pub const SONAME: &str = "libmlx5.so.1";

/// The `mlx5dv` symbols DC needs.
pub const SYMBOLS: [&str; 3] = [
    "mlx5dv_is_supported",
    "mlx5dv_create_qp",
    "mlx5dv_qp_ex_from_ibv_qp_ex",
];

/// libmlx5, loaded, with the `mlx5dv` functions DC uses resolved.
pub struct Mlx5Lib {
    path: String,
    pub(crate) is_supported: IsSupportedFn,
    pub(crate) create_qp: CreateQpFn,
    pub(crate) qp_ex_from_ibv_qp_ex: QpExFromIbvQpExFn,
    // Last, so the function pointers above are never used after it closes.
    _lib: Library,
}

impl fmt::Debug for Mlx5Lib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mlx5Lib")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Resolves `name` as a `T`.
///
/// # Safety
///
/// `T` must be the function pointer type of the C function `name`.
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &str) -> Result<T, String> {
    let cname = format!("{name}\0");
    // SAFETY: the caller vouches for the type; the name is NUL-terminated.
    match unsafe { lib.get::<T>(cname.as_bytes()) } {
        Ok(s) => Ok(*s),
        Err(e) => Err(format!(
            "{path} has no symbol {name} (rdma-core older than 24?): {e}"
        )),
    }
}

impl Mlx5Lib {
    /// Opens `path` (a soname or a file) and resolves [`SYMBOLS`]; Err says
    /// why it could not.
    pub fn open(path: &str) -> Result<Mlx5Lib, String> {
        // SAFETY: libmlx5's ELF constructors register its driver with
        // libibverbs (which it links to) and touch nothing else; a library
        // of another name is the caller's deliberate choice (tests).
        let lib = unsafe { Library::new(path) }.map_err(|e| {
            format!(
                "{path} could not be loaded (on Debian/Ubuntu it is in the package \
                 ibverbs-providers): {e}"
            )
        })?;
        // SAFETY: each name's prototype in <infiniband/mlx5dv.h> (rdma-core
        // 44; MLX5_1.3, 1.8 and 1.10) is the alias it is resolved as.
        let table = unsafe {
            Mlx5Lib {
                path: path.to_string(),
                is_supported: sym(&lib, path, "mlx5dv_is_supported")?,
                create_qp: sym(&lib, path, "mlx5dv_create_qp")?,
                qp_ex_from_ibv_qp_ex: sym(&lib, path, "mlx5dv_qp_ex_from_ibv_qp_ex")?,
                _lib: lib,
            }
        };
        tracing::debug!(path, "libmlx5 loaded");
        Ok(table)
    }

    /// What was opened.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// The process's libmlx5 ([`SONAME`]), loaded on the first call; a failure
/// is remembered and reported again without another try.
pub fn libmlx5() -> Result<Arc<Mlx5Lib>, String> {
    static LIB: OnceLock<Result<Arc<Mlx5Lib>, String>> = OnceLock::new();
    LIB.get_or_init(|| Mlx5Lib::open(SONAME).map(Arc::new))
        .clone()
}
