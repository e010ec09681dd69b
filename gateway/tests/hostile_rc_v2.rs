//! hipobj-rc-v2 under attack and misuse, against the real gateway binary:
//! unsigned rdma headers, another tenant's session, a wrong cookie, a
//! replayed or duplicate READY, READY racing CANCEL, CANCEL twice, a
//! client that prepares and never comes back (the reaper frees its QP and
//! staging), a write with the wrong immediate or length, sizes over the
//! caps, busy then retry, v2 turned off.

use std::time::{Duration, Instant};

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rc_v2::{self as v2, random_cookie, target, V2Client};
use hipobj_testkit::rdma::pattern;
use hipobj_testkit::s3::{Answer, S3};
use hipobj_testkit::{CredentialsFile, Tenant};
use hipobj_wire::rc_v2::{Op, Ready, SessionId, Span, H_PROTOCOL, PROTOCOL};
use hipobj_wire::Gid;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

#[track_caller]
fn error(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status, status, "{}", a.text());
    assert_eq!(a.code().as_deref(), Some(code), "{}", a.text());
    assert_eq!(
        a.header(H_PROTOCOL).as_deref(),
        Some(PROTOCOL),
        "every answer echoes the protocol"
    );
}

fn ready_of(c: &V2Client, session: SessionId, cookie: hipobj_wire::rc_v2::Cookie) -> Ready {
    Ready {
        session,
        cookie,
        qpn: c.qp.qp_num(),
        buffer: Some(c.buffer_at(0)),
    }
}

/// A PUT prepared and connected, its write not sent yet.
fn prepared_put(
    s3: &S3,
    key: &str,
    data: &[u8],
) -> (
    V2Client,
    hipobj_wire::rc_v2::PrepareAnswer,
    hipobj_wire::rc_v2::Cookie,
) {
    let mut c = V2Client::new(data.len());
    c.fill(data);
    let cookie = random_cookie();
    let span = Span::new(0, data.len() as u64).unwrap();
    let a = v2::prepare(
        s3,
        &c.prepare(Op::Put, &target("hostile", key), span, cookie),
    )
    .unwrap_or_else(|a| panic!("PREPARE: {} {}", a.status, a.text()));
    c.connect(&a);
    (c, a, cookie)
}

