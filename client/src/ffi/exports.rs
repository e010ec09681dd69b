//! The exported `hipObj*` functions of `include/hipobj.h`.
//!
//! Each body runs inside the panic boundary (`ffi::boundary`) and
//! converts its arguments with the helpers of `ffi::ptr`; the work is
//! [`crate::c_semantics`]'s. The `# Safety` section of each function is the
//! pointer contract the header documents for it.

use super::boundary::{run, run_str};
use super::constants::{
    HIPOBJ_RDMA_OP_GET, HIPOBJ_RDMA_OP_PUT, HIPOBJ_SYNC_TO_DEVICE, HIPOBJ_SYNC_TO_HOST,
};
use super::ops::CallbackOps;
use super::ptr::{self, addr, Out, OutStr};
use super::types::{HipObjConfig, HipObjConfigV2, HipObjError, HipObjOps, HipObjOpsV2};
use crate::buffer::Direction;
use crate::c_semantics;
use crate::config::Config;
use crate::error::{Error, OpError, Result};
use crate::transfer::SyncDirection;
use std::ffi::{c_char, c_int, c_void, CStr};

/// The static, NUL-terminated text of `op` (the same as [`OpError::as_str`]).
pub fn error_cstr(op: OpError) -> &'static CStr {
    match op {
        OpError::Success => c"Success",
        OpError::InvalidValue => c"Invalid value",
        OpError::NotInitialized => c"hipObject not initialized",
        OpError::AlreadyInitialized => c"hipObject already initialized",
        OpError::RdmaError => c"RDMA error",
        OpError::S3Error => c"S3 error",
        OpError::BufNotRegistered => c"Buffer not registered",
        OpError::BufAlreadyRegistered => c"Buffer already registered",
        OpError::NicNotFound => c"No RDMA NIC found",
        OpError::DmabufNotSupported => c"dmabuf not supported",
        OpError::SizeTooLarge => c"Size too large",
        OpError::InternalError => c"Internal error",
        OpError::NotSupported => c"Operation not supported",
        OpError::Busy => c"Resource busy",
    }
}

/// What `hipObjGetErrorString` answers for a value outside the enum.
pub const UNKNOWN_ERROR: &CStr = c"Unknown error";
/// `hipObjGetVersionString`'s answer.
pub const VERSION_CSTR: &CStr = c"0.1.0";
/// What `hipObjGetVersionString` answers if it panicked.
const VERSION_FALLBACK: &CStr = c"0.0.0";

/// `HIPOBJ_RDMA_OP_*` as a [`Direction`].
fn rdma_op(op: c_int) -> Result<Direction> {
    match op {
        HIPOBJ_RDMA_OP_PUT => Ok(Direction::Put),
        HIPOBJ_RDMA_OP_GET => Ok(Direction::Get),
        other => Err(Error::invalid(format!(
            "op {other} is neither HIPOBJ_RDMA_OP_PUT (0) nor HIPOBJ_RDMA_OP_GET (1)"
        ))),
    }
}

/// `HIPOBJ_SYNC_*` as a [`SyncDirection`].
fn sync_direction(direction: c_int) -> Result<SyncDirection> {
    match direction {
        HIPOBJ_SYNC_TO_HOST => Ok(SyncDirection::ToHost),
        HIPOBJ_SYNC_TO_DEVICE => Ok(SyncDirection::ToDevice),
        other => Err(Error::invalid(format!(
            "direction {other} is neither HIPOBJ_SYNC_TO_HOST (0) nor HIPOBJ_SYNC_TO_DEVICE (1)"
        ))),
    }
}

/// `off_t` as the library's `i64` (the same type on 64-bit Linux; a
/// widening on targets with a 32-bit `off_t`).
#[allow(clippy::useless_conversion)]
fn off(offset: libc::off_t) -> i64 {
    i64::from(offset)
}

/// Hands a token to the caller through `out` (which already holds NULL).
fn token_out(out: &Out<*mut c_char>, token: Result<String>) -> Result<()> {
    out.write(ptr::malloc_cstr(&token?)?);
    Ok(())
}

