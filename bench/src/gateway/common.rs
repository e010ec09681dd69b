//! What the harness's parts share: the credentials and bucket, the three
//! ways the bytes go ([`Way`]), the clients and processes ([`Env`]), the
//! pattern fills and checks of a buffer, and the statistics helpers.

use std::sync::Arc;

use anyhow::bail;
use hipobj::{Hipobj, Registered};
use hipobj_fabric::pattern;
use hipobj_s3::{Path as S3Path, S3Client};

use crate::memory::{Cpu, Sampler};

pub(super) const GW_KEY: &str = "hipobj-test-key";
pub(super) const GW_SECRET: &str = "hipobj-test-secret";
pub(super) const UP_KEY: &str = "hipobj-bench-upstream";
pub(super) const UP_SECRET: &str = "hipobj-bench-upstream-secret";
pub(super) const BUCKET: &str = "hipobj-bench";
/// Scratch chunk of pattern fills and checks.
const SCRATCH: usize = 1 << 20;
/// What "a small constant" above the staging pool is allowed to be.
pub(super) const MEMORY_SLACK_MIB: u64 = 64;
/// A 4 KiB GET slower than this waited for a delayed ACK (40 ms on Linux).
pub(super) const STALL_MS: f64 = 30.0;

/// The three ways the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    Rdma,
    GatewayHttp,
    Direct,
}

pub(super) const WAYS: [Way; 3] = [Way::Rdma, Way::GatewayHttp, Way::Direct];

impl Way {
    pub(super) fn label(self) -> &'static str {
        match self {
            Way::Rdma => "RDMA via gateway",
            Way::GatewayHttp => "HTTP via gateway",
            Way::Direct => "HTTP direct to the store",
        }
    }

    pub(super) fn tag(self) -> &'static str {
        match self {
            Way::Rdma => "rdma",
            Way::GatewayHttp => "gwhttp",
            Way::Direct => "direct",
        }
    }

    pub(super) fn path(self) -> S3Path {
        match self {
            Way::Rdma => S3Path::Rdma,
            _ => S3Path::Http,
        }
    }
}

/// What the sections share.
pub(super) struct Env {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) lib: Arc<Hipobj>,
    pub(super) rdma: S3Client,
    pub(super) gw_http: S3Client,
    pub(super) direct: S3Client,
    pub(super) sampler: Sampler,
    pub(super) idle_rss_kib: u64,
    pub(super) store_pids: Vec<u32>,
    pub(super) gateway_pid: u32,
    /// Whether the store returns the CRC64NVME a PUT declared (s3s-fs
    /// does; a store of `--store-endpoint` may not: RGW 16).
    pub(super) store_checksums: bool,
}

impl Env {
    pub(super) fn client(&self, w: Way) -> &S3Client {
        match w {
            Way::Rdma => &self.rdma,
            Way::GatewayHttp => &self.gw_http,
            Way::Direct => &self.direct,
        }
    }

    pub(super) fn cpu(&self) -> Cpu {
        Cpu::now(&self.store_pids, self.gateway_pid)
    }

    pub(super) fn delete(&self, key: &str) {
        if let Err(e) = self.rt.block_on(self.direct.delete_object(BUCKET, key)) {
            tracing::warn!("deleting {key}: {e}");
        }
    }
}

pub(super) fn fill(
    reg: &Registered<'_, '_>,
    seed: u64,
    stream_off: u64,
    len: usize,
) -> anyhow::Result<()> {
    let mut chunk = vec![0u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        pattern::fill(seed, stream_off + done as u64, &mut chunk[..n]);
        reg.write(done, &chunk[..n])?;
        done += n;
    }
    Ok(())
}

pub(super) fn poison(reg: &Registered<'_, '_>, len: usize) -> anyhow::Result<()> {
    let chunk = vec![0xa5u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        reg.write(done, &chunk[..n])?;
        done += n;
    }
    Ok(())
}

pub(super) fn verify(
    reg: &Registered<'_, '_>,
    seed: u64,
    stream_off: u64,
    len: usize,
) -> anyhow::Result<()> {
    let mut want = vec![0u8; SCRATCH.min(len)];
    let mut got = vec![0u8; SCRATCH.min(len)];
    let mut done = 0;
    while done < len {
        let n = SCRATCH.min(len - done);
        pattern::fill(seed, stream_off + done as u64, &mut want[..n]);
        reg.read(done, &mut got[..n])?;
        if want[..n] != got[..n] {
            let i = want[..n]
                .iter()
                .zip(&got[..n])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            bail!(
                "byte {} of the object differs from what was written",
                stream_off + (done + i) as u64
            );
        }
        done += n;
    }
    Ok(())
}

pub(super) fn check(
    o: &hipobj_s3::Outcome,
    way: Way,
    bytes: u64,
    what: &str,
) -> anyhow::Result<()> {
    if o.path != way.path() {
        bail!(
            "{what} on {} went by {} ({:?})",
            way.label(),
            o.path,
            o.fallback_reason
        );
    }
    if o.bytes != bytes {
        bail!(
            "{what} on {} moved {} bytes, not {bytes}",
            way.label(),
            o.bytes
        );
    }
    Ok(())
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
