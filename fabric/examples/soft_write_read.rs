//! Moves 64 MiB between two soft RDMA devices by one-sided WRITE and READ,
//! checks every byte, and prints the throughput.
//!
//! `cargo run --release -p hipobj-fabric --example soft_write_read [BYTES]`

#![forbid(unsafe_code)]

use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::soft::SoftProvider;
use hipobj_fabric::{pattern, AccessFlags, QpCap, QpType, RemoteAddr, SendOp, SendWr, WcStatus};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bytes: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(64 << 20);
    let provider = SoftProvider::from_env()?;
    let (client, server) = (
        provider.open_ip(Ipv4Addr::LOCALHOST),
        provider.open_ip(Ipv4Addr::LOCALHOST),
    );
    let (cpd, spd) = (client.alloc_pd()?, server.alloc_pd()?);
    let (ccq, scq) = (client.create_cq(16)?, server.create_cq(16)?);
    let cqp = cpd.create_qp(QpType::Rc, &ccq, &ccq, QpCap::default())?;
    let sqp = spd.create_qp(QpType::Rc, &scq, &scq, QpCap::default())?;
    // The client lets peers read and write its buffer; the server moves the bytes.
    rc::to_init(
        &cqp,
        1,
        AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    )?;
    rc::to_init(&sqp, 1, AccessFlags::EMPTY)?;
    let peer = |dev: &hipobj_fabric::Device,
                qp: &hipobj_fabric::QueuePair|
     -> hipobj_fabric::Result<RcPeer> {
        Ok(RcPeer {
            qp_num: qp.qp_num(),
            gid: dev.gid_table(1)?[0].gid,
            lid: 0,
        })
    };
    rc::connect(&cqp, &peer(&server, &sqp)?, &RcParams::default())?;
    rc::connect(&sqp, &peer(&client, &cqp)?, &RcParams::default())?;
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let mut client_buf = cpd.alloc_buffer(bytes, rw)?;
    let mut staging = spd.alloc_buffer(bytes, AccessFlags::LOCAL_WRITE)?;
    println!(
        "client device {} (gid {:?}) qp {:#x}, server qp {:#x}",
        client.info().name,
        client.gid_table(1)?[0].gid,
        cqp.qp_num(),
        sqp.qp_num()
    );
    let remote = RemoteAddr {
        addr: client_buf.mr().addr(),
        rkey: client_buf.mr().rkey(),
    };
    let sge = staging.sge(0, bytes as u32)?;
    let transfer = |op: SendOp, what: &str| -> Result<(), Box<dyn std::error::Error>> {
        let start = Instant::now();
        sqp.post_send(&SendWr {
            wr_id: 1,
            op,
            sg_list: vec![sge],
            signaled: true,
            dc: None,
        })?;
        let wc = scq
            .wait_one(Duration::from_secs(120))?
            .ok_or("no completion")?;
        if wc.status != WcStatus::Success {
            return Err(format!("{what} failed: {}", wc.status).into());
        }
        let t = start.elapsed();
        println!(
            "{what:>5}: {bytes} bytes in {:.1} ms ({:.2} GiB/s)",
            t.as_secs_f64() * 1e3,
            bytes as f64 / t.as_secs_f64() / f64::from(1u32 << 30)
        );
        Ok(())
    };
    // A GET: the server WRITEs an object into the client's buffer.
    pattern::fill_buffer(staging.buf_mut(), 0, bytes, 42)?;
    transfer(SendOp::RdmaWrite(remote), "WRITE")?;
    match pattern::first_mismatch(client_buf.buf(), 0, bytes, 42)? {
        None => println!("WRITE: every byte matches"),
        Some(at) => return Err(format!("WRITE: mismatch at byte {at}").into()),
    }
    // A PUT: the server READs the client's buffer.
    pattern::fill_buffer(client_buf.buf_mut(), 0, bytes, 43)?;
    transfer(SendOp::RdmaRead(remote), "READ")?;
    match pattern::first_mismatch(staging.buf(), 0, bytes, 43)? {
        None => println!(" READ: every byte matches"),
        Some(at) => return Err(format!("READ: mismatch at byte {at}").into()),
    }
    Ok(())
}
