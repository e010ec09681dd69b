//! The images of `docker/` running together, as a deployment runs them: a
//! gateway container in front of a Ceph RGW container (a one-node cluster,
//! Debian's Ceph), and a client container (the `hipobj` command) that moves
//! objects through the gateway by RDMA on the software provider, across a
//! bridge network of the test's own. Each container has its own address
//! there; the soft devices are bound to them, so the client's RDMA GID is
//! the address its HTTP requests come from, which the gateway requires.
//!
//! The bytes are checked three ways: the client's copies back (by RDMA)
//! against the file it sent, and the objects read straight from RGW.
//!
//! The images come from `scripts/container-images` (`hipobj-gateway:local`,
//! `hipobj-cli:local`, `hipobj-ceph-rgw:local`). Skipped (and passing) where
//! no Docker engine answers or the images are missing; `REQUIRE_DOCKER=1`
//! makes that a failure (CI sets it).

#![forbid(unsafe_code)]

use std::time::Duration;

use hipobj_e2e::containers::{docker_with_limit, images_or_skip, unique_name, Container, Network};
use hipobj_e2e::{assert_object, pattern, AK, S3, SK};

const GATEWAY_IMAGE: &str = "hipobj-gateway:local";
const CLI_IMAGE: &str = "hipobj-cli:local";
const RGW_IMAGE: &str = "hipobj-ceph-rgw:local";
/// RGW's S3 port in its image.
const RGW_PORT: u16 = 7480;

/// The software provider's timer scale (CI scales them on its 2 cores),
/// passed on to the containers.
fn timeout_scale() -> String {
    std::env::var("HIPOBJ_SOFT_TIMEOUT_SCALE").unwrap_or_else(|_| "1".into())
}

