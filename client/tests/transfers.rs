//! GET and PUT through the callback API against a server peer, over the
//! software provider: host buffers, the connect-first flow, reuse,
//! reconnection, declines, and application-driven transfers.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj::buffer::Registration;
use hipobj::{Direction, OpError, Options};
use hipobj_fabric::AccessFlags;
use hipobj_wire::Token;
use std::sync::atomic::Ordering;

#[test]
fn host_get_and_put_are_byte_exact() {
    let lib = host_lib(Options::default());
    let peer = peer();
    for (i, len) in [1usize, 4096, (3 << 20) + 5, 64 << 20]
        .into_iter()
        .enumerate()
    {
        let want = pattern(i as u64, len);
        peer.put_object("obj", want.clone());
        let mut mem = vec![0u8; len];
        {
            let buf = lib.register_host(&mut mem).unwrap();
            buf.get(0, len, &mut PeerOps::get(&peer, "obj")).unwrap();
        }
        assert!(mem == want, "GET of {len} bytes");

        let up = pattern(100 + i as u64, len);
        let mut mem = up.clone();
        {
            let buf = lib.register_host(&mut mem).unwrap();
            buf.put(0, len, &mut PeerOps::put(&peer, "up")).unwrap();
        }
        assert!(*peer.object("up").unwrap() == up, "PUT of {len} bytes");
    }
}

#[test]
fn a_range_of_the_buffer_at_an_offset() {
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.put_object("obj", pattern(5, 1000));
    let mut mem = vec![0xeeu8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        buf.get(100, 1000, &mut PeerOps::get(&peer, "obj")).unwrap();
        let e = buf
            .get(4000, 1000, &mut PeerOps::get(&peer, "obj"))
            .unwrap_err();
        assert_eq!(e.op, OpError::InvalidValue);
        assert_eq!(
            buf.get(0, 0, &mut PeerOps::get(&peer, "obj"))
                .unwrap_err()
                .op,
            OpError::InvalidValue
        );
    }
    assert_eq!(&mem[100..1100], &pattern(5, 1000)[..]);
    assert!(mem[..100].iter().all(|&b| b == 0xee) && mem[1100..].iter().all(|&b| b == 0xee));
}

#[test]
fn connect_first_handshake_then_reuse() {
    let lib = host_lib(Options {
        max_transfers: 1,
        ..Options::default()
    });
    let peer = peer();
    peer.put_object("obj", pattern(1, 4096));
    let mut mem = vec![0u8; 4096];
    let buf = lib.register_host(&mut mem).unwrap();
    let mut first = PeerOps::get(&peer, "obj");
    buf.get(0, 4096, &mut first).unwrap();
    // The first request is the handshake: an RC token of length 0.
    assert_eq!(first.tokens.len(), 2);
    let hs = Token::decode(&first.tokens[0]).unwrap();
    assert!(hs.is_handshake());
    let xfer = Token::decode(&first.tokens[1]).unwrap();
    assert_eq!((xfer.qp_num, xfer.len), (hs.qp_num, 4096));
    for _ in 0..4 {
        let mut ops = PeerOps::get(&peer, "obj");
        buf.get(0, 4096, &mut ops).unwrap();
        assert_eq!(ops.tokens.len(), 1, "a connected pair is reused");
    }
    assert_eq!(peer.stats.handshakes.load(Ordering::Relaxed), 1);
    assert_eq!(peer.stats.transfers.load(Ordering::Relaxed), 5);
}

#[test]
fn reconnects_and_retries_once_when_the_server_forgets_the_pair() {
    let lib = host_lib(Options {
        max_transfers: 1,
        ..Options::default()
    });
    let peer = peer();
    peer.put_object("obj", pattern(2, 8192));
    let mut mem = vec![0u8; 8192];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        buf.get(0, 8192, &mut PeerOps::get(&peer, "obj")).unwrap();
        peer.forget_pairs();
        let mut ops = PeerOps::get(&peer, "obj");
        buf.get(0, 8192, &mut ops).unwrap();
        // transfer (421), handshake, transfer.
        assert_eq!(ops.tokens.len(), 3);
        assert!(Token::decode(&ops.tokens[1]).unwrap().is_handshake());
    }
    assert_eq!(peer.stats.reconnects.load(Ordering::Relaxed), 1);
    assert_eq!(peer.stats.handshakes.load(Ordering::Relaxed), 2);
    assert_eq!(mem, pattern(2, 8192));
}

