//! What the S3 commands share: `s3://` URIs, the client library, clients,
//! the progress bar.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::{bail, Context};
use hipobj::{Config, Hipobj};
use hipobj_s3::{ClientConfig, S3Client};

use crate::aws::{self, ConnArgs};

/// The NIC flag of the commands that move bytes.
#[derive(Debug, Clone, clap::Args)]
pub struct NicArgs {
    /// The NIC the client library registers buffers with (soft0, soft:<ipv4>
    /// for the software provider; mlx5_0, ... for hardware) [default:
    /// HIPOBJ_NIC, else soft0]. `cp` and `conformance` take several,
    /// comma-separated (mlx5_0,mlx5_1): the parts of a multipart upload or
    /// ranged download go round robin over them, part i through NIC i mod n.
    #[arg(long)]
    pub nic: Option<String>,
    /// The RDMA protocol: v2 (hipobj-rc-v2: PREPARE, READY), handshake (a
    /// token on each S3 request, after a connect-first handshake), or auto
    /// (v2, then the handshake flow where a server does not speak v2; and
    /// transfers of 1 MiB or less by the handshake flow at a server whose
    /// v2 answers say it serves it, as hipobj's gateway does)
    /// [default: HIPOBJ_RDMA_PROTOCOL, else auto]. Either way a server
    /// without RDMA gets plain HTTP.
    #[arg(long = "rdma-protocol", value_name = "v2|handshake|auto")]
    pub rdma_protocol: Option<String>,
}

impl NicArgs {
    /// The RDMA protocol: the flag, `HIPOBJ_RDMA_PROTOCOL`, else auto.
    pub fn protocol(&self) -> anyhow::Result<hipobj_s3::RdmaProtocol> {
        hipobj_s3::settings::resolve_rdma_protocol(self.rdma_protocol.as_deref())
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// The NIC: the flag, `HIPOBJ_NIC`, else `soft0`.
    pub fn name(&self) -> String {
        hipobj_s3::settings::resolve_nic(self.nic.as_deref())
    }
}

impl NicArgs {
    /// The NICs named, in order: comma-separated, each once.
    pub fn names(&self) -> anyhow::Result<Vec<String>> {
        let all = self.name();
        let mut names: Vec<String> = Vec::new();
        for n in all.split(',').map(str::trim) {
            if n.is_empty() {
                bail!("--nic {all:?}: an empty NIC name");
            }
            if names.iter().any(|m| m == n) {
                bail!("--nic {all:?}: {n} is named twice");
            }
            names.push(n.to_string());
        }
        Ok(names)
    }
}

/// The NIC of part `part` (counted from 0) of a transfer spread over
/// `nics` NICs: round robin.
pub fn nic_of_part(part: u64, nics: usize) -> usize {
    (part % nics.max(1) as u64) as usize
}

/// `s3://bucket/key`: the bucket and the key (possibly empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Uri {
    /// The bucket.
    pub bucket: String,
    /// The key, or the prefix; empty for the whole bucket.
    pub key: String,
}

impl std::fmt::Display for S3Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// `None` when `s` is not an `s3://` URI; an error when it is one without a
/// bucket.
pub fn parse_s3_uri(s: &str) -> Option<anyhow::Result<S3Uri>> {
    let rest = s
        .strip_prefix("s3://")
        .or_else(|| s.strip_prefix("S3://"))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Some(Err(anyhow::anyhow!("{s:?} names no bucket")));
    }
    Some(Ok(S3Uri {
        bucket: bucket.to_string(),
        key: key.to_string(),
    }))
}

/// An `s3://` URI, or an error saying one is expected.
pub fn require_s3_uri(s: &str) -> anyhow::Result<S3Uri> {
    match parse_s3_uri(s) {
        Some(r) => r,
        None => bail!("{s:?} is not an s3://bucket[/key] URI"),
    }
}

