//! The C API's semantics: the library's functions as `include/hipobj.h`
//! has them, on the process-wide current instance (`ffi::exports` calls
//! them; the Rust API of a library of one's own is `Hipobj` in
//! `handle.rs`). Each finds the instance once and passes it down, so a
//! call keeps the instance it started with even if another thread shuts
//! the library down meanwhile.

use crate::buffer::Direction;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::instance::{self, current};
use crate::options::Options;
use crate::platform::system::system_platform;
use crate::platform::Platform;
use crate::transfer::{self, S3Ops, SyncDirection};

/// `hipObjInit` with the production platform and the environment's options.
pub fn init(config: &Config) -> Result<()> {
    let options = Options::from_env();
    let platform = system_platform(options.provider)?;
    instance::init_with(platform, options, config)
}

/// `hipObjInit` with a given platform and options (tests).
pub fn init_with(platform: Platform, options: Options, config: &Config) -> Result<()> {
    instance::init_with(platform, options, config)
}

/// `hipObjShutdown`.
pub fn shutdown() -> Result<()> {
    instance::shutdown()
}

/// `hipObjBufRegister`.
///
/// # Safety
///
/// `[addr, addr + size)` must stay allocated until the buffer is
/// deregistered or the library shut down and every call returned.
pub unsafe fn buf_register(addr: usize, size: usize) -> Result<()> {
    let inst = current()?;
    // SAFETY: the caller's promise.
    unsafe {
        inst.buffers
            .register(&inst.device, &inst.platform.hip, &inst.options, addr, size)
    }
}

/// `hipObjBufRegisterHost`.
///
/// # Safety
///
/// As [`buf_register`].
pub unsafe fn buf_register_host(addr: usize, size: usize) -> Result<()> {
    let inst = current()?;
    // SAFETY: the caller's promise.
    unsafe { inst.buffers.register_host(&inst.device, addr, size) }
}

/// `hipObjBufDeregister`.
pub fn buf_deregister(addr: usize) -> Result<()> {
    if addr == 0 {
        return Err(Error::invalid("null buffer address"));
    }
    let inst = current()?;
    inst.abandoned.prune();
    inst.buffers.deregister(addr)
}

/// `hipObjGet`.
pub fn get(addr: usize, size: usize, offset: i64, ops: &mut dyn S3Ops) -> Result<()> {
    let inst = current()?;
    transfer::transfer(&inst, Direction::Get, addr, size, offset, ops)
}

/// `hipObjPut`.
pub fn put(addr: usize, size: usize, offset: i64, ops: &mut dyn S3Ops) -> Result<()> {
    let inst = current()?;
    transfer::transfer(&inst, Direction::Put, addr, size, offset, ops)
}

/// `hipObjBufSync`.
pub fn buf_sync(addr: usize, size: usize, offset: i64, dir: SyncDirection) -> Result<()> {
    let inst = current()?;
    transfer::buf_sync(&inst, addr, size, offset, dir)
}

/// `hipObjGetRdmaToken`: a token for the first `size` bytes of a buffer.
pub fn get_rdma_token(addr: usize, size: usize, dir: Direction) -> Result<String> {
    let inst = current()?;
    transfer::rdma_token(&inst, addr, 0, size, dir)
}

/// `hipObjGetRdmaTokenAt`: a token for `size` bytes at `offset`.
pub fn get_rdma_token_at(addr: usize, offset: i64, size: usize, dir: Direction) -> Result<String> {
    let inst = current()?;
    transfer::rdma_token(&inst, addr, offset, size, dir)
}

/// `hipObjGetRdmaHandshakeToken`.
pub fn handshake_token() -> Result<String> {
    let inst = current()?;
    transfer::handshake_token(&inst)
}

/// `hipObjCompleteRdmaHandshake`.
pub fn complete_handshake(reply: &[u8]) -> Result<()> {
    let inst = current()?;
    transfer::complete_handshake(&inst, reply)
}

/// `hipObjParseRdmaReply` (needs no instance).
pub fn parse_rdma_reply(reply: &[u8]) -> Result<i32> {
    transfer::parse_reply(reply)
}

/// `hipObjTokenClientNic` (needs no instance).
pub fn token_client_nic(token: &str) -> Result<String> {
    transfer::token_client_nic(token)
}

/// `hipObjInitV2`: `hipObjInit`, a transfer deadline (`None` for the
/// default) and the control endpoint handed to the v2 callbacks.
pub fn init_v2(
    config: &Config,
    transfer_deadline: Option<std::time::Duration>,
    control_endpoint: std::ffi::CString,
) -> Result<()> {
    let mut options = Options::from_env();
    if let Some(d) = transfer_deadline {
        options.transfer_timeout = d;
    }
    let platform = system_platform(options.provider)?;
    init_v2_with(platform, options, config, control_endpoint)
}

/// `hipObjInitV2` with a given platform and options (tests).
pub fn init_v2_with(
    platform: Platform,
    options: Options,
    config: &Config,
    control_endpoint: std::ffi::CString,
) -> Result<()> {
    instance::init_with(platform, options, config)?;
    if let Ok(inst) = current() {
        let _ = inst.v2_endpoint.set(control_endpoint);
    }
    Ok(())
}

/// `hipObjGetV2` / `hipObjPutV2`: a hipobj-rc-v2 transfer of the buffer
/// registered at `addr`, from its start, through the callbacks `ops`
/// builds for the current instance (the C ABI's adapter).
pub fn transfer_v2<O: crate::v2::V2Ops>(
    op: hipobj_wire::rc_v2::Op,
    addr: usize,
    t: &crate::v2::V2Transfer,
    ops: impl FnOnce(&crate::instance::Instance) -> Result<O>,
) -> Result<()> {
    let inst = current()?;
    let mut ops = ops(&inst)?;
    crate::v2::run(&inst, op, addr, t, &mut ops).map(|_| ())
}
