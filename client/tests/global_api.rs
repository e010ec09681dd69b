//! The process-wide instance the C API uses: init and shutdown, calls that
//! keep their instance across a shutdown, waiting transfers woken by it, a
//! new init while old calls finish, and many threads at once.
//!
//! One test function: the instance is process-wide.

mod common;

use common::*;
use hipobj::{c_semantics, Config, OpError, Options, S3Ops};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

fn init(max_transfers: usize) {
    c_semantics::init_with(
        host_platform(),
        Options {
            max_transfers,
            ..Options::default()
        },
        &Config::with_nic("soft0"),
    )
    .unwrap();
}

/// Callbacks that wait for a signal before answering.
struct Gated<'a> {
    inner: PeerOps<'a>,
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

impl S3Ops for Gated<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        self.inner.send_request(token)?;
        let _ = self.entered.send(());
        let _ = self.release.recv();
        Ok(())
    }
    fn recv_reply(&mut self, reply: &mut [u8]) -> Result<usize, i32> {
        self.inner.recv_reply(reply)
    }
}

#[test]
fn the_process_wide_instance() {
    let peer = peer();
    peer.put_object("obj", pattern(1, 4096));

    // Before init.
    let mut mem = vec![0u8; 4096];
    let addr = mem.as_mut_ptr() as usize;
    assert_eq!(
        c_semantics::get(addr, 4096, 0, &mut PeerOps::get(&peer, "obj"))
            .unwrap_err()
            .op,
        OpError::NotInitialized
    );
    assert_eq!(
        c_semantics::shutdown().unwrap_err().op,
        OpError::NotInitialized
    );
    assert_eq!(c_semantics::parse_rdma_reply(b"206\r\n").unwrap(), 206);
    assert_eq!(c_semantics::token_client_nic("010000000000000000000000000000ffffc0a8012a0000000000000000000000000000000000000000000000").unwrap(), "192.168.1.42");

    // A failed init publishes nothing.
    assert_eq!(
        c_semantics::init_with(host_platform(), Options::default(), &Config::default())
            .unwrap_err()
            .op,
        OpError::NicNotFound
    );
    assert_eq!(
        c_semantics::handshake_token().unwrap_err().op,
        OpError::NotInitialized
    );

    init(1);
    assert_eq!(
        c_semantics::init_with(
            host_platform(),
            Options::default(),
            &Config::with_nic("soft0")
        )
        .unwrap_err()
        .op,
        OpError::AlreadyInitialized
    );
    // SAFETY: `mem` outlives the registration (deregistered below).
    unsafe { c_semantics::buf_register_host(addr, 4096) }.unwrap();
    c_semantics::get(addr, 4096, 0, &mut PeerOps::get(&peer, "obj")).unwrap();
    assert_eq!(mem, pattern(1, 4096));

    // A transfer holds the only connection inside its callback; a second
    // waits for it; shutdown wakes the waiter with NotInitialized, and the
    // first finishes on the old instance.
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let peer2 = peer.clone();
    let holder = std::thread::spawn(move || {
        let mut ops = Gated {
            inner: PeerOps::get(&peer2, "obj"),
            entered: entered_tx,
            release: release_rx,
        };
        c_semantics::get(addr, 4096, 0, &mut ops)
    });
    entered_rx.recv().unwrap();
    let peer3 = peer.clone();
    let waiter = std::thread::spawn(move || {
        c_semantics::get(addr, 4096, 0, &mut PeerOps::get(&peer3, "obj"))
    });
    // Shut down only once the second call waits inside the pool: the
    // wake-up, not the check at the call's start, must answer it.
    wait_until("the second transfer waits for the connection", || {
        hipobj::instance::current().is_ok_and(|i| i.pool_waiting() == 1)
    });
    c_semantics::shutdown().unwrap();
    assert_eq!(
        waiter.join().unwrap().unwrap_err().op,
        OpError::NotInitialized
    );
    // A new init while the old call is still inside its callback.
    init(4);
    assert_eq!(
        c_semantics::buf_deregister(addr).unwrap_err().op,
        OpError::BufNotRegistered,
        "the new instance starts empty"
    );
    release_tx.send(()).unwrap();
    holder.join().unwrap().unwrap();

    // Many threads registering, transferring and deregistering, with a
    // shutdown in the middle: every call either works or reports
    // NotInitialized / BufNotRegistered; nothing deadlocks or crashes.
    // The shutdown comes once transfers have worked, and the workers stop
    // once calls after it were refused: both sides of it are exercised.
    let peer = Arc::new(peer);
    let stop = Arc::new(AtomicBool::new(false));
    let worked = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let peer = peer.clone();
            let (stop, worked, refused) = (stop.clone(), worked.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut mem = vec![0u8; 4096];
                let a = mem.as_mut_ptr() as usize;
                let mut ok = 0;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: `mem` outlives every registration of it: each
                    // iteration deregisters, and the instance that could
                    // still hold it is shut down and dropped before `mem`.
                    match unsafe { c_semantics::buf_register_host(a, 4096) } {
                        Ok(()) => {}
                        Err(e) => {
                            assert!(matches!(e.op, OpError::NotInitialized), "{e}");
                            refused.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    let r = if t % 2 == 0 {
                        c_semantics::get(a, 4096, 0, &mut PeerOps::get(&peer, "obj"))
                    } else {
                        c_semantics::put(a, 4096, 0, &mut PeerOps::put(&peer, &format!("w{t}")))
                    };
                    match r {
                        Ok(()) => {
                            ok += 1;
                            worked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => assert!(
                            matches!(e.op, OpError::NotInitialized | OpError::BufNotRegistered),
                            "{e}"
                        ),
                    }
                    let _ = c_semantics::buf_deregister(a);
                }
                ok
            })
        })
        .collect();
    wait_until("16 transfers before the shutdown", || {
        worked.load(Ordering::Relaxed) >= 16
    });
    c_semantics::shutdown().unwrap();
    wait_until("8 calls refused after the shutdown", || {
        refused.load(Ordering::Relaxed) >= 8
    });
    stop.store(true, Ordering::Relaxed);
    let done: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(done > 0);
    // Re-init works after all of that.
    init(2);
    c_semantics::shutdown().unwrap();
}