#[test]
fn control_requests_are_signed_whole_and_sessions_are_their_keys_own() {
    let a_key = Tenant::named("v2-a");
    let b_key = Tenant::named("v2-b");
    let creds = CredentialsFile::new(&[a_key.clone(), b_key.clone()]);
    let gw = gateway_with(bin(), &["--credentials-file", creds.arg()], &[]);
    let a = a_key.s3(&gw.url);
    let b = b_key.s3(&gw.url);
    a.create_bucket("hostile");
    let data = pattern(60, 10_000);
    assert_eq!(a.put_plain("/hostile/obj", data.clone()).status, 200);

    // An x-amz-rdma-* header outside the signature: 403.
    let c = V2Client::new(10_000);
    let cookie = random_cookie();
    let p = c.prepare(
        Op::Get,
        &target("hostile", "obj"),
        Span::new(0, 10_000).unwrap(),
        cookie,
    );
    // (The signature check itself refuses an unsigned x-amz-* header.)
    let r = v2::control(
        &a,
        hipobj_wire::rc_v2::PREPARE_PATH,
        &p.headers(),
        &[("x-amz-rdma-offset", "5")],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.code().as_deref(), Some("AccessDenied"));
    // A query, or no protocol: refused / unsupported.
    let r = v2::control(&a, "/.hipobj-rc/prepare?x=1", &p.headers(), &[]);
    error(&r, 400, "InvalidRdmaRequest");
    let no_proto: Vec<_> = p
        .headers()
        .into_iter()
        .filter(|(k, _)| *k != H_PROTOCOL)
        .collect();
    let r = v2::control(&a, hipobj_wire::rc_v2::PREPARE_PATH, &no_proto, &[]);
    assert_eq!(r.status, 501);
    assert_eq!(
        r.header("x-amz-rdma-protocol-status").as_deref(),
        Some("unsupported")
    );
    // A token naming a GID that is not the caller's: 403.
    let mut far = p.clone();
    far.token.gid = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 9, 8, 7));
    let r = v2::control(&a, hipobj_wire::rc_v2::PREPARE_PATH, &far.headers(), &[]);
    error(&r, 403, "AccessDenied");

    // A's session.
    let ans = v2::prepare(&a, &p).unwrap();
    c.connect(&ans);
    c.post_recv();
    // B cannot READY it (as if it did not exist) nor cancel it.
    error(
        &v2::ready(&b, &ready_of(&c, ans.session, cookie)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
    assert_eq!(v2::cancel(&b, ans.session).status, 200);
    // A wrong cookie: 404, the session untouched.
    let wrong = hipobj_wire::rc_v2::Cookie(cookie.0 ^ 1);
    error(
        &v2::ready(&a, &ready_of(&c, ans.session, wrong)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
    // Another QPN than the PREPARE's token: 400, the session untouched.
    let mut other_qp = ready_of(&c, ans.session, cookie);
    other_qp.qpn ^= 0x10;
    let r = v2::ready(&a, &other_qp).unwrap_err();
    error(&r, 400, "InvalidRdmaRequest");
    assert_eq!(
        r.header("x-amz-rdma-capabilities").as_deref(),
        Some("mp, hipobj-handshake")
    );
    // The owner's READY with its cookie moves the bytes; FINAL says the
    // endpoint serves parts and the handshake flow.
    let f = v2::ready(&a, &ready_of(&c, ans.session, cookie)).unwrap();
    assert_eq!(f.bytes, 10_000);
    assert!(f.parts && f.handshake, "{f:?}");
    assert!(c.read(10_000) == data);
    // Replayed: the session is gone.
    error(
        &v2::ready(&a, &ready_of(&c, ans.session, cookie)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
    // An unknown session.
    let unknown = SessionId([7; 16]);
    error(
        &v2::ready(&a, &ready_of(&c, unknown, cookie)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
}

#[test]
fn a_tenant_prepares_only_objects_of_its_buckets() {
    let creds = CredentialsFile::with_text("v2-scoped scoped-secret buckets=mine\n");
    let gw = gateway_with(bin(), &["--credentials-file", creds.arg()], &[]);
    let t = Tenant::new("v2-scoped", "scoped-secret");
    let s3 = t.s3(&gw.url);
    s3.create_bucket("mine");
    let c = V2Client::new(10);
    for (op, bucket) in [(Op::Get, "theirs"), (Op::Put, "theirs")] {
        let p = c.prepare(
            op,
            &target(bucket, "k"),
            Span::new(0, 10).unwrap(),
            random_cookie(),
        );
        error(&v2::prepare(&s3, &p).unwrap_err(), 403, "AccessDenied");
    }
    let f = v2::put(&s3, &target("mine", "k"), b"0123456789").unwrap();
    assert_eq!(f.bytes, 10);
}

#[test]
fn cancel_ready_races_replays_and_bad_writes() {
    let gw = gateway_with(bin(), &["--rc-v2-exec-timeout", "20s"], &[]);
    let s3 = S3::new(&gw.url);
    s3.create_bucket("hostile");

    // CANCEL twice: 200 both times; READY afterwards finds nothing.
    let data = pattern(61, 4096);
    let (c, a, cookie) = prepared_put(&s3, "cancelled", &data);
    assert_eq!(v2::cancel(&s3, a.session).status, 200);
    assert_eq!(v2::cancel(&s3, a.session).status, 200);
    error(
        &v2::ready(&s3, &ready_of(&c, a.session, cookie)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
    assert_eq!(
        s3.get_plain("/hostile/cancelled").status,
        404,
        "nothing was stored"
    );

    // Two READYs of one session at once: one moves the bytes, the other
    // is a conflict; a CANCEL during the transfer leaves it alone.
    let (c, a, cookie) = prepared_put(&s3, "raced", &data);
    let r = ready_of(&c, a.session, cookie);
    let url = gw.url.clone();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (r, url) = (r.clone(), url.clone());
            std::thread::spawn(move || {
                v2::ready(&S3::new(&url), &r)
                    .map(|f| f.bytes)
                    .map_err(|a| (a.status.as_u16(), a.code()))
            })
        })
        .collect();
    // Both READYs reached the gateway: one waits for the write.
    let until = Instant::now() + Duration::from_secs(20);
    while s3.metric(
        "hipobj_rdma_failures_total",
        &[("reason", "RdmaSessionConflict")],
    ) < 1.0
    {
        assert!(Instant::now() < until, "the second READY was not refused");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(v2::cancel(&s3, a.session).status, 200);
    let wc = c.write_imm(a.staging.unwrap(), 4096, cookie.0);
    assert_eq!(wc.status, hipobj_fabric::WcStatus::Success);
    let mut results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    results.sort_by_key(|r| r.is_err());
    assert_eq!(results[0], Ok(4096));
    assert_eq!(
        results[1],
        Err((409, Some("RdmaSessionConflict".to_string())))
    );
    assert!(s3.get_plain("/hostile/raced").body[..] == data[..]);

    // A write with another immediate than the cookie: refused, not stored.
    let (c, a, cookie) = prepared_put(&s3, "bad-imm", &data);
    c.write_imm(a.staging.unwrap(), 4096, cookie.0.wrapping_add(1));
    error(
        &v2::ready(&s3, &ready_of(&c, a.session, cookie)).unwrap_err(),
        400,
        "InvalidRdmaRequest",
    );
    assert_eq!(s3.get_plain("/hostile/bad-imm").status, 404);
    // A write shorter than prepared: refused.
    let (c, a, cookie) = prepared_put(&s3, "short", &data);
    c.write_imm(a.staging.unwrap(), 4000, cookie.0);
    error(
        &v2::ready(&s3, &ready_of(&c, a.session, cookie)).unwrap_err(),
        400,
        "InvalidRdmaRequest",
    );
    // A write past the region: the client's own QP fails (remote access
    // error), nothing lands beyond it, and READY fails.
    let mut big = V2Client::new(8192);
    big.fill(&pattern(62, 8192));
    let cookie = random_cookie();
    let a = v2::prepare(
        &s3,
        &big.prepare(
            Op::Put,
            &target("hostile", "over"),
            Span::new(0, 4096).unwrap(),
            cookie,
        ),
    )
    .unwrap();
    big.connect(&a);
    let wc = big.write_imm(a.staging.unwrap(), 8192, cookie.0);
    assert_ne!(
        wc.status,
        hipobj_fabric::WcStatus::Success,
        "a write past the region is refused by the NIC"
    );
    let r = v2::ready(&s3, &ready_of(&big, a.session, cookie)).unwrap_err();
    assert!(
        r.status == 502 || r.status == 400,
        "{} {}",
        r.status,
        r.text()
    );
    assert_eq!(s3.get_plain("/hostile/over").status, 404);
    assert_eq!(s3.metric("hipobj_rc_v2_sessions", &[]), 0.0);
    assert_eq!(s3.metric("hipobj_rc_v2_put_staging_bytes", &[]), 0.0);
}

#[test]
fn the_reaper_frees_what_a_vanished_client_prepared() {
    let gw = gateway_with(
        bin(),
        &[
            "--rc-v2-prepare-timeout",
            "2s",
            "--rc-v2-exec-timeout",
            "3s",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("hostile");
    // Prepared and never READY.
    let data = pattern(63, 1 << 20);
    let (c, a, cookie) = prepared_put(&s3, "gone", &data);
    assert_eq!(s3.metric("hipobj_rc_v2_sessions", &[]), 1.0);
    assert_eq!(
        s3.metric("hipobj_rc_v2_put_staging_bytes", &[]),
        (1 << 20) as f64
    );
    let until = Instant::now() + Duration::from_secs(15);
    while s3.metric("hipobj_rc_v2_sessions", &[]) > 0.0 {
        assert!(
            Instant::now() < until,
            "the prepared session was never reaped"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(s3.metric("hipobj_rc_v2_put_staging_bytes", &[]), 0.0);
    error(
        &v2::ready(&s3, &ready_of(&c, a.session, cookie)).unwrap_err(),
        404,
        "NoSuchRdmaSession",
    );
    // Its QP is gone: the client's write cannot land.
    let wc = c.write_imm(a.staging.unwrap(), 16, cookie.0);
    assert_ne!(wc.status, hipobj_fabric::WcStatus::Success);
    // READY and never writes: the execute timer fails it with 502.
    let (c, a, cookie) = prepared_put(&s3, "stalled", &data);
    let t0 = Instant::now();
    error(
        &v2::ready(&s3, &ready_of(&c, a.session, cookie)).unwrap_err(),
        502,
        "RdmaTransferFailed",
    );
    assert!(t0.elapsed() >= Duration::from_secs(3));
    assert_eq!(s3.metric("hipobj_rc_v2_sessions", &[]), 0.0);
    assert_eq!(s3.get_plain("/hostile/stalled").status, 404);
}

#[test]
fn limits_answer_with_their_codes_and_busy_is_retried() {
    let gw = gateway_with(
        bin(),
        &[
            "--rc-v2-put-mib-per-key",
            "1",
            "--rc-v2-ready-slots",
            "1",
            "--rc-v2-sessions-per-key",
            "3",
        ],
        &[],
    );
    let s3 = S3::new(&gw.url);
    s3.create_bucket("hostile");
    // Over the per-key PUT staging: 413 with the largest size served.
    let c = V2Client::new(16);
    let p = c.prepare(
        Op::Put,
        &target("hostile", "big"),
        Span::new(0, (1 << 20) + 1).unwrap(),
        random_cookie(),
    );
    let r = v2::prepare(&s3, &p).unwrap_err();
    error(&r, 413, "EntityTooLarge");
    assert_eq!(r.header("x-amz-rdma-max-size").as_deref(), Some("1048576"));
    // Over the size cap of the protocol: 400 before anything.
    let mut huge = p.headers();
    for h in huge.iter_mut() {
        if h.0 == "x-amz-rdma-size" {
            h.1 = "2147483648".into();
        }
    }
    error(
        &v2::control(&s3, hipobj_wire::rc_v2::PREPARE_PATH, &huge, &[]),
        400,
        "InvalidRdmaRequest",
    );

    // One data phase at a time: A's READY waits for its write; B's READY
    // is busy (409, Retry-After), its session still prepared.
    let data = pattern(64, 4096);
    let (ca, a, cookie_a) = prepared_put(&s3, "a", &data);
    let (cb, b, cookie_b) = prepared_put(&s3, "b", &data);
    assert_eq!(
        cb.write_imm(b.staging.unwrap(), 4096, cookie_b.0).status,
        hipobj_fabric::WcStatus::Success
    );
    let url = gw.url.clone();
    let ra = ready_of(&ca, a.session, cookie_a);
    let first = std::thread::spawn(move || {
        v2::ready(&S3::new(&url), &ra)
            .map(|f| f.bytes)
            .map_err(|a| a.status.as_u16())
    });
    // A's READY holds the only data phase slot.
    let until = Instant::now() + Duration::from_secs(20);
    while s3.metric("hipobj_rc_v2_transfers", &[]) < 1.0 {
        assert!(Instant::now() < until, "A's READY never began");
        std::thread::sleep(Duration::from_millis(50));
    }
    let busy = v2::ready(&s3, &ready_of(&cb, b.session, cookie_b)).unwrap_err();
    error(&busy, 409, "RdmaSessionConflict");
    assert_eq!(busy.header("retry-after").as_deref(), Some("1"));
    assert_eq!(
        ca.write_imm(a.staging.unwrap(), 4096, cookie_a.0).status,
        hipobj_fabric::WcStatus::Success
    );
    assert_eq!(first.join().unwrap(), Ok(4096));
    let f =
        v2::ready(&s3, &ready_of(&cb, b.session, cookie_b)).expect("B's READY again, now served");
    assert_eq!(f.bytes, 4096);
    assert!(s3.get_plain("/hostile/b").body[..] == data[..]);

    // Sessions per key: the fourth PREPARE is refused (503, retry).
    let held: Vec<_> = (0..3)
        .map(|i| prepared_put(&s3, &format!("s{i}"), &data))
        .collect();
    let c = V2Client::new(4096);
    let r = v2::prepare(
        &s3,
        &c.prepare(
            Op::Put,
            &target("hostile", "s3"),
            Span::new(0, 4096).unwrap(),
            random_cookie(),
        ),
    )
    .unwrap_err();
    error(&r, 503, "RdmaResourceLimit");
    for (_, a, _) in &held {
        assert_eq!(v2::cancel(&s3, a.session).status, 200);
    }
    assert_eq!(s3.metric("hipobj_rc_v2_sessions", &[]), 0.0);
}

#[test]
fn v2_turned_off_is_unsupported_with_the_marker() {
    let gw = gateway_with(bin(), &["--no-rc-v2"], &[]);
    let s3 = S3::new(&gw.url);
    let c = V2Client::new(10);
    let p = c.prepare(
        Op::Get,
        &target("hostile", "k"),
        Span::new(0, 10).unwrap(),
        random_cookie(),
    );
    let r = v2::prepare(&s3, &p).unwrap_err();
    assert_eq!(r.status, 501);
    assert_eq!(
        r.header("x-amz-rdma-protocol-status").as_deref(),
        Some("unsupported")
    );
    assert_eq!(r.code().as_deref(), Some("NotImplemented"));
}
