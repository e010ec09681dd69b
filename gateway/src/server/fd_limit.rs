//! The open-file limit, and the connection cap that fits under it.

use std::io;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Refusals (503 answers beyond the cap) being written at once; a
/// connection beyond both caps is closed without an answer.
pub const MAX_REFUSALS: usize = 64;

/// File descriptors kept out of the connection cap at least, for upstream
/// connections, RDMA sockets, files and the listener.
pub const FD_RESERVE_MIN: u64 = 256;

/// The most connections served at once whatever the limits say.
const MAX_CAP: usize = 1 << 20;

/// The process's open-file limit (`RLIMIT_NOFILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit, the one that applies.
    pub soft: u64,
    /// The hard limit, the most the soft one can be raised to.
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard one, and returns the limit
/// then in force (as it was when it cannot be raised).
pub fn raise_fd_limit() -> FdLimit {
    // `None` is unlimited (`RLIM_INFINITY`, all bits set).
    let value = |v: Option<u64>| v.unwrap_or(u64::MAX);
    let lim = getrlimit(Resource::Nofile);
    let (soft, hard) = (value(lim.current), value(lim.maximum));
    if soft < hard {
        let raised = Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        // Raising a soft limit up to the hard one needs no privilege and
        // changes nothing else (on failure the limit is unchanged).
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => return FdLimit { soft: hard, hard },
            Err(e) => tracing::warn!(
                error = %io::Error::from(e),
                soft,
                hard,
                "the open-file limit could not be raised to its hard limit"
            ),
        }
    }
    FdLimit { soft, hard }
}

/// The descriptors kept out of the connection cap under a limit of
/// `fd_limit`: a quarter of it, at least [`FD_RESERVE_MIN`].
pub fn fd_reserve(fd_limit: u64) -> u64 {
    (fd_limit / 4).max(FD_RESERVE_MIN)
}

/// The connections served at once: `asked`, lowered so that they, the
/// refusals in flight and the [`fd_reserve`] stay below `fd_limit` (at
/// least 1).
pub fn connection_cap(asked: usize, fd_limit: u64) -> usize {
    let room = fd_limit
        .saturating_sub(fd_reserve(fd_limit))
        .saturating_sub(MAX_REFUSALS as u64);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    asked.min(room).clamp(1, MAX_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_reserve() {
        // 1024 descriptors: 256 reserved, 64 for refusals.
        assert_eq!(fd_reserve(1024), 256);
        assert_eq!(connection_cap(4096, 1024), 1024 - 256 - 64);
        assert_eq!(connection_cap(64, 1024), 64);
        // A large limit reserves a quarter.
        assert_eq!(fd_reserve(1 << 20), 1 << 18);
        assert_eq!(connection_cap(4096, 1 << 20), 4096);
        assert_eq!(
            connection_cap(usize::MAX, 1 << 20),
            (1 << 20) - (1 << 18) - 64
        );
        // A tiny limit still serves one.
        assert_eq!(connection_cap(4096, 100), 1);
        assert_eq!(connection_cap(0, 1 << 20), 1);
        assert_eq!(connection_cap(usize::MAX, u64::MAX), MAX_CAP);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let l = raise_fd_limit();
        assert!(l.soft == l.hard || l.hard == u64::MAX, "{l:?}");
    }
}
