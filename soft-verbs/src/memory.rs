//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_reg_mr`
//! (and `_iova`, `_iova2`), `ibv_dereg_mr`. dma-buf and re-registration are
//! not supported (`EOPNOTSUPP`): a soft device has no device memory.

use crate::ffi::{guard_errno, guard_ptr};
use crate::objects::{leak, Children, Context, Mr, Pd};
use hipobj_fabric::ibverbs::abi::{ibv_context, ibv_mr, ibv_pd, IBV_ACCESS_OPTIONAL_RANGE};
use hipobj_fabric::AccessFlags;
use std::ffi::{c_int, c_uint, c_void};

/// The PD behind an `ibv_pd` this library made.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library.
pub unsafe fn pd_of<'a>(pd: *mut ibv_pd) -> Result<&'a Pd, c_int> {
    if pd.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `raw` is the first field of the repr(C) Pd; live by contract.
    Ok(unsafe { &*pd.cast::<Pd>() })
}

/// `ibv_alloc_pd`.
///
/// # Safety
///
/// `context` is an open context.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    crate::ffi::called("ibv_alloc_pd");
    guard_ptr(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        let pd = ctx.device.alloc_pd().map_err(|e| e.errno())?;
        let obj = leak(Pd {
            raw: ibv_pd { context, handle: 0 },
            pd,
            children: Children::default(),
        });
        // SAFETY: obj was just leaked and is valid; a handle that tells PDs apart.
        unsafe { (*obj).raw.handle = obj as usize as u32 };
        Ok(obj.cast::<ibv_pd>())
    })
}

/// `ibv_dealloc_pd`: `EBUSY` while regions or QPs made on it live.
///
/// # Safety
///
/// `pd` is a live PD of this library, deallocated once.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    crate::ffi::called("ibv_dealloc_pd");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { pd_of(pd)? };
        if p.children.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: made by Box::into_raw in ibv_alloc_pd; freed once.
        drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
        Ok(())
    })
}

fn register(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> Result<*mut ibv_mr, c_int> {
    // SAFETY: pd comes from the program, which passes a live PD.
    let p = unsafe { pd_of(pd)? };
    if iova != addr as u64 {
        // The soft provider addresses regions by their virtual address.
        return Err(libc::EOPNOTSUPP);
    }
    // The optional-range bits (relaxed ordering ...) are hints a device
    // may ignore, which this one does.
    let access = AccessFlags(access & !IBV_ACCESS_OPTIONAL_RANGE);
    // SAFETY: ibv_reg_mr's contract: the program owns `addr..addr+length`
    // and keeps it allocated until it deregisters the region (which drops
    // the soft region first, waiting for every access in flight).
    let mr = unsafe { p.pd.reg_mr(addr.cast::<u8>(), length, access) }.map_err(|e| e.errno())?;
    let raw = ibv_mr {
        context: p.raw.context,
        pd,
        addr,
        length,
        handle: 0,
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    };
    p.children.add();
    Ok(leak(Mr {
        raw,
        mr,
        pd: std::ptr::from_ref(p),
    })
    .cast::<ibv_mr>())
}

/// `ibv_reg_mr`.
///
/// # Safety
///
/// `pd` is a live PD; `addr..addr+length` is memory the program owns and
/// keeps allocated until it deregisters the region.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    crate::ffi::called("ibv_reg_mr");
    guard_ptr(|| register(pd, addr, length, addr as u64, access as c_uint))
}

/// `ibv_reg_mr_iova`: `EOPNOTSUPP` unless `iova` is `addr`.
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    crate::ffi::called("ibv_reg_mr_iova");
    guard_ptr(|| register(pd, addr, length, iova, access as c_uint))
}

/// `ibv_reg_mr_iova2` (what the header's `ibv_reg_mr` calls for
/// optional-range access bits): `EOPNOTSUPP` unless `iova` is `addr`.
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    crate::ffi::called("ibv_reg_mr_iova2");
    guard_ptr(|| register(pd, addr, length, iova, access))
}

/// `ibv_reg_dmabuf_mr`: `EOPNOTSUPP` (no device memory to export).
#[no_mangle]
pub extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    crate::ffi::called("ibv_reg_dmabuf_mr");
    guard_ptr(|| Err(libc::EOPNOTSUPP))
}

/// `ibv_dereg_mr`: returns once nothing reads or writes the memory for it.
///
/// # Safety
///
/// `mr` is a live region of this library, deregistered once.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    crate::ffi::called("ibv_dereg_mr");
    guard_errno(|| {
        if mr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: made by Box::into_raw in register (raw is the first
        // field); freed once by the caller's contract.
        let m = unsafe { Box::from_raw(mr.cast::<Mr>()) };
        let pd = m.pd;
        drop(m);
        // SAFETY: the PD outlives its regions (its dealloc is refused while
        // they live).
        unsafe { (*pd).children.remove() };
        Ok(())
    })
}

/// `ibv_rereg_mr`: `IBV_REREG_MR_ERR_CMD` (-4) with `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_rereg_mr(
    _mr: *mut ibv_mr,
    _flags: c_int,
    _pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    _access: c_int,
) -> c_int {
    crate::ffi::called("ibv_rereg_mr");
    crate::ffi::set_errno(libc::EOPNOTSUPP);
    -4
}