#[test]
fn gateway_container_in_front_of_ceph_rgw_moves_objects_by_rdma_to_a_client_container() {
    let test = "gateway_container_in_front_of_ceph_rgw_moves_objects_by_rdma_to_a_client_container";
    if !images_or_skip(test, &[GATEWAY_IMAGE, CLI_IMAGE, RGW_IMAGE]) {
        return;
    }
    let net = Network::create(&unique_name("net"));
    let (rgw_ip, gw_ip, client_ip) = (net.addr(5), net.addr(10), net.addr(20));
    let rgw_key = "hipobj-e2e-rgw";
    let rgw_secret = format!("e2e-{:x}-rgw-secret", std::process::id());

    // Ceph: monitor, memstore OSD and radosgw, with the store's user; its S3
    // port also on 127.0.0.1 of this machine, to read what landed there.
    let rgw = Container::run(
        &unique_name("rgw"),
        &[
            "--init",
            "--network",
            &net.name,
            "--ip",
            &rgw_ip,
            "-p",
            &format!("127.0.0.1::{RGW_PORT}"),
            "-e",
            &format!("CEPH_RGW_ACCESS_KEY={rgw_key}"),
            "-e",
            &format!("CEPH_RGW_SECRET_KEY={rgw_secret}"),
            RGW_IMAGE,
        ],
    );
    rgw.wait_healthy(
        &["test", "-f", "/var/lib/ceph-rgw/ready"],
        Duration::from_secs(120),
    );

    // The gateway in front of it, its soft device on its own address.
    let gw = Container::run(
        &unique_name("gateway"),
        &[
            "--init",
            "--network",
            &net.name,
            "--ip",
            &gw_ip,
            "-e",
            &format!("HIPOBJ_UPSTREAM_SECRET_KEY={rgw_secret}"),
            "-e",
            &format!("HIPOBJ_ACCESS_KEY={AK}"),
            "-e",
            &format!("HIPOBJ_SECRET_KEY={SK}"),
            "-e",
            "HIPOBJ_RDMA_DEVICE=soft0",
            "-e",
            &format!("HIPOBJ_SOFT_ADDRS={gw_ip}"),
            "-e",
            &format!("HIPOBJ_SOFT_TIMEOUT_SCALE={}", timeout_scale()),
            GATEWAY_IMAGE,
            "--upstream",
            &format!("http://{rgw_ip}:{RGW_PORT}"),
            "--upstream-access-key",
            rgw_key,
        ],
    );
    gw.wait_healthy(&["hipobj-healthcheck"], Duration::from_secs(60));

    // The object the client sends: past one 8 MiB staging chunk, and in
    // three parts at --part-size 5MiB.
    let data = pattern(35, (12 << 20) + 17);
    let dir = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        // The image's user (uid 10001) writes the copies back here.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(dir.path().join("object.bin"), &data).unwrap();
        std::fs::set_permissions(
            dir.path().join("object.bin"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let bucket = "containers";
    let script = format!(
        "hipobj mb s3://{bucket}
hipobj cp --require-rdma /data/object.bin s3://{bucket}/whole.bin
hipobj cp --require-rdma --part-size 5MiB /data/object.bin s3://{bucket}/parts.bin
hipobj ls s3://{bucket}
hipobj cp --require-rdma s3://{bucket}/whole.bin /data/whole.bin
hipobj cp --require-rdma --part-size 5MiB s3://{bucket}/parts.bin /data/parts.bin
cmp /data/object.bin /data/whole.bin
cmp /data/object.bin /data/parts.bin
echo client: done"
    );
    let volume = format!("{}:/data", dir.path().display());
    let client_name = unique_name("client");
    let run = docker_with_limit(
        &[
            "run",
            "--rm",
            "--name",
            &client_name,
            "--network",
            &net.name,
            "--ip",
            &client_ip,
            "-v",
            &volume,
            "-e",
            &format!("AWS_ENDPOINT_URL=http://{gw_ip}:9000"),
            "-e",
            &format!("AWS_ACCESS_KEY_ID={AK}"),
            "-e",
            &format!("AWS_SECRET_ACCESS_KEY={SK}"),
            "-e",
            "AWS_REGION=us-east-1",
            "-e",
            "HIPOBJ_NIC=soft0",
            "-e",
            &format!("HIPOBJ_SOFT_ADDRS={client_ip}"),
            "-e",
            &format!("HIPOBJ_SOFT_TIMEOUT_SCALE={}", timeout_scale()),
            "--entrypoint",
            "/bin/sh",
            CLI_IMAGE,
            "-ec",
            &script,
        ],
        Duration::from_secs(300),
    );
    let run = match run {
        Ok(o) => o,
        Err(e) => {
            let _ = docker_with_limit(&["rm", "-f", &client_name], Duration::from_secs(60));
            panic!("the client container: {e}");
        }
    };
    let said = run.both();
    eprintln!("{said}");
    assert!(
        run.status.success(),
        "the client container failed ({}):\n{said}\n---- gateway log ----\n{}",
        run.status,
        gw.logs()
    );
    // Every transfer went by RDMA (--require-rdma fails otherwise; the
    // summary lines say so too): two uploads, two downloads.
    assert_eq!(
        said.matches("path: rdma").count(),
        4,
        "four transfers by RDMA:\n{said}"
    );
    assert!(said.contains("3 parts"), "a multipart transfer:\n{said}");

    // The copies the client got back, on this machine.
    for name in ["whole.bin", "parts.bin"] {
        let back = std::fs::read(dir.path().join(name)).unwrap();
        assert_eq!(back.len(), data.len(), "{name}: length");
        assert!(back == data, "{name}: the bytes differ");
    }
    // And what RGW itself holds, read straight from it.
    let direct = S3::with_keys(
        &format!("http://127.0.0.1:{}", rgw.host_port(RGW_PORT)),
        rgw_key,
        &rgw_secret,
    );
    assert_object(&direct, &format!("/{bucket}/whole.bin"), &data);
    assert_object(&direct, &format!("/{bucket}/parts.bin"), &data);
}
