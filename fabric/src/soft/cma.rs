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
//! that process holds the other end of this very TCP connection (its
//! socket inode in the process's descriptor table, looked up through
//! `/proc`, as `ss -p` does). A responder cannot aim the requester's
//! copies at a third process.

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

/// The inode of the socket at the far end of `stream` (the one whose local
/// address is `stream`'s peer and whose remote address is `stream`'s own).
fn far_end_inode(stream: &TcpStream) -> Option<u64> {
    let near = proc_net_form(stream.local_addr().ok()?)?;
    let far = proc_net_form(stream.peer_addr().ok()?)?;
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == far && f[2] == near)
            .then(|| f[9].parse::<u64>().ok())
            .flatten()
            .filter(|&inode| inode != 0)
    })
}

/// Whether process `pid` holds the far end of `stream`.
pub(crate) fn peer_process_holds(stream: &TcpStream, pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    let Some(inode) = far_end_inode(stream) else {
        return false;
    };
    let want = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|l| l.as_os_str() == want.as_str())
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
