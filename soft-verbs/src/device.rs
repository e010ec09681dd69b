//! The device list and the queries: `ibv_get_device_list` and its
//! companions, `ibv_query_device` (and `_ex`), `ibv_query_port`, the GID
//! and P_Key queries. One device per `HIPOBJ_SOFT_ADDRS` address (default
//! `127.0.0.1`), named `soft0`, `soft1` ... as the soft provider names them,
//! each with one RoCE v2 port whose one GID is its address, IPv4-mapped.

use crate::ffi::{guard_errno, guard_minus1, guard_ptr, IBV_GID_TYPE_SYSFS_ROCE_V2};
use crate::objects::{Context, DeviceRec};
use hipobj_fabric::ibverbs::abi::{
    ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry, ibv_port_attr,
    IBV_GID_TYPE_ROCE_V2, IBV_LINK_LAYER_ETHERNET,
};
use hipobj_fabric::soft::{SoftConfig, SoftProvider, ENV_ADDRS};
use hipobj_fabric::PortState;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::{offset_of, size_of};
use std::net::Ipv4Addr;
use std::sync::OnceLock;

/// The largest QP depth, SGE count, CQ size and READ depth the soft provider
/// takes, as the device reports them.
pub const MAX_QP_WR: c_int = 16384;
/// Scatter/gather entries per work request.
pub const MAX_SGE: c_int = 32;
/// Completions per CQ.
pub const MAX_CQE: c_int = 1 << 22;
/// Outstanding READs per QP, each way.
pub const MAX_RD_ATOM: c_int = 16;

/// The process's device list and the provider that opens them, made on
/// first use from the environment.
#[derive(Debug)]
pub struct Devices {
    /// The soft provider (its settings from the environment).
    pub provider: SoftProvider,
    /// The devices, in `HIPOBJ_SOFT_ADDRS` order; they live as long as the
    /// process, as rdma-core's do.
    pub list: Vec<&'static DeviceRec>,
}

fn parse_addrs() -> Result<Vec<Ipv4Addr>, c_int> {
    match std::env::var(ENV_ADDRS) {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|a| a.trim().parse::<Ipv4Addr>().map_err(|_| libc::EINVAL))
            .collect(),
        _ => Ok(vec![Ipv4Addr::LOCALHOST]),
    }
}

fn copy_name(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

/// The node GUID of the device bound to `ip`: an EUI-64 made of a locally
/// administered prefix and the address, so two hosts' devices differ.
pub fn node_guid(ip: Ipv4Addr) -> [u8; 8] {
    let o = ip.octets();
    [0x02, 0x00, o[0], 0xff, 0xfe, o[1], o[2], o[3]]
}

fn device_rec(index: usize, ip: Ipv4Addr) -> DeviceRec {
    // SAFETY: ibv_device is integers, byte arrays and optional function
    // pointers: all-zero bytes are a valid value of each.
    let mut dev: ibv_device = unsafe { std::mem::zeroed() };
    dev.node_type = 1; // IBV_NODE_CA
    dev.transport_type = 0; // IBV_TRANSPORT_IB (RoCE is too)
    let name = format!("hipobj_soft{index}");
    copy_name(&mut dev.name, &name);
    copy_name(&mut dev.dev_name, &format!("uverbs{index}"));
    copy_name(
        &mut dev.dev_path,
        &format!("/sys/class/infiniband_verbs/uverbs{index}"),
    );
    copy_name(
        &mut dev.ibdev_path,
        &format!("/sys/class/infiniband/{name}"),
    );
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&ip.octets());
    DeviceRec {
        dev,
        verbs_tail: [0; 8],
        ip,
        index: index as c_int,
        guid_be: u64::from_ne_bytes(node_guid(ip)),
        gid: ibv_gid_entry {
            gid: ibv_gid { raw: gid },
            gid_index: 0,
            port_num: 1,
            gid_type: IBV_GID_TYPE_ROCE_V2,
            ndev_ifindex: 0,
        },
    }
}

