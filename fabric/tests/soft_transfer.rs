//! Byte-exact transfers between two soft devices in one process.

#![forbid(unsafe_code)]

use crate::common;

use common::*;
use hipobj_fabric::{pattern, WcStatus};

fn one_byte() {
    write_then_read(1);
}

fn four_kib() {
    write_then_read(4096);
}

fn one_mib() {
    write_then_read(1 << 20);
}

fn two_hundred_fifty_six_mib() {
    write_then_read(256 << 20);
}

fn unaligned_ranges_and_offsets() {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let len = (3 << 20) + 17;
    let mut src = a.buffer(len + 100, RW);
    let remote = b.buffer(len + 100, RW);
    pattern::fill_buffer(src.buf_mut(), 5, len, 3).unwrap();
    a.qp.post_send(&write_wr(9, src.sge(5, len as u32).unwrap(), &remote, 33))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 33, len, 3).unwrap(),
        None
    );
    let mut head = [1u8; 33];
    remote.buf().read_at(0, &mut head).unwrap();
    assert_eq!(
        head, [0u8; 33],
        "bytes before the target range were written"
    );
}

fn many_requests_in_flight_complete_in_order() {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let seg = 3 << 20;
    let mut src = a.buffer(seg * 4, RW);
    let remote = b.buffer(seg * 4, RW);
    let back = a.buffer(seg * 4, RW);
    pattern::fill_buffer(src.buf_mut(), 0, seg * 4, 11).unwrap();
    for i in 0..4u64 {
        let off = i * seg as u64;
        a.qp.post_send(&write_wr(
            i,
            src.sge(off, seg as u32).unwrap(),
            &remote,
            off,
        ))
        .unwrap();
    }
    for i in 0..4u64 {
        let off = i * seg as u64;
        a.qp.post_send(&read_wr(
            10 + i,
            back.sge(off, seg as u32).unwrap(),
            &remote,
            off,
        ))
        .unwrap();
    }
    let ids: Vec<u64> = (0..8)
        .map(|_| {
            let wc = a.wait();
            assert_eq!(wc.status, WcStatus::Success);
            wc.wr_id
        })
        .collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 10, 11, 12, 13]);
    assert_eq!(
        pattern::first_mismatch(back.buf(), 0, seg * 4, 11).unwrap(),
        None
    );
}

fn sixteen_qps_transfer_concurrently() {
    let p = default_provider();
    let dev_a = p.open_ip(std::net::Ipv4Addr::LOCALHOST);
    let dev_b = p.open_ip(std::net::Ipv4Addr::LOCALHOST);
    let pd_a = dev_a.alloc_pd().unwrap();
    let pd_b = dev_b.alloc_pd().unwrap();
    let len = 4 << 20;
    std::thread::scope(|s| {
        for i in 0..16u64 {
            let (dev_a, dev_b, pd_a, pd_b) =
                (dev_a.clone(), dev_b.clone(), pd_a.clone(), pd_b.clone());
            s.spawn(move || {
                let a = End::on(dev_a, pd_a, REMOTE_RW);
                let b = End::on(dev_b, pd_b, REMOTE_RW);
                connect(&a, &b);
                let mut src = a.buffer(len, RW);
                let remote = b.buffer(len, RW);
                let back = a.buffer(len, RW);
                pattern::fill_buffer(src.buf_mut(), 0, len, 100 + i).unwrap();
                a.qp.post_send(&write_wr(i, src.sge(0, len as u32).unwrap(), &remote, 0))
                    .unwrap();
                assert_eq!(a.wait().status, WcStatus::Success);
                a.qp.post_send(&read_wr(i, back.sge(0, len as u32).unwrap(), &remote, 0))
                    .unwrap();
                assert_eq!(a.wait().status, WcStatus::Success);
                assert_eq!(
                    pattern::first_mismatch(remote.buf(), 0, len, 100 + i).unwrap(),
                    None
                );
                assert_eq!(
                    pattern::first_mismatch(back.buf(), 0, len, 100 + i).unwrap(),
                    None
                );
            });
        }
    });
}