/// `hipObjGetErrorString`: the text of an error code; "Unknown error" for
/// a value outside the enum.
#[no_mangle]
pub extern "C" fn hipObjGetErrorString(err: c_int) -> *const c_char {
    run_str("hipObjGetErrorString", UNKNOWN_ERROR, || {
        OpError::from_raw(err).map_or(UNKNOWN_ERROR, error_cstr)
    })
}

/// `hipObjGetVersionString`: "0.1.0".
#[no_mangle]
pub extern "C" fn hipObjGetVersionString() -> *const c_char {
    run_str("hipObjGetVersionString", VERSION_FALLBACK, || VERSION_CSTR)
}

/// `hipObjGetVersion`: writes the three parts of the version.
///
/// # Safety
///
/// Each pointer must be NULL (`hipObjInvalidValue`, nothing written) or
/// valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn hipObjGetVersion(
    major: *mut c_int,
    minor: *mut c_int,
    patch: *mut c_int,
) -> HipObjError {
    run("hipObjGetVersion", || {
        // SAFETY: the function's contract covers the three pointers.
        let (major, minor, patch) = unsafe {
            (
                Out::new(major, "major")?,
                Out::new(minor, "minor")?,
                Out::new(patch, "patch")?,
            )
        };
        let (ma, mi, pa) = crate::VERSION;
        let int =
            |v: u32| c_int::try_from(v).map_err(|_| Error::invalid("version part overflows int"));
        major.write(int(ma)?);
        minor.write(int(mi)?);
        patch.write(int(pa)?);
        Ok(())
    })
}

/// A `hipObjConfig_t` as a [`Config`].
///
/// # Safety
///
/// Each string member must be NULL or NUL-terminated.
unsafe fn config_of(c: &HipObjConfig) -> Result<Config> {
    // SAFETY: the caller's contract covers every string member.
    unsafe {
        Ok(Config {
            endpoint: ptr::opt_str(c.endpoint, "config->endpoint")?,
            region: ptr::opt_str(c.region, "config->region")?,
            access_key: ptr::opt_str(c.access_key, "config->accessKey")?,
            secret_key: ptr::opt_str(c.secret_key, "config->secretKey")?,
            flags: c.flags,
            gpu_device: c.gpu_device,
            nic_hint: ptr::opt_str(c.nic_hint, "config->nicHint")?,
        })
    }
}

/// `hipObjInit`: initializes the process-wide library.
///
/// # Safety
///
/// `config` must be NULL (`hipObjInvalidValue`) or point to a valid
/// `hipObjConfig_t` whose string members are each NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hipObjInit(config: *const HipObjConfig) -> HipObjError {
    run("hipObjInit", || {
        // SAFETY: the function's contract.
        let c = unsafe { ptr::required(config, "config") }?;
        // SAFETY: the function's contract covers every string member.
        let config = unsafe { config_of(c) }?;
        c_semantics::init(&config)
    })
}

/// `hipObjInitV2`: `hipObjInit` for hipobj-rc-v2 transfers, with the
/// control endpoint the callbacks are told about and the transfer
/// deadline. Exclusive with `hipObjInit` (one instance: the second is
/// `hipObjAlreadyInitialized`).
///
/// # Safety
///
/// `config` must be NULL (`hipObjInvalidValue`) or point to a valid
/// `hipObjConfigV2_t` whose string members are each NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hipObjInitV2(config: *const HipObjConfigV2) -> HipObjError {
    run("hipObjInitV2", || {
        // SAFETY: the function's contract.
        let c = unsafe { ptr::required(config, "config") }?;
        // SAFETY: the function's contract covers every string member.
        let (v1, endpoint) = unsafe {
            (
                config_of(&c.v1)?,
                ptr::req_str(
                    c.control.control_endpoint,
                    "config->control.controlEndpoint",
                )?,
            )
        };
        if endpoint.trim().is_empty() {
            return Err(Error::invalid("config->control.controlEndpoint is empty"));
        }
        let endpoint = std::ffi::CString::new(endpoint)
            .map_err(|_| Error::invalid("config->control.controlEndpoint has a NUL"))?;
        let deadline = (c.transfer_deadline_ms != 0)
            .then(|| std::time::Duration::from_millis(u64::from(c.transfer_deadline_ms)));
        c_semantics::init_v2(&v1, deadline, endpoint)
    })
}