/// The device list, made once per process (`EINVAL` when
/// `HIPOBJ_SOFT_ADDRS` is not a list of IPv4 addresses).
pub fn devices() -> Result<&'static Devices, c_int> {
    static DEVICES: OnceLock<Result<Devices, c_int>> = OnceLock::new();
    DEVICES
        .get_or_init(|| {
            let addrs = parse_addrs()?;
            let list = addrs
                .iter()
                .enumerate()
                .map(|(i, ip)| &*Box::leak(Box::new(device_rec(i, *ip))))
                .collect();
            Ok(Devices {
                provider: SoftProvider::new(addrs, SoftConfig::from_env()),
                list,
            })
        })
        .as_ref()
        .map_err(|e| *e)
}

/// The device record behind an `ibv_device` of the list.
pub fn device_rec_of(dev: *mut ibv_device) -> Result<&'static DeviceRec, c_int> {
    let d = devices()?;
    d.list
        .iter()
        .copied()
        .find(|r| std::ptr::eq(&r.dev, dev))
        .ok_or(libc::EINVAL)
}

/// `ibv_get_device_list`: a NULL-terminated array the caller frees with
/// `ibv_free_device_list`.
///
/// # Safety
///
/// `num_devices` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    crate::ffi::called("ibv_get_device_list");
    guard_ptr(|| {
        let d = devices()?;
        let n = d.list.len();
        // SAFETY: calloc of n + 1 pointers (never overflows for a list of
        // addresses from one environment variable); checked for NULL.
        let arr =
            unsafe { libc::calloc(n + 1, size_of::<*mut ibv_device>()) }.cast::<*mut ibv_device>();
        if arr.is_null() {
            return Err(libc::ENOMEM);
        }
        for (i, r) in d.list.iter().enumerate() {
            // SAFETY: i < n + 1 slots allocated above; the records live for
            // the process, and programs treat them as read-only.
            unsafe { *arr.add(i) = std::ptr::from_ref(&r.dev).cast_mut() };
        }
        if !num_devices.is_null() {
            // SAFETY: non-NULL, writable by the caller's contract.
            unsafe { *num_devices = n as c_int };
        }
        Ok(arr)
    })
}

/// `ibv_free_device_list`.
///
/// # Safety
///
/// `list` is NULL or a list `ibv_get_device_list` returned, freed once.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    crate::ffi::called("ibv_free_device_list");
    // SAFETY: the list was allocated by calloc in ibv_get_device_list;
    // free(NULL) does nothing.
    unsafe { libc::free(list.cast::<c_void>()) };
}

/// `ibv_get_device_name`.
///
/// # Safety
///
/// `device` is NULL or a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    crate::ffi::called("ibv_get_device_name");
    match device_rec_of(device) {
        Ok(r) => r.dev.name.as_ptr(),
        Err(_) => std::ptr::null(),
    }
}

/// `ibv_get_device_guid` (big-endian, as stored).
///
/// # Safety
///
/// `device` is NULL or a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    crate::ffi::called("ibv_get_device_guid");
    device_rec_of(device).map_or(0, |r| r.guid_be)
}

/// `ibv_get_device_index`: -1 for a device that is not of the list.
///
/// # Safety
///
/// `device` is NULL or a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    crate::ffi::called("ibv_get_device_index");
    device_rec_of(device).map_or(-1, |r| r.index)
}

/// The device's attributes: plausible for a RoCE v2 RC NIC, and exactly the
/// limits the soft provider enforces.
pub fn device_attr(ctx: &Context) -> ibv_device_attr {
    let info = ctx.device.info();
    let mut a = ibv_device_attr::default();
    let fw = b"hipobj-soft 1.0";
    for (d, s) in a.fw_ver.iter_mut().zip(fw) {
        *d = *s as c_char;
    }
    a.node_guid = ctx.rec.guid_be;
    a.sys_image_guid = ctx.rec.guid_be;
    a.max_mr_size = info.max_mr_size;
    a.page_size_cap = !0xfff;
    a.vendor_id = info.vendor_id;
    a.vendor_part_id = info.vendor_part_id;
    a.hw_ver = 0;
    a.max_qp = 1 << 16;
    a.max_qp_wr = MAX_QP_WR;
    // IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN
    a.device_cap_flags = (1 << 11) | (1 << 12);
    a.max_sge = MAX_SGE;
    a.max_sge_rd = MAX_SGE;
    a.max_cq = 1 << 16;
    a.max_cqe = MAX_CQE;
    a.max_mr = 1 << 20;
    a.max_pd = 1 << 16;
    a.max_qp_rd_atom = info.max_qp_rd_atom.min(MAX_RD_ATOM as u32) as c_int;
    a.max_qp_init_rd_atom = info.max_qp_init_rd_atom.min(MAX_RD_ATOM as u32) as c_int;
    a.max_res_rd_atom = a.max_qp_rd_atom.saturating_mul(a.max_qp);
    a.atomic_cap = 0; // IBV_ATOMIC_NONE
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    a.phys_port_cnt = info.phys_port_cnt;
    a
}