fn more_qps_than_one_listener_serves() {
    // 256 QP numbers per listener: the 300th QP is on a second listener
    // and is reached all the same.
    let p = default_provider();
    let dev = p.open_ip(std::net::Ipv4Addr::LOCALHOST);
    let pd = dev.alloc_pd().unwrap();
    let ends: Vec<End> = (0..300)
        .map(|_| End::on(dev.clone(), pd.clone(), REMOTE_RW))
        .collect();
    let qpns: std::collections::HashSet<u32> = ends.iter().map(|e| e.qp.qp_num()).collect();
    assert_eq!(qpns.len(), 300);
    let ports: std::collections::HashSet<u32> = qpns.iter().map(|q| q >> 8).collect();
    assert!(ports.len() >= 2);
    let a = End::new(&p);
    let b = ends.last().unwrap();
    connect(&a, b);
    let mut src = a.buffer(4096, RW);
    let remote = b.buffer(4096, RW);
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 77).unwrap();
    a.qp.post_send(&write_wr(1, src.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, 4096, 77).unwrap(),
        None
    );
}

/// A small request posted on an idle, connected QP goes out from the
/// posting thread (the requester's inline path); anything else (the first
/// request, which opens the connection, one behind another, one of 64 KiB)
/// goes through the engine. Both land byte for byte and complete in order.
fn small_requests_on_an_idle_qp_are_sent_by_the_posting_thread() {
    let p = default_provider();
    let (a, b) = (End::new(&p), End::new(&p));
    connect(&a, &b);
    let len = 64 << 10;
    let mut src = a.buffer(len, RW);
    let remote = b.buffer(len, RW);
    let inline = || a.stats().now().sent_inline;

    // The first request opens the connection: the engine sends it.
    pattern::fill_buffer(src.buf_mut(), 0, 4096, 1).unwrap();
    a.qp.post_send(&write_wr(1, src.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(inline(), 0);

    // Then 4 KiB WRITEs one at a time. A post may still find the engine
    // finishing its own send (it lets go of the connection only after the
    // completion is out), and the engine then sends it: they are posted
    // until one goes inline, which leaves the engine out of it. From then
    // on, each finds the QP idle and goes inline: 8 WRITEs and a READ.
    let write_4k = |src: &mut hipobj_fabric::RegisteredBuffer, id: u64, seed: u64| {
        pattern::fill_buffer(src.buf_mut(), 0, 4096, seed).unwrap();
        a.qp.post_send(&write_wr(id, src.sge(0, 4096).unwrap(), &remote, 0))
            .unwrap();
        let wc = a.wait();
        assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success));
        assert_eq!(
            pattern::first_mismatch(remote.buf(), 0, 4096, seed).unwrap(),
            None
        );
    };
    let mut tries = 0;
    while inline() == 0 {
        tries += 1;
        assert!(tries <= 100, "100 requests on an idle QP and none inline");
        write_4k(&mut src, 2, 2);
    }
    let back = a.buffer(4096, RW);
    for i in 0..8u64 {
        write_4k(&mut src, 20 + i, 10 + i);
    }
    a.qp.post_send(&read_wr(30, back.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    let wc = a.wait();
    assert_eq!((wc.wr_id, wc.status), (30, WcStatus::Success));
    assert_eq!(
        pattern::first_mismatch(back.buf(), 0, 4096, 17).unwrap(),
        None
    );
    let n = inline();
    assert_eq!(n, 10, "after the first inline request");

    // 64 KiB is the engine's (the same-host path's size).
    pattern::fill_buffer(src.buf_mut(), 0, len, 40).unwrap();
    a.qp.post_send(&write_wr(40, src.sge(0, len as u32).unwrap(), &remote, 0))
        .unwrap();
    assert_eq!(a.wait().status, WcStatus::Success);
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, len, 40).unwrap(),
        None
    );
    assert_eq!(inline(), n);

    // Two posted back to back: the first may go inline, the second waits
    // for the engine behind it; they land and complete in order.
    pattern::fill_buffer(src.buf_mut(), 0, 8192, 50).unwrap();
    a.qp.post_send(&write_wr(51, src.sge(0, 4096).unwrap(), &remote, 0))
        .unwrap();
    a.qp.post_send(&write_wr(52, src.sge(4096, 4096).unwrap(), &remote, 4096))
        .unwrap();
    assert_eq!(a.wait().wr_id, 51);
    assert_eq!(a.wait().wr_id, 52);
    assert_eq!(
        pattern::first_mismatch(remote.buf(), 0, 8192, 50).unwrap(),
        None
    );
    // (The first may again find the engine finishing the 64 KiB one; the
    // second goes inline only if the first completed before it was posted.)
    assert!((n..=n + 2).contains(&inline()), "{}", inline());
}

both_paths!(
    small_requests_on_an_idle_qp_are_sent_by_the_posting_thread,
    one_byte,
    four_kib,
    one_mib,
    two_hundred_fifty_six_mib,
    unaligned_ranges_and_offsets,
    many_requests_in_flight_complete_in_order,
    sixteen_qps_transfer_concurrently,
    more_qps_than_one_listener_serves,
);