/// The bucket, key and query of a v2 call as a target (each checked as
/// the server will read it).
///
/// # Safety
///
/// Each pointer must be NULL or NUL-terminated.
unsafe fn v2_transfer(
    op: hipobj_wire::rc_v2::Op,
    bucket: *const c_char,
    key: *const c_char,
    size: u64,
    offset: u64,
    query: *const c_char,
) -> Result<crate::v2::V2Transfer> {
    // SAFETY: the caller's contract.
    let (bucket, key, query) = unsafe {
        (
            ptr::req_str(bucket, "bucket")?,
            ptr::req_str(key, "key")?,
            ptr::opt_str(query, "query")?,
        )
    };
    let target = hipobj_wire::rc_v2::Target {
        bucket,
        key,
        query: query.filter(|q| !q.is_empty()),
    };
    let checked = hipobj_wire::rc_v2::Target::parse(&target.encode())
        .map_err(|e| Error::invalid(format!("bucket, key or query: {e}")))?;
    checked
        .part(op)
        .map_err(|e| Error::invalid(format!("query: {e}")))?;
    Ok(crate::v2::V2Transfer {
        target,
        object_offset: offset,
        buffer_offset: 0,
        size,
    })
}

/// `hipObjGetV2`: a hipobj-rc-v2 GET of `size` bytes of the object from
/// `offset` into the buffer registered at `devPtr`.
///
/// # Safety
///
/// `bucket` and `key` must be NUL-terminated (NULL is
/// `hipObjInvalidValue`), `query` NULL or NUL-terminated; `ops` NULL
/// (`hipObjInvalidValue`) or a valid `hipObjOpsV2_t` whose callbacks may
/// be called with `ctx` as the header documents.
#[no_mangle]
pub unsafe extern "C" fn hipObjGetV2(
    bucket: *const c_char,
    key: *const c_char,
    dev_ptr: *mut c_void,
    size: u64,
    offset: u64,
    query: *const c_char,
    ops: *mut HipObjOpsV2,
    ctx: *mut c_void,
) -> HipObjError {
    let op = hipobj_wire::rc_v2::Op::Get;
    // SAFETY: this function's contract is `transfer_v2_c`'s.
    unsafe {
        transfer_v2_c(
            "hipObjGetV2",
            op,
            bucket,
            key,
            dev_ptr.cast_const(),
            size,
            offset,
            query,
            ops,
            ctx,
        )
    }
}

/// `hipObjPutV2`: a hipobj-rc-v2 PUT (UploadPart with a query of
/// `uploadId=U&partNumber=N`) of the first `size` bytes of the buffer
/// registered at `devPtr`. `offset` must be 0.
///
/// # Safety
///
/// As [`hipObjGetV2`].
#[no_mangle]
pub unsafe extern "C" fn hipObjPutV2(
    bucket: *const c_char,
    key: *const c_char,
    dev_ptr: *const c_void,
    size: u64,
    offset: u64,
    query: *const c_char,
    ops: *mut HipObjOpsV2,
    ctx: *mut c_void,
) -> HipObjError {
    let op = hipobj_wire::rc_v2::Op::Put;
    // SAFETY: this function's contract is `transfer_v2_c`'s.
    unsafe {
        transfer_v2_c(
            "hipObjPutV2",
            op,
            bucket,
            key,
            dev_ptr,
            size,
            offset,
            query,
            ops,
            ctx,
        )
    }
}

