//! Attacks on the gateway's RDMA path, played against the real gateway
//! binary (embedded store, software provider on 127.0.0.1) by a fake
//! client that speaks the soft provider's wire format (hostile_common) and
//! by the real client library. See docs/security.md for the threat model.

use crate::hostile_common;

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::{client, pattern, RdmaOps};
use hipobj_testkit::s3::{assert_error, Answer, S3};
use hipobj_wire::{Gid, Transport};
use hostile_common::*;
use http::Method;
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}
const MIB: usize = 1 << 20;

/// Defect 1 (critical): a client that stops reading its RDMA socket in the
/// middle of a GET must never receive bytes of what the staging buffers
/// carry next (another tenant's object). The gateway gives up on the
/// stalled transfer after its progress deadline, moves the QP to ERR and
/// reuses the buffers only once the provider has flushed the work requests;
/// whatever the stalled client reads when it resumes is its own object.
#[test]
fn a_stalled_client_never_receives_the_next_transfers_bytes() {
    let gw = gateway_with(
        bin(),
        &[
            "--rdma-progress-timeout",
            "2s",
            "--staging-buffers",
            "8",
            "--max-staging-per-key",
            "8",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("shared");
    let a = pattern(0xA, 64 * MIB);
    let b = pattern(0xB, 32 * MIB);
    assert!(s3.put_plain("/shared/a", a.clone()).status.is_success());
    assert!(s3.put_plain("/shared/b", b.clone()).status.is_success());

    // The stalled client: it answers the connection hello, then reads nothing.
    let peer = FakePeer::start(true);
    let hs = rdma(&s3, Method::HEAD, "/shared/a", &peer.handshake_token());
    assert_eq!(hs.status, 200, "handshake: {}", hs.text());
    let base = 0x7f00_0000_0000u64;
    let get = rdma(
        &s3,
        Method::GET,
        "/shared/a",
        &peer.token(Transport::Rc, base, a.len() as u64, 0x1234_5678),
    );
    assert_error(&get, 500, "RDMATransferFailed", Some("500"), "stalled GET");

    // Another transfer now fills the staging buffers with object b.
    let lib = client();
    let mut back = vec![0u8; b.len()];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, "/shared/b");
        buf.get(0, b.len(), &mut ops).unwrap();
        assert_eq!(ops.last().status, 200);
    }
    assert!(back == b, "the second client's GET is byte-exact");

    // The stalled client resumes and reads everything left in its socket.
    peer.resume();
    assert!(
        peer.wait_closed(Duration::from_secs(60)),
        "the gateway closed the stalled connection"
    );
    let (segments, bytes) = peer.seen(|s| {
        for (va, payload) in &s.writes {
            let off = usize::try_from(va - base).unwrap();
            assert!(
                payload[..] == a[off..off + payload.len()],
                "the stalled client received bytes at offset {off} that are not its object's"
            );
        }
        (
            s.writes.len(),
            s.writes.iter().map(|(_, p)| p.len()).sum::<usize>(),
        )
    });
    eprintln!("the stalled client read {segments} segments, {bytes} bytes, all its own");
    assert!(bytes < a.len(), "the transfer was stopped, not completed");
    // Nothing was withdrawn: every buffer's requests were flushed.
    assert_eq!(
        metric(&gw.url, "hipobj_staging_buffers_quarantined_total"),
        0.0
    );
}

