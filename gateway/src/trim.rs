//! Returning freed heap memory to the operating system.
//!
//! The engine's memory is the staging pool plus what requests in flight
//! hold; after a burst (many plain-HTTP bodies, many connections) glibc's
//! allocator keeps freed pages in its arenas. The `hipobj-gateway` binary
//! uses mimalloc, which returns them itself; for what still comes from
//! glibc's malloc (C libraries, and programs that embed the engine on the
//! default allocator: the test server, `hipobj demo`) the pair sweeper calls
//! [`release_free_memory`] on its timer.

/// Gives the allocator's free pages back to the OS (glibc's `malloc_trim`);
/// nothing elsewhere.
#[allow(unsafe_code)]
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and
    // unmaps or advises away free pages; it touches no live allocation and
    // is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
