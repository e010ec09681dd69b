//! Opening a soft connection (TCP, then the hello and its answer) is the
//! software provider's own step, which hardware does not have: a
//! responder that is merely slow to answer (a loaded host) is not a lost
//! packet.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::soft::packet::{Hello, HelloAck, Request, Response, HELLO_LEN, REQUEST_LEN};
use hipobj_fabric::WcStatus;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A responder that answers every hello `delay` late, then acknowledges
/// every request; the connections it was opened, when `stop` is set.
fn slow_hello_responder(
    listener: TcpListener,
    delay: Duration,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut served = Vec::new();
        accept_until(&listener, &stop, |mut c| {
            served.push(std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut h = [0u8; HELLO_LEN];
                if c.read_exact(&mut h).is_err() {
                    return;
                }
                assert!(Hello::decode(&h).is_some());
                std::thread::sleep(delay);
                if c.write_all(&HelloAck::PLAIN.encode()).is_err() {
                    return;
                }
                let mut b = [0u8; REQUEST_LEN];
                while c.read_exact(&mut b).is_ok() {
                    let r = Request::decode(&b).expect("a request");
                    let mut payload = vec![0u8; r.seg_len as usize];
                    c.read_exact(&mut payload).unwrap();
                    let _ = c.write_all(&Response::ack(r.psn).encode());
                }
            }));
        });
        drop(listener);
        let opened = served.len();
        for s in served {
            let _ = s.join();
        }
        opened
    })
}

/// The hello's answer comes 60 ms late, ten times the provider's scaled
/// ACK timeout (6.7 ms): the requester waits for it (the opening's limit
/// has a floor of its own) and its WRITE completes on the one connection,
/// instead of counting every slow answer as a lost packet until
/// RETRY_EXC_ERR.
#[test]
fn a_responder_slow_to_answer_the_hello_is_waited_for() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let fake = slow_hello_responder(listener, Duration::from_millis(60), stop.clone());
    let wc = write_4k_to_local_port(port);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(fake.join().unwrap(), 1, "connections opened");
}