/// Defect 2 (high): a handshake may only aim the gateway at the host that
/// made the request. A GID naming another address is refused with 403
/// before any connection is made; an operator can allow networks for
/// clients behind a proxy.
#[test]
fn a_handshake_naming_another_host_is_refused() {
    // Something listening on another local address, which must see nothing.
    let victim = TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2");
    victim.set_nonblocking(true).unwrap();
    let port = victim.local_addr().unwrap().port();
    let gw = gateway_with(bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    assert!(s3.put_plain("/bkt/k", pattern(1, 4096)).status.is_success());
    let aimed = hipobj_wire::Token {
        transport: Transport::Rc,
        qp_num: (u32::from(port) << 8) | 1,
        gid: Gid::from_ipv4(Ipv4Addr::new(127, 0, 0, 2)),
        rkey: 0,
        addr: 0,
        len: 0,
        port: 1,
        lid: 0,
    };
    // A GET (the handshake may be any method), so that the error has a body.
    let hs = rdma(&s3, Method::GET, "/bkt/k", &aimed.encode());
    assert_error(
        &hs,
        403,
        "AccessDenied",
        Some("403"),
        "handshake for another host",
    );
    // A transfer token naming it is refused the same way (DC needs no handshake).
    let dc = hipobj_wire::Token {
        transport: Transport::Dc,
        rkey: 1,
        addr: 0x1000,
        len: 4096,
        ..aimed
    };
    let get = rdma(&s3, Method::GET, "/bkt/k", &dc.encode());
    assert_error(
        &get,
        403,
        "AccessDenied",
        Some("403"),
        "DC GET for another host",
    );
    // Both were refused at the peer check, which comes before any
    // connection: no handshake connected a QP, no DC initiator was leased,
    // and the other host saw nothing.
    assert!(eventually(Duration::from_secs(10), || s3.metric(
        "hipobj_rdma_failures_total",
        &[("reason", "PeerNotAllowed")]
    ) == 2.0));
    assert_eq!(metric(&gw.url, "hipobj_rdma_handshakes_total"), 0.0);
    assert_eq!(metric(&gw.url, "hipobj_rdma_dc_initiators_in_use"), 0.0);
    assert!(
        victim.accept().is_err(),
        "the gateway connected to a host the request did not come from"
    );

    // An operator may allow a network (clients behind a proxy).
    let gw2 = gateway_with(bin(), &["--rdma-allow-peers", "127.0.0.0/8"], &[]);
    let s3b = S3::new(&gw2.url);
    let hs = rdma(&s3b, Method::HEAD, "/bkt/k", &aimed.encode());
    assert_eq!(hs.status, 200, "allowed network: {}", hs.text());
}

/// Defect 2, the soft provider's half: a token that names the caller's own
/// host but a port where no soft device listens (any other service) makes
/// the gateway send that service nothing but the connection hello, never a
/// byte of an object, and the transfer fails.
#[test]
fn a_service_that_is_not_a_soft_device_gets_only_the_hello() {
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = service.local_addr().unwrap().port();
    let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let g = got.clone();
    std::thread::spawn(move || {
        for c in service.incoming() {
            let Ok(mut c) = c else { return };
            let g = g.clone();
            std::thread::spawn(move || {
                // A service that reads and answers with its own protocol.
                let _ = std::io::Write::write_all(&mut c, b"+OK ready\r\n");
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut all = Vec::new();
                let _ = c.read_to_end(&mut all);
                g.lock().unwrap().push(all);
            });
        }
    });
    let gw = gateway_with(bin(), &["--rdma-progress-timeout", "5s"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let secret = pattern(7, 256 * 1024);
    assert!(s3
        .put_plain("/bkt/secret", secret.clone())
        .status
        .is_success());
    let token = |len: u64| {
        hipobj_wire::Token {
            transport: Transport::Rc,
            qp_num: (u32::from(port) << 8) | 1,
            gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
            rkey: 1,
            addr: 0x1000,
            len,
            port: 1,
            lid: 0,
        }
        .encode()
    };
    let hs = rdma(&s3, Method::HEAD, "/bkt/secret", &token(0));
    assert_eq!(hs.status, 200, "{}", hs.text());
    let get = rdma(&s3, Method::GET, "/bkt/secret", &token(secret.len() as u64));
    assert_error(
        &get,
        500,
        "RDMATransferFailed",
        Some("500"),
        "GET to a non-RDMA service",
    );
    assert!(eventually(Duration::from_secs(15), || !got
        .lock()
        .unwrap()
        .is_empty()));
    for conn in got.lock().unwrap().iter() {
        assert!(
            conn.len() <= hipobj_fabric::soft::packet::HELLO_LEN,
            "the service received {} bytes on one connection (more than the hello)",
            conn.len()
        );
        assert!(
            !conn
                .windows(16)
                .any(|w| secret.windows(16).take(64).any(|s| s == w)),
            "object bytes reached the service"
        );
    }
}

/// Defect 8 (low): a token whose buffer cannot exist is the client's
/// mistake: 400 before any RDMA, not a 5xx that SDKs retry.
#[test]
fn impossible_buffers_are_400_before_any_rdma() {
    let gw = gateway_with(bin(), &[], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    assert!(s3.put_plain("/bkt/k", pattern(1, 4096)).status.is_success());
    // No handshake: the checks come before the pair lookup, so these are
    // not 421s.
    let peer = FakePeer::start(false);
    let huge = peer.token(Transport::Rc, 0x1000, 1 << 63, 1);
    let a = rdma(&s3, Method::GET, "/bkt/k", &huge);
    assert_error(
        &a,
        400,
        "InvalidRDMAToken",
        Some("400"),
        "GET into a 2^63-byte buffer",
    );
    let wraps = peer.token(Transport::Rc, u64::MAX - 10, 4096, 1);
    let a = rdma(&s3, Method::GET, "/bkt/k", &wraps);
    assert_error(
        &a,
        400,
        "InvalidRDMAToken",
        Some("400"),
        "address plus length wraps",
    );
    let a = rdma(&s3, Method::PUT, "/bkt/k2", &wraps);
    assert_error(
        &a,
        400,
        "InvalidRDMAToken",
        Some("400"),
        "PUT, address plus length wraps",
    );
    let too_big = peer.token(Transport::Rc, 0x1000, 6 << 30, 1);
    let a = rdma(&s3, Method::PUT, "/bkt/k2", &too_big);
    assert_error(&a, 400, "EntityTooLarge", Some("400"), "PUT of 6 GiB");
    let dc = peer.token(Transport::Dc, u64::MAX, 2, 1);
    let a = rdma(&s3, Method::GET, "/bkt/k", &dc);
    assert_error(
        &a,
        400,
        "InvalidRDMAToken",
        Some("400"),
        "DC, address plus length wraps",
    );
    assert_eq!(peer.seen(|s| s.connections), 0, "no RDMA was attempted");
    // The object is unchanged and nothing was stored under k2.
    assert_eq!(s3.get_plain("/bkt/k").body[..], pattern(1, 4096)[..]);
    assert_eq!(s3.get_plain("/bkt/k2").status, 404);
}

/// Defect 6 (medium): clients that stall hold staging buffers only until
/// their progress deadline, so a well-behaved client sharing the pool is
/// served, not refused with 503 after the pool timeout.
/// `n` GETs of the `len`-byte object at `path`, each from a fake client
/// that stalls (takes no more of the transfer), each on a thread of its
/// own: the clients and the threads, whose answers come once the gateway
/// gives up.
fn stalled_gets(
    url: &str,
    s3: &S3,
    path: &str,
    len: usize,
    n: usize,
) -> Vec<(FakePeer, std::thread::JoinHandle<Answer>)> {
    (0..n)
        .map(|_| {
            let peer = FakePeer::start(true);
            let (url, path) = (url.to_string(), path.to_string());
            let token = peer.token(Transport::Rc, 0x10_0000, len as u64, 9);
            let hs = rdma(s3, Method::HEAD, &path, &peer.handshake_token());
            assert_eq!(hs.status, 200);
            let t = std::thread::spawn(move || rdma(&S3::new(&url), Method::GET, &path, &token));
            (peer, t)
        })
        .collect()
}

/// Each stalled GET failed at its progress deadline (500
/// RDMATransferFailed); its client then resumes.
fn fail_stalled_gets(stalled: Vec<(FakePeer, std::thread::JoinHandle<Answer>)>) {
    for (peer, t) in stalled {
        let a = t.join().unwrap();
        assert_error(&a, 500, "RDMATransferFailed", Some("500"), "stalled GET");
        peer.resume();
    }
}

/// The `len`-byte object at `path` by an RDMA GET into a buffer of its
/// own (answered 200).
fn rdma_get(s3: &S3, path: &str, len: usize) -> Vec<u8> {
    let lib = client();
    let mut back = vec![0u8; len];
    {
        let buf = lib.register_host(&mut back).unwrap();
        let mut ops = RdmaOps::new(s3, Method::GET, path);
        buf.get(0, len, &mut ops).unwrap();
        assert_eq!(ops.last().status, 200, "{}", ops.last().text());
    }
    back
}

#[test]
fn stalled_transfers_release_the_pool_after_their_progress_deadline() {
    let gw = gateway_with(
        bin(),
        &[
            // Through staging (not from the mapped file): the pool is what
            // is played here.
            "--no-store-mapping",
            "--rdma-progress-timeout",
            "2s",
            "--staging-buffers",
            "8",
            "--max-staging-per-key",
            "8",
            "--staging-timeout",
            "20s",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let obj = pattern(3, 64 * MIB);
    assert!(s3.put_plain("/bkt/big", obj.clone()).status.is_success());
    let small = pattern(4, 3 * MIB);
    assert!(s3
        .put_plain("/bkt/small", small.clone())
        .status
        .is_success());
    // Two stalled GETs, four buffers each: the whole pool.
    let stalled = stalled_gets(&gw.url, &s3, "/bkt/big", obj.len(), 2);
    assert!(eventually(Duration::from_secs(10), || metric(
        &gw.url,
        "hipobj_staging_buffers_in_use"
    ) >= 8.0));
    assert!(rdma_get(&s3, "/bkt/small", small.len()) == small);
    fail_stalled_gets(stalled);
}

/// The same stall, GETs sent from the object's mapped file: each holds its
/// mapping while it waits, and lets it go when its progress deadline fails
/// it (with the flush of its WRITEs); the next GET is served.
#[test]
fn stalled_mapped_gets_release_their_mapping_after_the_progress_deadline() {
    const REGIONS: &str = "hipobj_rdma_store_mapped_regions";
    // Nothing kept for a next GET: the stalled GETs' own mappings.
    let gw = gateway_with(
        bin(),
        &[
            "--rdma-progress-timeout",
            "2s",
            "--store-mapping-cache-mib",
            "0",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let obj = pattern(3, 8 * MIB);
    assert!(s3.put_plain("/bkt/big", obj.clone()).status.is_success());
    let stalled = stalled_gets(&gw.url, &s3, "/bkt/big", obj.len(), 2);
    assert!(
        eventually(Duration::from_secs(10), || metric(&gw.url, REGIONS) == 2.0),
        "both stalled GETs hold a mapping"
    );
    assert_eq!(metric(&gw.url, "hipobj_staging_buffers_in_use"), 0.0);
    fail_stalled_gets(stalled);
    assert!(
        eventually(Duration::from_secs(10), || metric(&gw.url, REGIONS) == 0.0),
        "the mappings are released"
    );
    assert!(rdma_get(&s3, "/bkt/big", obj.len()) == obj);
    assert_eq!(metric(&gw.url, REGIONS), 0.0);
}

/// With mappings kept for the next GET (the default), stalled GETs of one
/// object share one mapping, which stays kept (bounded by the cache's
/// size) after they fail and serves the next GET of the object, with the
/// right bytes; a new version of the object gets a mapping of its own.
#[test]
fn stalled_mapped_gets_share_one_kept_mapping() {
    const REGIONS: &str = "hipobj_rdma_store_mapped_regions";
    let gw = gateway_with(bin(), &["--rdma-progress-timeout", "2s"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let obj = pattern(4, 8 * MIB);
    assert!(s3.put_plain("/bkt/big", obj.clone()).status.is_success());
    // One GET first, so that the stalled ones find its mapping kept.
    assert!(rdma_get(&s3, "/bkt/big", obj.len()) == obj);
    assert_eq!(metric(&gw.url, REGIONS), 1.0);
    let stalled = stalled_gets(&gw.url, &s3, "/bkt/big", obj.len(), 2);
    assert!(
        eventually(Duration::from_secs(10), || metric(
            &gw.url,
            "hipobj_http_requests_in_flight"
        ) >= 2.0),
        "both GETs under way"
    );
    // They map first thing, then stall on their first WRITE.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(&gw.url, REGIONS), 1.0, "one mapping, shared");
    fail_stalled_gets(stalled);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(metric(&gw.url, REGIONS), 1.0, "kept, not one per GET");
    assert!(rdma_get(&s3, "/bkt/big", obj.len()) == obj);
    assert_eq!(metric(&gw.url, REGIONS), 1.0);
    // A new version: its own mapping, its own bytes.
    let newer = pattern(5, 8 * MIB);
    assert!(s3.put_plain("/bkt/big", newer.clone()).status.is_success());
    assert!(rdma_get(&s3, "/bkt/big", newer.len()) == newer);
    assert_eq!(metric(&gw.url, REGIONS), 2.0);
}

/// Defect 9 (low): DC requests take initiators from a bounded pool, so
/// many concurrent DC requests cost a bounded number of QPs and threads;
/// the ones beyond wait, then get 503 SlowDown.
#[test]
fn dc_requests_share_a_bounded_pool_of_initiators() {
    let gw = gateway_with(
        bin(),
        &[
            "--max-dc-initiators",
            "4",
            "--max-dc-per-key",
            "4",
            "--staging-timeout",
            "2s",
            "--rdma-progress-timeout",
            "8s",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let obj = pattern(5, 16 * MIB);
    assert!(s3.put_plain("/bkt/k", obj.clone()).status.is_success());
    let idle_threads = threads(gw.pid());
    // One stalled DC target for all the requests.
    let peer = Arc::new(FakePeer::start(true));
    let n = 64;
    let workers: Vec<_> = (0..n)
        .map(|i| {
            let url = gw.url.clone();
            let token = peer.token(Transport::Dc, 0x10_0000 * (i + 1), obj.len() as u64, 3);
            std::thread::spawn(move || rdma(&S3::new(&url), Method::GET, "/bkt/k", &token))
        })
        .collect();
    let mut peak_threads = 0;
    let mut peak_in_use = 0.0f64;
    // Sampled every 100 ms for as long as requests are under way.
    while !workers.iter().all(|w| w.is_finished()) {
        peak_threads = peak_threads.max(threads(gw.pid()));
        peak_in_use = peak_in_use.max(metric(&gw.url, "hipobj_rdma_dc_initiators_in_use"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let answers: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    peer.resume();
    let slow = answers
        .iter()
        .filter(|a| a.status == 503 && a.code().as_deref() == Some("SlowDown"))
        .count();
    let failed = answers
        .iter()
        .filter(|a| a.status == 500 && a.code().as_deref() == Some("RDMATransferFailed"))
        .count();
    assert_eq!(
        slow + failed,
        n as usize,
        "every answer is 503 SlowDown or 500"
    );
    assert!(
        slow >= n as usize - 8,
        "at most the pool's worth was served: {failed} failed, {slow} waited"
    );
    assert!(peak_in_use <= 4.0, "{peak_in_use} initiators in use");
    // Before the pool, each DC request cost a QP and its threads (2000
    // requests: 2031 threads). Now the initiators' threads are bounded;
    // what else grows is the runtime's blocking pool (the store's file
    // I/O), which tokio bounds and which does not follow the request count.
    assert!(
        peak_threads <= idle_threads + n as usize / 2,
        "threads grew from {idle_threads} to {peak_threads} for {n} DC requests"
    );
    assert!(
        peer.seen(|s| s.peak_open) <= 4,
        "more than 4 initiators connected"
    );
}

/// Defect 4 (high): pairs of clients that are gone are released by the
/// gateway on its own (a probe of idle pairs on a timer), so exited
/// clients cannot lock the others out until the idle timeout.
#[test]
fn pairs_of_exited_clients_are_released() {
    let gw = gateway_with(bin(), &["--pair-probe-interval", "1s"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("bkt");
    let obj = pattern(6, 64 * 1024);
    assert!(s3.put_plain("/bkt/k", obj.clone()).status.is_success());
    // A client that does one transfer, then goes away (its QPs and its
    // device's listener with it), without a word to the gateway.
    let one_transfer_then_gone = || {
        let lib = client();
        let mut back = vec![0u8; obj.len()];
        {
            let buf = lib.register_host(&mut back).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/k");
            buf.get(0, obj.len(), &mut ops).unwrap();
            assert_eq!(ops.last().status, 200);
        }
        assert!(back == obj);
        assert!(metric(&gw.url, "hipobj_rdma_pairs") >= 1.0, "a pair");
    };
    for round in 0..3 {
        one_transfer_then_gone();
        assert!(
            eventually(Duration::from_secs(30), || metric(
                &gw.url,
                "hipobj_rdma_pairs"
            ) == 0.0),
            "round {round}: the exited client's pair was released"
        );
    }
    assert!(metric(&gw.url, "hipobj_rdma_pairs_released_total") >= 3.0);
    // A live, idle client keeps its pair through probes.
    let lib = client();
    let mut back = vec![0u8; obj.len()];
    let buf = lib.register_host(&mut back).unwrap();
    let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/k");
    buf.get(0, obj.len(), &mut ops).unwrap();
    // A client that transfers after it, then goes away: once the sweeper
    // has released that one's pair (idle for a probe interval), the live
    // client's pair, idle longer, has been probed too.
    let released = metric(&gw.url, "hipobj_rdma_pairs_released_total");
    one_transfer_then_gone();
    assert!(
        eventually(Duration::from_secs(30), || metric(
            &gw.url,
            "hipobj_rdma_pairs_released_total"
        ) > released),
        "the gone client's pair was released"
    );
    assert!(
        metric(&gw.url, "hipobj_rdma_pairs") >= 1.0,
        "a live client's pair survives probes"
    );
    let mut ops = RdmaOps::new(&s3, Method::GET, "/bkt/k");
    buf.get(0, obj.len(), &mut ops).unwrap();
    assert_eq!(ops.last().status, 200);
}