/// The client library on `nic` (the software provider for `soft*` names,
/// or with `HIPOBJ_PROVIDER=soft`).
pub fn library(nic: &str) -> anyhow::Result<Arc<Hipobj>> {
    let lib = Hipobj::new(&Config::with_nic(nic))
        .with_context(|| format!("starting the client library on NIC {nic}"))?;
    Ok(Arc::new(lib))
}

/// The client library once per NIC of `names`.
pub fn libraries(names: &[String]) -> anyhow::Result<Vec<Arc<Hipobj>>> {
    names.iter().map(|n| library(n)).collect()
}

/// A client configuration from the resolved flags, environment and files.
pub fn client_config(conn: &ConnArgs) -> anyhow::Result<ClientConfig> {
    let r = aws::resolve(conn)?;
    let mut cfg = ClientConfig::new(r.endpoint, r.access_key, r.secret_key);
    cfg.region = r.region;
    cfg.virtual_host = conn.addressing_style == aws::AddressingStyle::Virtual;
    Ok(cfg)
}

/// A client of `cfg`.
pub fn client(cfg: ClientConfig) -> anyhow::Result<S3Client> {
    S3Client::new(cfg).map_err(anyhow::Error::new)
}

/// A byte progress bar on stderr when it is a terminal, else a hidden one.
pub fn progress(total: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40.cyan/blue} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    ) {
        pb.set_style(style);
    }
    pb
}

/// The path of several transfers together.
pub fn join_paths(a: Option<hipobj_s3::Path>, b: hipobj_s3::Path) -> hipobj_s3::Path {
    a.map_or(b, |a| a.join(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let u = parse_s3_uri("s3://b/dir/k").unwrap().unwrap();
        assert_eq!((u.bucket.as_str(), u.key.as_str()), ("b", "dir/k"));
        let u = parse_s3_uri("s3://b").unwrap().unwrap();
        assert_eq!((u.bucket.as_str(), u.key.as_str()), ("b", ""));
        assert_eq!(u.to_string(), "s3://b/");
        assert!(parse_s3_uri("s3://").unwrap().is_err());
        assert!(parse_s3_uri("s3:///k").unwrap().is_err());
        assert!(parse_s3_uri("./file").is_none());
        assert!(parse_s3_uri("/tmp/s3://x").is_none());
    }

    #[test]
    fn nic_lists_and_round_robin() {
        let nics = |s: &str| {
            NicArgs {
                nic: Some(s.to_string()),
                rdma_protocol: None,
            }
            .names()
        };
        assert_eq!(nics("soft0").unwrap(), ["soft0"]);
        assert_eq!(nics("mlx5_0, mlx5_1").unwrap(), ["mlx5_0", "mlx5_1"]);
        assert!(nics("mlx5_0,,mlx5_1").is_err());
        assert!(nics("mlx5_0,mlx5_0").is_err());
        let spread: Vec<usize> = (0..7).map(|p| nic_of_part(p, 3)).collect();
        assert_eq!(spread, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(nic_of_part(5, 1), 0);
    }

    #[test]
    fn rdma_protocol_flag() {
        let with = |p: Option<&str>| {
            NicArgs {
                nic: None,
                rdma_protocol: p.map(str::to_string),
            }
            .protocol()
        };
        assert_eq!(with(Some("v2")).unwrap(), hipobj_s3::RdmaProtocol::V2);
        assert_eq!(
            with(Some("handshake")).unwrap(),
            hipobj_s3::RdmaProtocol::Handshake
        );
        assert!(with(Some("v9")).is_err());
    }

    #[test]
    fn paths() {
        use hipobj_s3::Path;
        assert_eq!(join_paths(None, Path::Rdma), Path::Rdma);
        assert_eq!(join_paths(Some(Path::Rdma), Path::Rdma), Path::Rdma);
        assert_eq!(join_paths(Some(Path::Rdma), Path::Http), Path::Mixed);
    }
}