/// `hipObjGetV2` and `hipObjPutV2`, named `name`: a hipobj-rc-v2 transfer
/// of `op` through the C callbacks.
///
/// # Safety
///
/// As [`hipObjGetV2`].
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_v2_c(
    name: &'static str,
    op: hipobj_wire::rc_v2::Op,
    bucket: *const c_char,
    key: *const c_char,
    dev_ptr: *const c_void,
    size: u64,
    offset: u64,
    query: *const c_char,
    ops: *mut HipObjOpsV2,
    ctx: *mut c_void,
) -> HipObjError {
    run(name, || {
        // SAFETY: the caller's contract covers the strings.
        let t = unsafe { v2_transfer(op, bucket, key, size, offset, query) }?;
        // SAFETY: the caller's contract covers `ops`.
        let ops = unsafe { ptr::optional(ops.cast_const()) };
        c_semantics::transfer_v2(op, addr(dev_ptr), &t, |inst| callbacks_v2(inst, ops, ctx))
    })
}

/// The C callbacks of a v2 transfer, for the instance `inst`.
fn callbacks_v2(
    inst: &crate::instance::Instance,
    ops: Option<&HipObjOpsV2>,
    ctx: *mut c_void,
) -> Result<super::CallbackOpsV2> {
    super::CallbackOpsV2::new(
        ops,
        ctx,
        inst.v2_endpoint.get().cloned(),
        &inst.chosen.nic,
        inst.device.port,
        inst.device.gid_index,
    )
}

/// `hipObjShutdown`.
#[no_mangle]
pub extern "C" fn hipObjShutdown() -> HipObjError {
    run("hipObjShutdown", c_semantics::shutdown)
}

/// `hipObjBufRegister`: registers GPU memory, HIP's or CUDA's (or host
/// memory neither runtime knows).
///
/// # Safety
///
/// `[devPtr, devPtr + size)` must stay allocated until the buffer is
/// deregistered or the library shut down and every call using it returned.
#[no_mangle]
pub unsafe extern "C" fn hipObjBufRegister(dev_ptr: *mut c_void, size: usize) -> HipObjError {
    run("hipObjBufRegister", || {
        // SAFETY: the function's contract is `buf_register`'s.
        unsafe { c_semantics::buf_register(addr(dev_ptr), size) }
    })
}

/// `hipObjBufRegisterHost`: registers host memory as it is.
///
/// # Safety
///
/// As [`hipObjBufRegister`], for `hostPtr`.
#[no_mangle]
pub unsafe extern "C" fn hipObjBufRegisterHost(host_ptr: *mut c_void, size: usize) -> HipObjError {
    run("hipObjBufRegisterHost", || {
        // SAFETY: the function's contract is `buf_register_host`'s.
        unsafe { c_semantics::buf_register_host(addr(host_ptr), size) }
    })
}

/// `hipObjBufDeregister`.
///
/// The pointer is only used as a key, never dereferenced.
#[no_mangle]
pub extern "C" fn hipObjBufDeregister(dev_ptr: *mut c_void) -> HipObjError {
    run("hipObjBufDeregister", || {
        c_semantics::buf_deregister(addr(dev_ptr))
    })
}

/// `hipObjGet`: an S3 GET into a registered buffer through the callbacks.
///
/// # Safety
///
/// `ops` must be NULL (`hipObjInvalidValue`) or point to a valid
/// `hipObjOps_t` whose callbacks, when not NULL, may be called with `ctx`
/// as the header documents. `handle` is not used.
#[no_mangle]
pub unsafe extern "C" fn hipObjGet(
    _handle: *mut c_void,
    dev_ptr: *mut c_void,
    size: usize,
    offset: libc::off_t,
    ops: *mut HipObjOps,
    ctx: *mut c_void,
) -> HipObjError {
    run("hipObjGet", || {
        // SAFETY: the function's contract covers `ops` and its callbacks.
        let mut ops = CallbackOps::new(unsafe { ptr::optional(ops) }, ctx)?;
        c_semantics::get(addr(dev_ptr), size, off(offset), &mut ops)
    })
}

