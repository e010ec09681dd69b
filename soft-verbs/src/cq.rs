//! Completion queues and completion channels: `ibv_create_cq`,
//! `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_create_comp_channel`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`.
//!
//! A channel's descriptor is an epoll instance holding the eventfd of each
//! CQ bound to it (the soft CQ writes it once per arm, at the next
//! completion), so a program may `poll(2)` the channel's `fd` as it would
//! a kernel one, blocking or not.

use crate::convert::wc_to_c;
use crate::ffi::{guard_count, guard_errno, guard_minus1, guard_ptr};
use crate::objects::{leak, Channel, Children, Context, Cq};
use hipobj_fabric::ibverbs::abi::{ibv_comp_channel, ibv_context, ibv_cq, ibv_wc};
use hipobj_fabric::WorkCompletion;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The CQ behind an `ibv_cq` this library made.
///
/// # Safety
///
/// `cq` is NULL or a live CQ of this library.
pub unsafe fn cq_of<'a>(cq: *mut ibv_cq) -> Result<&'a Cq, c_int> {
    if cq.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `raw` is the first field of the repr(C) Cq; live by contract.
    Ok(unsafe { &*cq.cast::<Cq>() })
}

/// `ibv_create_comp_channel`.
///
/// # Safety
///
/// `context` is an open context.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    crate::ffi::called("ibv_create_comp_channel");
    guard_ptr(|| {
        // SAFETY: the caller's contract.
        unsafe { Context::from_raw(context)? };
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(leak(Channel {
            raw: ibv_comp_channel {
                context,
                fd,
                refcnt: 0,
            },
            epoll,
            children: Children::default(),
        })
        .cast::<ibv_comp_channel>())
    })
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs are bound to it.
///
/// # Safety
///
/// `channel` is a live channel of this library, destroyed once.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    crate::ffi::called("ibv_destroy_comp_channel");
    guard_errno(|| {
        if channel.is_null() {
            return Err(libc::EINVAL);
        }
        let ch = channel.cast::<Channel>();
        // SAFETY: `raw` is the first field of a live Channel (contract).
        if unsafe { (*ch).children.any() } {
            return Err(libc::EBUSY);
        }
        // SAFETY: made by Box::into_raw; freed once.
        drop(unsafe { Box::from_raw(ch) });
        Ok(())
    })
}

/// `ibv_create_cq`.
///
/// # Safety
///
/// `context` is an open context; `channel` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    crate::ffi::called("ibv_create_cq");
    guard_ptr(|| {
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_raw(context)? };
        let entries = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        if comp_vector != 0 {
            return Err(libc::EINVAL);
        }
        let cq = ctx.device.create_cq(entries).map_err(|e| e.errno())?;
        let ch = channel.cast::<Channel>();
        // SAFETY: ibv_cq is integers, pointers and pthread objects, for
        // which all-zero bytes are valid (and the static initializers).
        let mut raw: ibv_cq = unsafe { std::mem::zeroed() };
        raw.context = context;
        raw.channel = channel.cast::<c_void>();
        raw.cq_context = cq_context;
        raw.cqe = cqe;
        let obj = leak(Cq {
            raw,
            cq,
            channel: ch,
            children: Children::default(),
        });
        if !ch.is_null() {
            // SAFETY: obj was just leaked; ch is a live channel (contract).
            let (c, chan) = unsafe { (&*obj, &*ch) };
            let efd = match c.cq.event_fd() {
                Some(fd) => fd,
                None => {
                    // SAFETY: obj is ours and unshared yet.
                    drop(unsafe { Box::from_raw(obj) });
                    return Err(libc::EOPNOTSUPP);
                }
            };
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: obj as u64,
            };
            // SAFETY: both descriptors are live; ev is a valid event.
            let rc = unsafe {
                libc::epoll_ctl(chan.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, efd, &mut ev)
            };
            if rc != 0 {
                let e = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                // SAFETY: obj is ours and unshared yet.
                drop(unsafe { Box::from_raw(obj) });
                return Err(e);
            }
            chan.children.add();
        }
        Ok(obj.cast::<ibv_cq>())
    })
}

/// `ibv_destroy_cq`: `EBUSY` while QPs use it.
///
/// # Safety
///
/// `cq` is a live CQ of this library, destroyed once, its events acknowledged.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    crate::ffi::called("ibv_destroy_cq");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { cq_of(cq)? };
        if c.children.any() {
            return Err(libc::EBUSY);
        }
        if !c.channel.is_null() {
            // SAFETY: a channel outlives its CQs (its destroy is refused
            // while they live).
            let chan = unsafe { &*c.channel };
            if let Some(efd) = c.cq.event_fd() {
                // SAFETY: both descriptors are live.
                unsafe {
                    libc::epoll_ctl(
                        chan.epoll.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        efd,
                        std::ptr::null_mut(),
                    )
                };
            }
            chan.children.remove();
        }
        // SAFETY: made by Box::into_raw in ibv_create_cq; freed once.
        drop(unsafe { Box::from_raw(cq.cast::<Cq>()) });
        Ok(())
    })
}

