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
//! its process id and the descriptor number of its end of the connection
//! in its hello answer, and the requester uses them only if
//! ([`verify_peer`]):
//!
//! - that process holds the other end of this very TCP connection: the
//!   requester takes a duplicate of the named descriptor from it
//!   (`pidfd_getfd`, which the kernel allows under the same ptrace check
//!   as the copies themselves) and finds a TCP stream socket whose local
//!   address is this connection's far address and whose peer is its near
//!   one, in the requester's own network namespace (the sockets'
//!   `SO_NETNS_COOKIE`, which needs no privilege; `SIOCGSKNS`, which
//!   needs `CAP_NET_ADMIN`, only on kernels without it): a
//!   responder cannot aim the requester's copies at a third process. No
//!   table of the host is walked (`/proc/net/tcp` costs milliseconds per
//!   read on a large host, whatever its number of sockets);
//! - that socket belongs to the requester's own user (its owner, as
//!   `fstat` gives it), and so does the process, with all four of its uids
//!   (real, effective, saved, filesystem): a client that hands its socket
//!   to a process of another user (a setuid program, by `fork`+`exec` or
//!   `SCM_RIGHTS`) is not copied to;
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
use std::net::{IpAddr, TcpStream};

/// Whether the connection's two ends are on this host: a loopback address,
/// or the device's own.
pub(crate) fn is_local(peer: IpAddr, own: IpAddr) -> bool {
    peer.is_loopback() || peer == own
}

/// The network namespace's cookie of a socket (`SO_NETNS_COOKIE`, Linux
/// 5.14): a 64-bit value unique to the namespace for the life of the
/// system, which any process may read of a socket it holds.
fn netns_cookie(sock: &impl std::os::fd::AsRawFd) -> Option<u64> {
    // asm-generic/socket.h (x86, arm, ...).
    const SO_NETNS_COOKIE: libc::c_int = 71;
    let mut cookie = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: the option writes at most `len` bytes into `cookie`, a u64
    // that lives for the call, and updates `len`; the socket's descriptor
    // is open for the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            std::ptr::addr_of_mut!(cookie).cast(),
            &mut len,
        )
    };
    (r == 0 && len as usize == std::mem::size_of::<u64>()).then_some(cookie)
}

/// The network namespace (its inode) a socket belongs to, by `SIOCGSKNS`,
/// which needs `CAP_NET_ADMIN`: the way for kernels older than 5.14.
fn netns_inode(sock: &impl std::os::fd::AsRawFd) -> Option<u64> {
    // linux/sockios.h: returns a new descriptor of the socket's netns.
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor (or
    // -1); the socket's descriptor is open for the call.
    let fd = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGSKNS as _, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor the ioctl just returned, owned by nothing else.
    let ns = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let meta = std::fs::File::from(ns).metadata().ok()?;
    Some(std::os::unix::fs::MetadataExt::ino(&meta))
}

/// Whether two sockets belong to one network namespace: by their cookies,
/// which need no privilege, else by `SIOCGSKNS`; `None` where neither can
/// say (then the path is not used).
fn same_netns(a: &impl std::os::fd::AsRawFd, b: &impl std::os::fd::AsRawFd) -> Option<bool> {
    if let (Some(x), Some(y)) = (netns_cookie(a), netns_cookie(b)) {
        return Some(x == y);
    }
    Some(netns_inode(a)? == netns_inode(b)?)
}

/// A duplicate of descriptor `fd` of the process `pidfd` refers to.
fn descriptor_of(pidfd: &std::os::fd::OwnedFd, fd: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd as _;
    let fd = libc::c_int::try_from(fd).ok()?;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number of that
    // process and flags, and returns a new descriptor of ours (or -1); the
    // kernel checks that we may ptrace the process.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0u32) };
    let dup = i32::try_from(dup).ok().filter(|&d| d >= 0)?;
    // SAFETY: `dup` was just returned by pidfd_getfd: an open descriptor
    // owned by nothing else.
    Some(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dup) })
}