/// `hipObjPut`: an S3 PUT from a registered buffer through the callbacks.
///
/// # Safety
///
/// As [`hipObjGet`].
#[no_mangle]
pub unsafe extern "C" fn hipObjPut(
    _handle: *mut c_void,
    dev_ptr: *const c_void,
    size: usize,
    offset: libc::off_t,
    ops: *mut HipObjOps,
    ctx: *mut c_void,
) -> HipObjError {
    run("hipObjPut", || {
        // SAFETY: the function's contract covers `ops` and its callbacks.
        let mut ops = CallbackOps::new(unsafe { ptr::optional(ops) }, ctx)?;
        c_semantics::put(addr(dev_ptr), size, off(offset), &mut ops)
    })
}

/// `hipObjBufSync`: the staging copy of an application-driven transfer.
///
/// The pointer is only used as a key, never dereferenced.
#[no_mangle]
pub extern "C" fn hipObjBufSync(
    dev_ptr: *mut c_void,
    size: usize,
    offset: libc::off_t,
    direction: c_int,
) -> HipObjError {
    run("hipObjBufSync", || {
        let dir = sync_direction(direction)?;
        c_semantics::buf_sync(addr(dev_ptr), size, off(offset), dir)
    })
}

/// `hipObjGetRdmaToken`: a token for the first `size` bytes of a buffer.
///
/// # Safety
///
/// `outToken` must be NULL (`hipObjInvalidValue`) or valid for writing a
/// `char*`; it receives NULL on failure, or a `malloc`ed string to free
/// with `hipObjPutRdmaToken`.
#[no_mangle]
pub unsafe extern "C" fn hipObjGetRdmaToken(
    dev_ptr: *const c_void,
    size: usize,
    op: c_int,
    out_token: *mut *mut c_char,
) -> HipObjError {
    run("hipObjGetRdmaToken", || {
        // SAFETY: the function's contract.
        let out = unsafe { Out::new(out_token, "outToken") }?;
        out.write(std::ptr::null_mut());
        let dir = rdma_op(op)?;
        token_out(&out, c_semantics::get_rdma_token(addr(dev_ptr), size, dir))
    })
}

/// `hipObjGetRdmaTokenAt`: a token for `size` bytes at `offset`.
///
/// # Safety
///
/// As [`hipObjGetRdmaToken`].
#[no_mangle]
pub unsafe extern "C" fn hipObjGetRdmaTokenAt(
    dev_ptr: *const c_void,
    offset: libc::off_t,
    size: usize,
    op: c_int,
    out_token: *mut *mut c_char,
) -> HipObjError {
    run("hipObjGetRdmaTokenAt", || {
        // SAFETY: the function's contract.
        let out = unsafe { Out::new(out_token, "outToken") }?;
        out.write(std::ptr::null_mut());
        let dir = rdma_op(op)?;
        let token = c_semantics::get_rdma_token_at(addr(dev_ptr), off(offset), size, dir);
        token_out(&out, token)
    })
}

/// `hipObjGetRdmaHandshakeToken`: a handshake token for the token
/// connection.
///
/// # Safety
///
/// As [`hipObjGetRdmaToken`].
#[no_mangle]
pub unsafe extern "C" fn hipObjGetRdmaHandshakeToken(out_token: *mut *mut c_char) -> HipObjError {
    run("hipObjGetRdmaHandshakeToken", || {
        // SAFETY: the function's contract.
        let out = unsafe { Out::new(out_token, "outToken") }?;
        out.write(std::ptr::null_mut());
        token_out(&out, c_semantics::handshake_token())
    })
}

/// `hipObjCompleteRdmaHandshake`: connects the token connection to the
/// server QP the handshake's reply names.
///
/// # Safety
///
/// `reply` must be NULL (`hipObjInvalidValue`) or valid for reading
/// `replyLen` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipObjCompleteRdmaHandshake(
    reply: *const c_char,
    reply_len: usize,
) -> HipObjError {
    run("hipObjCompleteRdmaHandshake", || {
        // SAFETY: the function's contract.
        let reply = unsafe { ptr::bytes(reply, reply_len, "reply") }?;
        c_semantics::complete_handshake(reply)
    })
}

