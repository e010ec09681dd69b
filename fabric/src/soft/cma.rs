//! The same-host path: payload moved by cross-memory attach
//! (`process_vm_writev` / `process_vm_readv`, as MPI and UCX do for
//! intra-node RMA), one copy instead of two through a socket.
//!
//! Only the requester copies, and only ranges the responder has checked and
//! granted ([`super::packet::FLAG_CMA`]); the responder keeps the region
//! registered until the requester says it is done. The kernel allows the
//! copy only where the requester could already read and write the
//! responder's memory (the ptrace access check: same user, or
//! `CAP_SYS_PTRACE`), so the path grants no access that does not exist;
//! where it refuses (`EPERM`, a seccomp filter's `ENOSYS`), the requester
//! says so and sends the bytes over the stream, and stops using the path
//! on that connection.
//!
//! Which process to copy to is never taken on trust: the responder names
//! its process id in its hello answer, and the requester uses it only if
//! ([`verify_peer`]):
//!
//! - that process holds the other end of this very TCP connection (its
//!   socket inode in the process's descriptor table, looked up through
//!   `/proc`, as `ss -p` does): a responder cannot aim the requester's
//!   copies at a third process;
//! - the far end's socket belongs to the requester's own user (the uid
//!   `/proc/net/tcp` gives the socket), and so does the process, with all
//!   four of its uids (real, effective, saved, filesystem): a client that
//!   hands its socket to a process of another user (a setuid program, by
//!   `fork`+`exec` or `SCM_RIGHTS`) is not copied to;
//! - the requester itself is neither root nor holds `CAP_SYS_PTRACE`,
//!   unless its configuration says so (`HIPOBJ_SOFT_CMA=privileged`) or
//!   the responder is the requester's own process: the kernel's ptrace
//!   check is made against the requester's privilege, not the client's,
//!   and a privileged gateway could otherwise be aimed at any process of
//!   the host;
//! - the process is still the one checked: a pidfd is opened before the
//!   checks and held for the connection, and the process is confirmed
//!   alive through it before every copy, so that a pid the client freed
//!   (it exited) and the system gave to another process is never copied
//!   to.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};

/// Whether the connection's two ends are on this host: a loopback address,
/// or the device's own.
pub(crate) fn is_local(peer: IpAddr, own: IpAddr) -> bool {
    peer.is_loopback() || peer == own
}

/// `/proc/net/tcp`'s `ADDR:PORT` for an IPv4 socket address: the address
/// as the kernel prints the raw 32-bit value (`%08X` in host order), the
/// port in hex.
fn proc_net_form(a: SocketAddr) -> Option<String> {
    let SocketAddr::V4(v4) = a else { return None };
    let raw = u32::from_ne_bytes(v4.ip().octets());
    Some(format!("{raw:08X}:{:04X}", v4.port()))
}

/// The uid and inode of the socket at the far end of `stream` (the one
/// whose local address is `stream`'s peer and whose remote address is
/// `stream`'s own).
fn far_end(stream: &TcpStream) -> Option<(u32, u64)> {
    let near = proc_net_form(stream.local_addr().ok()?)?;
    let far = proc_net_form(stream.peer_addr().ok()?)?;
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() <= 9 || f[1] != far || f[2] != near {
            return None;
        }
        let uid = f[7].parse::<u32>().ok()?;
        let inode = f[9].parse::<u64>().ok().filter(|&inode| inode != 0)?;
        Some((uid, inode))
    })
}

/// Whether process `pid` holds the far end of `stream`.
#[cfg(test)]
pub(crate) fn peer_process_holds(stream: &TcpStream, pid: u32) -> bool {
    far_end(stream).is_some_and(|(_, inode)| process_holds(pid, inode))
}

/// Whether process `pid` holds the socket `inode` (one of its descriptors
/// is that socket). `/proc/net/tcp` is read once per check by the caller
/// (its cost grows with every socket of the host, TIME_WAIT ones
/// included).
fn process_holds(pid: u32, inode: u64) -> bool {
    if pid == 0 {
        return false;
    }
    let want = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|l| l.as_os_str() == want.as_str())
}

/// The responder's process, checked for the same-host path, held by a
/// pidfd.
#[derive(Debug)]
pub(crate) struct PeerProcess {
    /// Its process id.
    pub pid: u32,
    pidfd: std::os::fd::OwnedFd,
}

impl PeerProcess {
    /// Whether the process the pidfd refers to is still alive (so that its
    /// pid still names it).
    pub(crate) fn alive(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        // SAFETY: pidfd_send_signal with signal 0 only checks that the
        // process exists and may be signalled; the fd is ours and open,
        // the info pointer null as the call allows.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
        r == 0
    }
}

/// Why the same-host path is not used with a responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// This process is root or holds CAP_SYS_PTRACE, and the configuration
    /// does not allow the path then.
    Privileged,
    /// No pidfd could be opened for the named process.
    NoProcess,
    /// The named process does not hold the connection's far end.
    NotTheHolder,
    /// The far end's socket belongs to another user.
    SocketOfAnotherUser,
    /// The process runs (in part) as another user.
    ProcessOfAnotherUser,
}

/// The four uids (real, effective, saved, filesystem) of `pid`'s `status`.
fn process_uids(pid: &str) -> Option<[u32; 4]> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let ids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    ids.try_into().ok()
}

/// Whether this process is root or holds `CAP_SYS_PTRACE` (effective).
fn privileged() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    let euid = process_uids("self").map_or(0, |u| u[1]);
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    euid == 0 || caps & (1 << CAP_SYS_PTRACE) != 0
}