/// The owner (uid) of `far`, if it is the far end of `stream`: a TCP
/// stream socket whose addresses are `stream`'s swapped, in the same
/// network namespace (a 4-tuple names one connected TCP socket there).
fn far_end_owner(stream: &TcpStream, far: std::os::fd::OwnedFd) -> Option<u32> {
    let file = std::fs::File::from(far);
    let owner = std::os::unix::fs::MetadataExt::uid(&file.metadata().ok()?);
    let sock = socket2::Socket::from(std::os::fd::OwnedFd::from(file));
    if sock.r#type().ok()? != socket2::Type::STREAM
        || sock.protocol().ok()? != Some(socket2::Protocol::TCP)
    {
        return None;
    }
    let (near, far_addr) = (stream.local_addr().ok()?, stream.peer_addr().ok()?);
    if sock.local_addr().ok()?.as_socket()? != far_addr
        || sock.peer_addr().ok()?.as_socket()? != near
    {
        return None;
    }
    same_netns(&sock, stream)?.then_some(owner)
}

/// Whether process `pid` holds the far end of `stream` as its descriptor
/// `fd`.
#[cfg(test)]
pub(crate) fn peer_process_holds(stream: &TcpStream, pid: u32, fd: u32) -> bool {
    let Some(pidfd) = open_pidfd(pid) else {
        return false;
    };
    descriptor_of(&pidfd, fd).is_some_and(|d| far_end_owner(stream, d).is_some())
}

/// A pidfd of process `pid`.
fn open_pidfd(pid: u32) -> Option<std::os::fd::OwnedFd> {
    let raw = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor (or -1); nothing of ours is passed by pointer.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0u32) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: `fd` was just returned by pidfd_open: an open descriptor
    // owned by nothing else.
    Some(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
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

/// The four uids (real, effective, saved, filesystem) a `status` file
/// names.
fn uids_in(status: &str) -> Option<[u32; 4]> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let ids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    ids.try_into().ok()
}