/// `ibv_query_device`.
///
/// # Safety
///
/// `context` is an open context; `attr` is writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    crate::ffi::called("ibv_query_device");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { attr.write(device_attr(ctx)) };
        Ok(())
    })
}

/// `verbs_context::query_device_ex`: the original attributes, the extended
/// ones zero (no ODP, TSO, RSS, timestamps, tag matching ...).
///
/// # Safety
///
/// `context` is an open context; `attr` has `attr_size` writable bytes.
pub unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const c_void,
    attr: *mut c_void,
    attr_size: usize,
) -> c_int {
    crate::ffi::called("verbs_context.query_device_ex");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        if !input.is_null() {
            // `struct ibv_query_device_ex_input { uint32_t comp_mask; }`
            // SAFETY: non-NULL input is readable by the caller's contract.
            if unsafe { *input.cast::<u32>() } != 0 {
                return Err(libc::EINVAL);
            }
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr has attr_size writable bytes (the caller's
        // contract), and ibv_device_attr is at its start.
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            attr.cast::<ibv_device_attr>().write(device_attr(ctx));
        }
        Ok(())
    })
}

/// The port's attributes (port 1 only).
pub fn port_attr(ctx: &Context, port: u8) -> Result<ibv_port_attr, c_int> {
    let p = ctx.device.query_port(port).map_err(|e| e.errno())?;
    let state = match p.state {
        PortState::Down => 1,
        PortState::Init => 2,
        PortState::Armed => 3,
        PortState::Active => 4,
        PortState::Other(v) => v,
    };
    Ok(ibv_port_attr {
        state,
        max_mtu: p.max_mtu as u32,
        active_mtu: p.active_mtu as u32,
        gid_tbl_len: p.gid_tbl_len as c_int,
        // IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS, as RoCE ports report.
        port_cap_flags: (1 << 16) | (1 << 26),
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: p.lid,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width: 2,  // 4X
        active_speed: 32, // EDR: 4X EDR, 100 Gb/s
        phys_state: 5,    // LinkUp
        link_layer: IBV_LINK_LAYER_ETHERNET,
        flags: 0,
        port_cap_flags2: 0,
    })
}

fn write_port_attr(
    ctx: &Context,
    port: u8,
    out: *mut ibv_port_attr,
    len: usize,
) -> Result<(), c_int> {
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let a = port_attr(ctx, port)?;
    let n = len.min(size_of::<ibv_port_attr>());
    // SAFETY: `out` has at least `n` writable bytes (the caller's contract
    // gives `len`), and `a` is a local of size_of::<ibv_port_attr>() >= n.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::from_ref(&a).cast::<u8>(), out.cast::<u8>(), n)
    };
    Ok(())
}

/// `verbs_context::query_port` (what the header's `ibv_query_port` calls):
/// writes `port_attr_len` bytes at most.
///
/// # Safety
///
/// `context` is an open context; `port_attr` has `port_attr_len` writable bytes.
pub unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    crate::ffi::called("verbs_context.query_port");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        write_port_attr(ctx, port_num, port_attr, port_attr_len)
    })
}

/// `ibv_query_port`, the exported compatibility entry: it writes the
/// attributes up to `link_layer` (rdma-core's `_compat_ibv_port_attr`
/// ends there).
///
/// # Safety
///
/// `context` is an open context; `port_attr` is writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    crate::ffi::called("ibv_query_port");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        let len = offset_of!(ibv_port_attr, link_layer) + 1;
        write_port_attr(ctx, port_num, port_attr, len)
    })
}

fn gid_entry(ctx: &Context, port: u32, index: u32) -> Result<ibv_gid_entry, c_int> {
    if port != 1 || index != 0 {
        return Err(libc::EINVAL);
    }
    Ok(ctx.rec.gid)
}

