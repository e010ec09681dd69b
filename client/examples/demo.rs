//! Moves an object by RDMA with the client library, on the embedded
//! defaults: a server peer and the client on software RDMA devices over
//! loopback, the connect-first flow (handshake, transfer, reuse), a GET into
//! a registered buffer and a PUT back, every byte checked.
//!
//! `cargo run --release -p hipobj-client --example demo [BYTES]`

#![forbid(unsafe_code)]

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::NoTopology;
use hipobj::platform::Platform;
use hipobj::testing::ServerPeer;
use hipobj::{Config, Hipobj, Options, S3Ops};
use hipobj_fabric::pattern;
use hipobj_fabric::soft::SoftProvider;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Instant;

/// Stands in for the application's S3 client: each request goes to the
/// server peer with its `x-amz-rdma-token`, and its reply comes back.
struct S3<'a> {
    server: &'a ServerPeer,
    method: &'static str,
    key: &'a str,
    reply: String,
    requests: usize,
}

impl S3Ops for S3<'_> {
    fn send_request(&mut self, token: &str) -> Result<(), i32> {
        self.requests += 1;
        self.reply = self.server.serve(self.method, self.key, token);
        Ok(())
    }
    fn recv_reply(&mut self, out: &mut [u8]) -> Result<usize, i32> {
        let r = self.reply.as_bytes();
        out.get_mut(..r.len()).ok_or(-1)?.copy_from_slice(r);
        Ok(r.len())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bytes: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(64 << 20);
    let soft = Arc::new(SoftProvider::from_env()?);
    let server = ServerPeer::new(soft.open_ip(Ipv4Addr::LOCALHOST))?;
    let mut object = vec![0u8; bytes];
    pattern::fill(42, 0, &mut object);
    server.put_object("demo/object", object);

    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: soft,
        topology: Arc::new(NoTopology),
    };
    let lib = Hipobj::with_platform(platform, Options::from_env(), &Config::with_nic("soft0"))?;
    println!(
        "client on {} (GID {:?})",
        lib.instance().chosen.nic,
        lib.instance().device.gid
    );

    let mut memory = vec![0u8; bytes];
    {
        let buf = lib.register_host(&mut memory)?;
        for round in 1..=2 {
            let mut s3 = S3 {
                server: &server,
                method: "GET",
                key: "demo/object",
                reply: String::new(),
                requests: 0,
            };
            let t = Instant::now();
            buf.get(0, bytes, &mut s3)?;
            let secs = t.elapsed().as_secs_f64();
            println!(
                "GET #{round}: {bytes} bytes, server RDMA WRITE into the buffer, {:.1} ms end to end ({:.2} GiB/s), {} request(s){}",
                secs * 1e3,
                bytes as f64 / secs / f64::from(1u32 << 30),
                s3.requests,
                if s3.requests > 1 { " (handshake first)" } else { " (connection reused)" }
            );
        }
        let mut s3 = S3 {
            server: &server,
            method: "PUT",
            key: "demo/copy",
            reply: String::new(),
            requests: 0,
        };
        let t = Instant::now();
        buf.put(0, bytes, &mut s3)?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "PUT: {bytes} bytes, server RDMA READ from the buffer, {:.1} ms end to end ({:.2} GiB/s)",
            secs * 1e3,
            bytes as f64 / secs / f64::from(1u32 << 30)
        );
    }
    let original = server.object("demo/object").ok_or("object missing")?;
    let copy = server.object("demo/copy").ok_or("copy missing")?;
    if memory != *original || copy != original {
        return Err("bytes differ".into());
    }
    println!("every byte matches: GET into the registered buffer, PUT back out of it");
    Ok(())
}