/// `ibv_resize_cq`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_resize_cq(_cq: *mut ibv_cq, _cqe: c_int) -> c_int {
    crate::ffi::called("ibv_resize_cq");
    libc::EOPNOTSUPP
}

thread_local! {
    static POLLED: RefCell<Vec<WorkCompletion>> = const { RefCell::new(Vec::new()) };
}

/// `ibv_context_ops::poll_cq` (what the header's `ibv_poll_cq` calls): the
/// number of completions written, or a negative errno value.
///
/// # Safety
///
/// `cq` is a live CQ; `wc` has room for `num_entries` completions.
pub unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    crate::ffi::called("ibv_context_ops.poll_cq");
    guard_count(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { cq_of(cq)? };
        let max = usize::try_from(num_entries).map_err(|_| libc::EINVAL)?;
        if max == 0 {
            return Ok(0);
        }
        if wc.is_null() {
            return Err(libc::EINVAL);
        }
        POLLED.with(|p| {
            let mut out = p.borrow_mut();
            out.clear();
            let n = c.cq.poll(&mut out, max).map_err(|e| e.errno())?;
            for (i, w) in out.iter().take(n.min(max)).enumerate() {
                // SAFETY: i < max = num_entries, the room the caller gave.
                unsafe { wc.add(i).write(wc_to_c(w)) };
            }
            if n == 0 {
                // Nothing yet: the bytes are moved by this process's own
                // threads (and the peer's), which a program spinning on an
                // empty CQ, as perftest does, would otherwise starve on a
                // host with few cores. A NIC's empty poll costs nothing;
                // this one gives the CPU back.
                std::thread::yield_now();
            }
            Ok(n.min(max) as c_int)
        })
    })
}

/// `ibv_context_ops::req_notify_cq`: the next completion added to the CQ
/// raises one event on its channel; completions already queued raise none
/// (as libibverbs documents it: poll after arming). `solicited_only` is
/// served as all completions (a superset: every solicited completion
/// raises it).
///
/// # Safety
///
/// `cq` is a live CQ.
pub unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    crate::ffi::called("ibv_context_ops.req_notify_cq");
    guard_errno(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { cq_of(cq)? };
        c.cq.arm_next().map_err(|e| e.errno())
    })
}

/// `ibv_get_cq_event`: waits for an event on the channel (or, when its
/// descriptor is non-blocking, returns -1 with `EAGAIN` if none is there).
///
/// # Safety
///
/// `channel` is a live channel; `cq` and `cq_context` are writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    crate::ffi::called("ibv_get_cq_event");
    guard_minus1(|| {
        if channel.is_null() || cq.is_null() || cq_context.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `raw` is the first field of a live Channel (contract).
        let chan = unsafe { &*channel.cast::<Channel>() };
        let fd = chan.epoll.as_raw_fd();
        // SAFETY: fcntl on a live descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        let timeout = if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
            0
        } else {
            -1
        };
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        let n = loop {
            // SAFETY: one event's room, on a live epoll descriptor.
            let n = unsafe { libc::epoll_wait(fd, &mut ev, 1, timeout) };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        if n == 0 {
            return Err(libc::EAGAIN);
        }
        let c = ev.u64 as usize as *mut Cq;
        // SAFETY: the event's data is a CQ bound to this channel, live
        // until destroyed (which removes it from the epoll set first).
        let cqr = unsafe { &*c };
        cqr.cq.take_events().map_err(|e| e.errno())?;
        // SAFETY: writable by the caller's contract.
        unsafe {
            cq.write(c.cast::<ibv_cq>());
            cq_context.write(cqr.raw.cq_context);
        }
        Ok(())
    })
}

/// `ibv_ack_cq_events`.
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    crate::ffi::called("ibv_ack_cq_events");
    if cq.is_null() {
        return;
    }
    // SAFETY: a live CQ (contract); the count is the program's to read, as
    // in rdma-core, and only this call writes it.
    unsafe {
        let p = std::ptr::addr_of_mut!((*cq).comp_events_completed);
        p.write(p.read().wrapping_add(nevents));
    }
}

/// `ibv_poll_cq`, exported for programs that look it up by name.
///
/// # Safety
///
/// As [`poll_cq`].
#[no_mangle]
pub unsafe extern "C" fn ibv_poll_cq(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    crate::ffi::called("ibv_poll_cq");
    // SAFETY: same contract.
    unsafe { poll_cq(cq, num_entries, wc) }
}

/// `ibv_req_notify_cq`, exported for programs that look it up by name.
///
/// # Safety
///
/// As [`req_notify_cq`].
#[no_mangle]
pub unsafe extern "C" fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    crate::ffi::called("ibv_req_notify_cq");
    // SAFETY: same contract.
    unsafe { req_notify_cq(cq, solicited_only) }
}