/// Checks the responder's process `pid` for the same-host path on
/// `stream` (see the module's doc); `allow_privileged`: the path may be
/// used while this process is root or holds `CAP_SYS_PTRACE`.
pub(crate) fn verify_peer(
    stream: &TcpStream,
    pid: u32,
    allow_privileged: bool,
) -> Result<PeerProcess, Refusal> {
    // Copies into this very process lend no privilege to anyone.
    if !allow_privileged && pid != std::process::id() && privileged() {
        return Err(Refusal::Privileged);
    }
    let raw = libc::pid_t::try_from(pid).map_err(|_| Refusal::NoProcess)?;
    if raw <= 0 {
        return Err(Refusal::NoProcess);
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor (or -1); nothing of ours is passed by pointer.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0u32) };
    let fd = i32::try_from(fd)
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or(Refusal::NoProcess)?;
    // SAFETY: `fd` was just returned by pidfd_open: an open descriptor
    // owned by nothing else.
    let pidfd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let peer = PeerProcess { pid, pidfd };
    // The far end's socket, read once for both checks below.
    let Some((far_uid, far_inode)) = far_end(stream) else {
        return Err(Refusal::NotTheHolder);
    };
    if !process_holds(pid, far_inode) {
        return Err(Refusal::NotTheHolder);
    }
    let me = process_uids("self")
        .map(|u| u[1])
        .ok_or(Refusal::NoProcess)?;
    if far_uid != me {
        return Err(Refusal::SocketOfAnotherUser);
    }
    if process_uids(&pid.to_string()) != Some([me; 4]) {
        return Err(Refusal::ProcessOfAnotherUser);
    }
    // Checked while the pidfd named it: still the same process.
    if !peer.alive() {
        return Err(Refusal::NoProcess);
    }
    Ok(peer)
}

/// Copies between local pieces and one remote range of process `pid`:
/// writes them to `remote..` (`write`), or reads `remote..` into them.
///
/// # Safety
///
/// Every `(addr, len)` in `local` must be memory of this process that stays
/// valid (and, for a read, writable and referenced by no Rust reference)
/// for the call. The remote range must be one its owner granted.
pub(crate) unsafe fn copy(
    pid: u32,
    write: bool,
    local: &[(usize, usize)],
    remote: usize,
) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    let mut at = remote;
    for &(addr, len) in local {
        let mut done = 0usize;
        while done < len {
            let l = libc::iovec {
                iov_base: (addr + done) as *mut libc::c_void,
                iov_len: len - done,
            };
            let r = libc::iovec {
                iov_base: (at + done) as *mut libc::c_void,
                iov_len: len - done,
            };
            // SAFETY: one local and one remote iovec, both live for the
            // call; the local one is the caller's valid memory, the remote
            // one is checked by the kernel against the target's mappings.
            let n = unsafe {
                if write {
                    libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
                } else {
                    libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
                }
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            done += n as usize;
        }
        at += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn the_owner_of_a_connections_far_end_is_found_and_no_other() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        // Both ends are this process's.
        assert!(peer_process_holds(&c, std::process::id()));
        // Not process 1's (nor any made-up one's).
        assert!(!peer_process_holds(&c, 1));
        assert!(!peer_process_holds(&c, 0));
    }

    #[test]
    fn a_peer_is_verified_by_user_holder_and_privilege() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let me = std::process::id();
        // This process holds the far end, as its own user: verified when
        // the privilege rule allows it.
        let allowed = verify_peer(&c, me, true).map(|p| p.pid);
        assert_eq!(allowed, Ok(me));
        // A process that does not hold the connection, or none at all.
        assert_eq!(verify_peer(&c, 1, true).err(), Some(Refusal::NotTheHolder));
        assert_eq!(verify_peer(&c, 0, true).err(), Some(Refusal::NoProcess));
        assert_eq!(
            verify_peer(&c, u32::MAX, true).err(),
            Some(Refusal::NoProcess)
        );
        // This very process: the privilege rule does not apply.
        assert!(verify_peer(&c, me, false).is_ok());
    }

    /// A process of another user (started as uid 65534 where this test
    /// runs as root) is never verified, and a pidfd sees its end.
    #[test]
    fn a_process_of_another_user_is_refused_and_its_end_is_seen() {
        use std::os::unix::process::CommandExt as _;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let Ok(mut child) = std::process::Command::new("sleep")
            .arg("30")
            .uid(65534)
            .spawn()
        else {
            eprintln!("skipped: starting a process as another user needs root");
            return;
        };
        let pid = child.id();
        assert_eq!(process_uids(&pid.to_string()).map(|u| u[1]), Some(65534));
        assert!(verify_peer(&c, pid, true).is_err());
        // The pidfd of a process that ends says so.
        let raw = libc::pid_t::try_from(pid).unwrap();
        // SAFETY: as in verify_peer.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0u32) };
        assert!(fd >= 0);
        // SAFETY: a descriptor just returned, owned by nothing else.
        let pidfd = unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(
                i32::try_from(fd).unwrap(),
            )
        };
        let p = PeerProcess { pid, pidfd };
        assert!(p.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!p.alive(), "the pidfd still says alive after the end");
    }

    #[test]
    fn copies_within_this_process() {
        let src: Vec<u8> = (0..=255u8).cycle().take(3 << 20).collect();
        let mut dst = vec![0u8; src.len()];
        let pieces = [
            (src.as_ptr() as usize, 1 << 20),
            (src.as_ptr() as usize + (1 << 20), 2 << 20),
        ];
        // SAFETY: both buffers are live for the call and `dst` is not
        // referenced while it is written.
        let r = unsafe { copy(std::process::id(), true, &pieces, dst.as_mut_ptr() as usize) };
        match r {
            Ok(()) => assert!(dst == src),
            // A sandbox that refuses the call: the provider falls back.
            Err(e) => eprintln!("process_vm_writev refused here: {e}"),
        }
    }
}