/// The four uids of `pid`'s `status`.
fn process_uids(pid: &str) -> Option<[u32; 4]> {
    uids_in(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// This process as a check needs it, from one read of its `status`.
struct Own {
    /// Its effective uid (`None`: unreadable).
    euid: Option<u32>,
    /// Root, or `CAP_SYS_PTRACE` effective (`true` when unreadable).
    privileged: bool,
}

fn own() -> Own {
    const CAP_SYS_PTRACE: u32 = 19;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Own {
            euid: None,
            privileged: true,
        };
    };
    let euid = uids_in(&status).map(|u| u[1]);
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    Own {
        euid,
        privileged: euid.unwrap_or(0) == 0 || caps & (1 << CAP_SYS_PTRACE) != 0,
    }
}

/// Checks the responder's process `pid`, which names `fd` as its end of
/// `stream`, for the same-host path (see the module's doc);
/// `allow_privileged`: the path may be used while this process is root or
/// holds `CAP_SYS_PTRACE`.
pub(crate) fn verify_peer(
    stream: &TcpStream,
    pid: u32,
    fd: u32,
    allow_privileged: bool,
) -> Result<PeerProcess, Refusal> {
    let own = own();
    // Copies into this very process lend no privilege to anyone.
    if !allow_privileged && pid != std::process::id() && own.privileged {
        return Err(Refusal::Privileged);
    }
    let pidfd = open_pidfd(pid).ok_or(Refusal::NoProcess)?;
    // The kernel refuses the duplicate where it would refuse the copies
    // (another user's process, without privilege): the path is not used.
    let far = descriptor_of(&pidfd, fd).ok_or(Refusal::NotTheHolder)?;
    let peer = PeerProcess { pid, pidfd };
    let far_uid = far_end_owner(stream, far).ok_or(Refusal::NotTheHolder)?;
    let me = own.euid.ok_or(Refusal::NoProcess)?;
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

    fn fd_of(s: &TcpStream) -> u32 {
        u32::try_from(std::os::fd::AsRawFd::as_raw_fd(s)).unwrap()
    }

    /// A connected pair of TCP streams on loopback.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    /// Takes `CAP_NET_ADMIN` out of the calling thread's effective set
    /// (capabilities are per thread on Linux); false where the thread
    /// could not (then it had nothing to drop that matters here).
    fn drop_net_admin_in_this_thread() -> bool {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        const CAP_NET_ADMIN: u32 = 12;
        let mut h = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: capget writes the calling thread's sets into the two
        // `Data` of version 3, which live for the call.
        if unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) } != 0 {
            return false;
        }
        d[0].effective &= !(1 << CAP_NET_ADMIN);
        // SAFETY: capset reads the header and two `Data`, all live for the
        // call, and changes only the calling thread's sets (pid 0).
        unsafe { libc::syscall(libc::SYS_capset, &h, d.as_ptr()) == 0 }
    }

    /// The namespace check needs no privilege: a gateway and a client that
    /// run as an ordinary user (no `CAP_NET_ADMIN`, which `SIOCGSKNS`
    /// needs) still find each other's sockets in one namespace.
    #[test]
    fn the_namespace_check_needs_no_privilege() {
        let (a, b) = pair();
        assert_eq!(same_netns(&a, &b), Some(true));
        std::thread::spawn(move || {
            assert!(drop_net_admin_in_this_thread());
            assert_eq!(netns_inode(&a), None, "SIOCGSKNS without CAP_NET_ADMIN");
            assert!(netns_cookie(&a).is_some());
            assert_eq!(same_netns(&a, &b), Some(true));
            assert!(peer_process_holds(&a, std::process::id(), fd_of(&b)));
        })
        .join()
        .unwrap();
    }

    /// A socket of another network namespace is not in this one, whatever
    /// its addresses (a thread of its own enters a new namespace: needs
    /// root, as CI runs).
    #[test]
    fn a_socket_of_another_namespace_is_told_apart() {
        let (a, _b) = pair();
        let other = std::thread::spawn(|| {
            // SAFETY: unshare(CLONE_NEWNET) moves only the calling thread
            // into a new network namespace; nothing is passed by pointer.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return None;
            }
            Some(std::net::UdpSocket::bind("0.0.0.0:0").unwrap())
        })
        .join()
        .unwrap();
        let Some(other) = other else {
            assert_ne!(
                // SAFETY: geteuid has no preconditions.
                unsafe { libc::geteuid() },
                0,
                "root could not enter a new network namespace"
            );
            eprintln!("not root: no new network namespace to compare with");
            return;
        };
        let here = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        assert_eq!(same_netns(&a, &here), Some(true));
        assert_eq!(same_netns(&a, &other), Some(false));
    }

    #[test]
    fn the_owner_of_a_connections_far_end_is_found_and_no_other() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let me = std::process::id();
        // Both ends are this process's: the far end is `s`.
        assert!(peer_process_holds(&c, me, fd_of(&s)));
        // Not the near end itself, nor the listener, nor a descriptor that
        // is not open, nor another connection's far end.
        assert!(!peer_process_holds(&c, me, fd_of(&c)));
        let l_fd = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&l)).unwrap();
        assert!(!peer_process_holds(&c, me, l_fd));
        assert!(!peer_process_holds(&c, me, 1 << 30));
        let c2 = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s2, _) = l.accept().unwrap();
        assert!(!peer_process_holds(&c, me, fd_of(&s2)));
        assert!(peer_process_holds(&c2, me, fd_of(&s2)));
        // Not process 1's (nor any made-up one's).
        assert!(!peer_process_holds(&c, 1, fd_of(&s)));
        assert!(!peer_process_holds(&c, 0, fd_of(&s)));
    }

    /// A UDP socket with the mirrored addresses of a TCP connection is not
    /// its far end.
    #[test]
    fn a_udp_socket_with_the_same_addresses_is_not_the_far_end() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let u = std::net::UdpSocket::bind(l.local_addr().unwrap()).unwrap();
        u.connect(c.local_addr().unwrap()).unwrap();
        let u_fd = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&u)).unwrap();
        assert!(!peer_process_holds(&c, std::process::id(), u_fd));
    }

    #[test]
    fn a_peer_is_verified_by_user_holder_and_privilege() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let me = std::process::id();
        let fd = fd_of(&s);
        // This process holds the far end, as its own user: verified when
        // the privilege rule allows it.
        let allowed = verify_peer(&c, me, fd, true).map(|p| p.pid);
        assert_eq!(allowed, Ok(me));
        // The wrong descriptor, a process that does not hold the
        // connection, or none at all.
        assert_eq!(
            verify_peer(&c, me, fd_of(&c), true).err(),
            Some(Refusal::NotTheHolder)
        );
        assert!(verify_peer(&c, 1, fd, true).is_err());
        assert_eq!(verify_peer(&c, 0, fd, true).err(), Some(Refusal::NoProcess));
        assert_eq!(
            verify_peer(&c, u32::MAX, fd, true).err(),
            Some(Refusal::NoProcess)
        );
        // This very process: the privilege rule does not apply.
        assert!(verify_peer(&c, me, fd, false).is_ok());
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
        assert!(verify_peer(&c, pid, 0, true).is_err());
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