/// `hipObjPutRdmaToken`: frees a token; NULL is accepted and ignored.
///
/// # Safety
///
/// `token` must be NULL or a token a `hipObjGet*Token` function returned,
/// not yet freed.
#[no_mangle]
pub unsafe extern "C" fn hipObjPutRdmaToken(token: *mut c_char) -> HipObjError {
    run("hipObjPutRdmaToken", || {
        // SAFETY: by the contract, `token` is NULL (which free ignores) or
        // memory `malloc_cstr` allocated with malloc and nobody freed.
        unsafe { libc::free(token.cast::<c_void>()) };
        Ok(())
    })
}

/// `hipObjParseRdmaReply`: the HTTP status of an `x-amz-rdma-reply` value.
///
/// # Safety
///
/// `reply` must be NULL or valid for reading `replyLen` bytes; `httpCode`
/// NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn hipObjParseRdmaReply(
    reply: *const c_char,
    reply_len: usize,
    http_code: *mut c_int,
) -> HipObjError {
    run("hipObjParseRdmaReply", || {
        // SAFETY: the function's contract covers both pointers.
        let (out, reply) = unsafe {
            (
                Out::new(http_code, "httpCode")?,
                ptr::bytes(reply, reply_len, "reply")?,
            )
        };
        let status = c_semantics::parse_rdma_reply(reply)?;
        out.write(status);
        Ok(())
    })
}

/// `hipObjTokenClientNic`: the IPv4 address in a token's GID, or an empty
/// string for a GID that is not IPv4-mapped.
///
/// # Safety
///
/// `token` must be NULL or NUL-terminated; `nicIp` NULL or valid for
/// writing `nicIpLen` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipObjTokenClientNic(
    token: *const c_char,
    nic_ip: *mut c_char,
    nic_ip_len: usize,
) -> HipObjError {
    run("hipObjTokenClientNic", || {
        // SAFETY: the function's contract.
        let out = unsafe { OutStr::new(nic_ip, nic_ip_len, "nicIp") }?;
        out.clear();
        // SAFETY: the function's contract.
        let token = unsafe { ptr::req_str(token, "token") }?;
        let ip = c_semantics::token_client_nic(&token)?;
        // As hipObject's library: any buffer the address and its NUL fit
        // (write refuses a smaller one).
        out.write(&ip, "nicIp")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings_match_as_str() {
        for v in 0..14 {
            let op = OpError::from_raw(v).unwrap();
            assert_eq!(error_cstr(op).to_str().unwrap(), op.as_str());
        }
        assert!(OpError::from_raw(14).is_none());
    }

    #[test]
    fn version_string_matches() {
        assert_eq!(VERSION_CSTR.to_str().unwrap(), crate::VERSION_STRING);
    }

    #[test]
    fn op_and_sync_values() {
        assert_eq!(rdma_op(0).unwrap(), Direction::Put);
        assert_eq!(rdma_op(1).unwrap(), Direction::Get);
        assert_eq!(rdma_op(2).unwrap_err().op, OpError::InvalidValue);
        assert_eq!(sync_direction(0).unwrap(), SyncDirection::ToHost);
        assert_eq!(sync_direction(1).unwrap(), SyncDirection::ToDevice);
        assert_eq!(sync_direction(-1).unwrap_err().op, OpError::InvalidValue);
    }

    #[test]
    fn panics_become_internal_errors() {
        let e = run("test", || panic!("boom"));
        assert_eq!(e.op_error(), Some(OpError::InternalError));
        let s = run_str("test", VERSION_FALLBACK, || panic!("boom"));
        // SAFETY: `run_str` returns a pointer to a static C string.
        assert_eq!(unsafe { CStr::from_ptr(s) }, VERSION_FALLBACK);
    }
}