/// `ibv_query_gid`: 0, or -1 with `EINVAL` for another port or index.
///
/// # Safety
///
/// `context` is an open context; `gid` is writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    crate::ffi::called("ibv_query_gid");
    guard_minus1(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        let index = u32::try_from(index).map_err(|_| libc::EINVAL)?;
        let e = gid_entry(ctx, u32::from(port_num), index)?;
        if gid.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { gid.write(e.gid) };
        Ok(())
    })
}

/// `_ibv_query_gid_ex` (the header's `ibv_query_gid_ex`): 0 or an errno value.
///
/// # Safety
///
/// `context` is an open context; `entry` has `entry_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    crate::ffi::called("_ibv_query_gid_ex");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        if flags != 0 || entry.is_null() || entry_size < size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let e = gid_entry(ctx, port_num, gid_index)?;
        // SAFETY: entry has at least size_of::<ibv_gid_entry>() writable bytes.
        unsafe { entry.write(e) };
        Ok(())
    })
}

/// `_ibv_query_gid_table` (the header's `ibv_query_gid_table`): the number
/// of entries written, or a negative errno value.
///
/// # Safety
///
/// `context` is an open context; `entries` has `max_entries` entries of
/// `entry_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    crate::ffi::called("_ibv_query_gid_table");
    let rc = guard_errno(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        if flags != 0 || entries.is_null() || entry_size < size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        if max_entries < 1 {
            return Err(libc::EINVAL);
        }
        // SAFETY: at least one entry of entry_size bytes is writable.
        unsafe { entries.write(ctx.rec.gid) };
        Ok(())
    });
    if rc == 0 {
        1
    } else {
        -(rc as isize)
    }
}

/// `ibv_query_gid_type` (rdma-core private, which `ibv_devinfo` binds):
/// RoCE v2 for the one entry.
///
/// # Safety
///
/// `context` is an open context; `gid_type` is writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut u32,
) -> c_int {
    crate::ffi::called("ibv_query_gid_type");
    guard_minus1(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        gid_entry(ctx, u32::from(port_num), index)?;
        if gid_type.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { gid_type.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
        Ok(())
    })
}

/// `ibv_query_pkey`: the default P_Key (0xffff) at index 0.
///
/// # Safety
///
/// `context` is an open context; `pkey` is writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    crate::ffi::called("ibv_query_pkey");
    guard_minus1(|| {
        // SAFETY: the caller's contract.
        unsafe { Context::from_raw(context)? };
        if port_num != 1 || index != 0 || pkey.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { pkey.write(0xffffu16.to_be()) };
        Ok(())
    })
}

/// `ibv_get_pkey_index`: 0 for the default P_Key, -1 otherwise.
///
/// # Safety
///
/// `context` is an open context.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    crate::ffi::called("ibv_get_pkey_index");
    // SAFETY: the caller's contract.
    let ok = unsafe { Context::from_raw(context) }.is_ok();
    if ok && port_num == 1 && u16::from_be(pkey) == 0xffff {
        0
    } else {
        -1
    }
}

/// `ibv_read_sysfs_file`: reads `dir/file` into `buf` (at most `size` - 1
/// bytes, NUL-terminated, a trailing newline dropped); the length, or -1.
/// A soft device has no sysfs directory, so its files are never found.
///
/// # Safety
///
/// `dir` and `file` are C strings; `buf` has `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    crate::ffi::called("ibv_read_sysfs_file");
    let r = std::panic::catch_unwind(|| {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: C strings by the caller's contract.
        let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let path = std::path::Path::new(&*dir.to_string_lossy()).join(&*file.to_string_lossy());
        let Ok(mut data) = std::fs::read(&path) else {
            return -1;
        };
        data.truncate(size - 1);
        if data.last() == Some(&b'\n') {
            data.pop();
        }
        // SAFETY: data.len() <= size - 1, so data and the NUL fit in buf.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), data.len());
            *buf.add(data.len()) = 0;
        }
        data.len() as c_int
    });
    r.unwrap_or(-1)
}

/// `ibv_get_sysfs_path`.
#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    crate::ffi::called("ibv_get_sysfs_path");
    c"/sys".as_ptr()
}