#[test]
fn a_decline_is_an_s3_error_carrying_the_reply() {
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.decline.store(true, Ordering::Relaxed);
    let mut mem = vec![0u8; 64];
    let buf = lib.register_host(&mut mem).unwrap();
    let e = buf.get(0, 64, &mut PeerOps::get(&peer, "obj")).unwrap_err();
    assert_eq!(e.op, OpError::S3Error);
    assert_eq!(e.reply.as_deref(), Some("501"));
}

#[test]
fn the_seed_servers_flow_fails_cleanly() {
    // hipObject's original server answers the handshake with a plain 200
    // and would RDMA to a QP in INIT: the client refuses, without hanging.
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.seed_flow.store(true, Ordering::Relaxed);
    let mut mem = vec![0u8; 64];
    let buf = lib.register_host(&mut mem).unwrap();
    let e = buf.get(0, 64, &mut PeerOps::get(&peer, "obj")).unwrap_err();
    assert_eq!(e.op, OpError::S3Error);
    assert_eq!(e.reply.as_deref(), Some("200"));
}

#[test]
fn application_driven_transfer_with_the_handshake_extension() {
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.put_object("obj", pattern(3, 5000));
    let mut mem = vec![0u8; 5000];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let hs = lib.handshake_token().unwrap();
        assert!(Token::decode(&hs).unwrap().is_handshake());
        let reply = peer.serve("HEAD", "obj", &hs);
        assert!(reply.starts_with("200:"));
        lib.complete_handshake(&reply).unwrap();
        let token = buf.token(Direction::Get, 0, 5000).unwrap();
        assert_eq!(
            Token::decode(&token)
                .unwrap()
                .client_ip()
                .unwrap()
                .to_string(),
            "127.0.0.1"
        );
        assert_eq!(peer.serve("GET", "obj", &token), "200");
        buf.sync(hipobj::SyncDirection::ToDevice, 0, 5000).unwrap();
    }
    assert_eq!(mem, pattern(3, 5000));
}

#[test]
fn a_put_token_cannot_be_used_to_write_the_buffer() {
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.put_object("obj", pattern(4, 4096));
    let mut mem = vec![7u8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let reply = peer.serve("HEAD", "obj", &lib.handshake_token().unwrap());
        lib.complete_handshake(&reply).unwrap();
        let put_token = buf.token(Direction::Put, 0, 4096).unwrap();
        let get_token = buf.token(Direction::Get, 0, 4096).unwrap();
        assert_ne!(
            Token::decode(&put_token).unwrap().rkey,
            Token::decode(&get_token).unwrap().rkey
        );
        // A server that tries to WRITE through a PUT token fails.
        assert_eq!(peer.serve("GET", "obj", &put_token), "500");
        let addr = buf.addr();
        let entry = lib.instance().buffers.find(addr).unwrap();
        assert_eq!(entry.mr(Direction::Put).access(), AccessFlags::REMOTE_READ);
        assert_eq!(
            entry.mr(Direction::Get).access(),
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE
        );
        assert_eq!(entry.kind, Registration::Host);
    }
    assert_eq!(mem, vec![7u8; 4096]);
}

#[test]
fn a_client_qp_left_in_init_fails_the_server_cleanly() {
    // A token from the token connection with no handshake: the QP is in
    // INIT, so a server that RDMAs at once (the seed's flow) gets
    // RETRY_EXC_ERR and answers 500; nothing lands, nothing hangs.
    let lib = host_lib(Options::default());
    let peer = peer();
    peer.put_object("obj", pattern(6, 4096));
    peer.seed_flow.store(true, Ordering::Relaxed);
    let mut mem = vec![0u8; 4096];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let token = buf.token(Direction::Get, 0, 4096).unwrap();
        assert_eq!(peer.serve("GET", "obj", &token), "500");
        assert_eq!(peer.stats.failures.load(Ordering::Relaxed), 1);
        // The library still works with a server that runs the real flow.
        peer.seed_flow.store(false, Ordering::Relaxed);
        buf.get(0, 4096, &mut PeerOps::get(&peer, "obj")).unwrap();
    }
    assert_eq!(mem, pattern(6, 4096));
}
