//! A gateway on several devices: two soft devices on 127.0.0.2 and
//! 127.0.0.3 (`--rdma-device soft0,soft1`), a client on each address
//! (pinned to its own soft device, its HTTP connections made from that
//! address), and each is served by the gateway's device on its own
//! address: the handshake's answer names that device's GID, the bytes are
//! equal, and the per-device metrics count each client's bytes on its
//! device only.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use hipobj::platform::gpu::NoHip;
use hipobj::platform::topology::NoTopology;
use hipobj::platform::Platform;
use hipobj::{Config, Hipobj, Options};
use hipobj_fabric::soft::{SoftConfig, SoftProvider};
use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::{handshake, pattern, RdmaOps};
use hipobj_testkit::s3::S3;
use hipobj_wire::{Gid, Reply};
use http::Method;

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}
const MIB: usize = 1 << 20;

/// The client library on a soft device of its own on `ip`, GPU-less.
fn client_on(ip: Ipv4Addr) -> Hipobj {
    let platform = Platform {
        hip: Arc::new(NoHip),
        rdma: Arc::new(SoftProvider::new(vec![ip], SoftConfig::from_env())),
        topology: Arc::new(NoTopology),
    };
    Hipobj::with_platform(platform, Options::default(), &Config::with_nic("soft0")).unwrap()
}

/// The sum of the samples of `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            let got: Vec<&str> = rest.trim_end_matches('}').split(',').collect();
            let all = labels
                .iter()
                .all(|(k, v)| got.contains(&format!("{k}=\"{v}\"").as_str()));
            (n == name && all).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

#[test]
fn each_client_is_served_by_the_device_on_its_own_address() {
    let gw = gateway_with(
        bin(),
        &[
            "--rdma-device",
            "soft0,soft1",
            "--staging-buffers",
            "8",
            "--chunk-mib",
            "1",
        ],
        &[
            ("HIPOBJ_SOFT_ADDRS", "127.0.0.2,127.0.0.3"),
            ("RUST_LOG", "info"),
        ],
    );
    let admin = S3::new(&gw.url);
    admin.create_bucket("rails");
    let rails = [
        (Ipv4Addr::new(127, 0, 0, 2), "soft0", 3 * MIB + 17),
        (Ipv4Addr::new(127, 0, 0, 3), "soft1", 2 * MIB + 5),
    ];
    for (ip, device, len) in rails {
        let data = pattern(u64::from(ip.octets()[3]), len);
        let key = format!("/rails/{device}");
        assert!(admin.put_plain(&key, data.clone()).status.is_success());
        let lib = client_on(ip);
        let s3 = S3::new(&gw.url).bound_to(IpAddr::V4(ip));

        // The handshake is answered from the device on the client's address.
        let reply = handshake(&s3, &lib, &key);
        match Reply::parse(reply.as_bytes()) {
            Ok(Reply::Peer(t)) => assert_eq!(
                t.gid,
                Gid::from_ipv4(ip),
                "the client on {ip} is answered with {device}'s GID"
            ),
            other => panic!("handshake reply {reply:?}: {other:?}"),
        }

        // A GET by RDMA WRITE, then the same bytes PUT back by RDMA READ.
        let mut back = vec![0u8; len];
        {
            let buf = lib.register_host(&mut back).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::GET, &key);
            buf.get(0, len, &mut ops).unwrap();
            assert_eq!(ops.last().status, 200, "GET: {}", ops.last().text());
            let mut ops = RdmaOps::new(&s3, Method::PUT, &format!("{key}-back"));
            buf.put(0, len, &mut ops).unwrap();
            assert_eq!(ops.last().status, 200, "PUT: {}", ops.last().text());
        }
        assert!(back == data, "the GET on {device} is byte-exact");
        let stored = admin.get_plain(&format!("{key}-back"));
        assert!(
            stored.body[..] == data[..],
            "the PUT on {device} is byte-exact"
        );
    }

    // Each device moved exactly its own client's bytes.
    let m = admin.get_unsigned("/metrics").text();
    for (_, device, len) in rails {
        let d = ("device", device);
        assert!(
            sample(&m, "hipobj_rdma_handshakes_total", &[d, ("result", "ok")]) >= 1.0,
            "{device} made a pair: {m}"
        );
        assert_eq!(
            sample(&m, "hipobj_rdma_bytes_total", &[d, ("direction", "write")]),
            len as f64,
            "bytes written on {device}"
        );
        assert_eq!(
            sample(&m, "hipobj_rdma_bytes_total", &[d, ("direction", "read")]),
            len as f64,
            "bytes read on {device}"
        );
        assert_eq!(
            sample(
                &m,
                "hipobj_rdma_transfer_seconds_count",
                &[d, ("op", "GetObject"), ("result", "ok")]
            ),
            1.0
        );
        // The 8 staging buffers are divided between the two devices.
        assert_eq!(sample(&m, "hipobj_staging_buffers_total", &[d]), 4.0);
        assert_eq!(sample(&m, "hipobj_staging_buffers_in_use", &[d]), 0.0);
    }
    let log = gw.log();
    assert!(
        log.contains("device soft0 (soft)") && log.contains("device soft1 (soft)"),
        "the start-up line names both devices: {log}"
    );
}

/// A device list naming a device twice, or an empty name, is refused at
/// start with a message that says so.
#[test]
fn a_bad_device_list_is_refused_at_start() {
    let e = hipobj_testkit::process::try_gateway_with(
        bin(),
        &["--rdma-device", "soft0,soft0"],
        &[("HIPOBJ_SOFT_ADDRS", "127.0.0.2")],
    )
    .expect_err("a device named twice is refused");
    assert!(e.to_string().contains("named twice"), "{e}");
}
