//! `hipobj cp SRC DST`: a local file to `s3://bucket/key` or back, through
//! registered buffers, by RDMA with fallback to plain HTTP.
//!
//! A file up to `--part-size` bytes moves in one request through one buffer
//! of its size. A larger one moves in parts of `--part-size` bytes,
//! `--concurrency` at once, each worker with a registered buffer of its own:
//! a multipart upload (aborted if any part fails), or ranged GETs into a
//! temporary file renamed over the destination only when every byte is in.
//! With several NICs (`--nic mlx5_0,mlx5_1`) the client library runs once
//! per NIC and the parts go round robin, part i through NIC i mod n; each
//! worker serves one NIC (at least one worker per NIC).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use hipobj::{Hipobj, Registered};
use hipobj_s3::{CompletedPart, Outcome, Path, S3Client, Selection};
use indicatif::ProgressBar;
use tokio::runtime::Handle;

use crate::aws::ConnArgs;
use crate::common::{self, join_paths, NicArgs, S3Uri};
use crate::exit::{note, print_line, CliError};
use crate::size::{human, mib_per_s, parse_size};

/// Bytes copied between a file and a registered buffer at a time.
const CHUNK: usize = 4 << 20;
/// The most parts of a multipart upload.
const MAX_PARTS: u64 = 10_000;
/// The largest single PUT.
const MAX_SINGLE_PUT: u64 = 5 << 30;

/// `hipobj cp SRC DST`.
#[derive(Debug, clap::Args)]
pub struct CpArgs {
    /// A local file, or s3://bucket/key.
    pub src: String,
    /// s3://bucket/key (a key that is empty or ends in / takes the file's
    /// name), or a local path (an existing directory, or one ending in /,
    /// takes the key's last segment).
    pub dst: String,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub nic: NicArgs,
    #[command(flatten)]
    pub transfer: TransferArgs,
}

/// How the bytes move.
#[derive(Debug, Clone, clap::Args)]
pub struct TransferArgs {
    /// Fail with exit status 3 rather than fall back to plain HTTP: proof
    /// that every byte moved by RDMA.
    #[arg(long)]
    pub require_rdma: bool,
    /// The size of each registered buffer and part (at least 5MiB): larger
    /// objects go in parts (a multipart upload, ranged GETs).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub part_size: u64,
    /// Parts in flight at once, each through a registered buffer of its own.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Move the bytes through device memory on GPU N (HIP's GPUs are
    /// numbered first, then CUDA's) instead of host memory: each buffer is
    /// allocated on the GPU and registered by the library's GPU paths
    /// (dma-buf, plain MR, or staging), and the file is copied to and from
    /// it through the GPU runtime.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    pub gpu: Option<i32>,
}

/// What a copy did.
#[derive(Debug)]
struct Summary {
    bytes: u64,
    path: Option<Path>,
    parts: u64,
    fallback_reason: Option<String>,
}

/// What every transfer needs.
struct Ctx<'a> {
    rt: &'a Handle,
    s3: S3Client,
    /// The client library on each NIC; empty: plain HTTP only.
    libs: Vec<Arc<Hipobj>>,
    /// A client of each NIC's library (the first is `s3`): a client moves
    /// the buffers of its own library only.
    nic_s3: Vec<S3Client>,
    part_size: usize,
    concurrency: usize,
    gpu: Option<i32>,
}

impl Ctx<'_> {
    /// A registered buffer of `size` bytes: on the GPU with `--gpu`, else
    /// host memory.
    fn buffer(&self, lib: &Hipobj, size: usize) -> anyhow::Result<Registered<'static, 'static>> {
        Ok(match self.gpu {
            Some(gpu) => lib
                .register_device(gpu, size)
                .with_context(|| format!("registering {size} bytes on GPU {gpu}"))?,
            None => lib.alloc_host(size)?,
        })
    }
}

/// Runs `hipobj cp`.
pub fn run(args: CpArgs, rt: &Handle) -> Result<(), CliError> {
    let src = common::parse_s3_uri(&args.src).transpose();
    let dst = common::parse_s3_uri(&args.dst).transpose();
    let (src_s3, dst_s3) = match (src, dst) {
        (Err(e), _) | (_, Err(e)) => return Err(CliError::Invalid(e)),
        (Ok(s), Ok(d)) => (s, d),
    };
    if src_s3.is_some() == dst_s3.is_some() {
        return Err(CliError::Invalid(anyhow!(
            "one of SRC and DST must be a local file and the other s3://bucket/key"
        )));
    }
    let t = &args.transfer;
    if !(hipobj_s3::MIN_PART_SIZE as u64..=MAX_SINGLE_PUT).contains(&t.part_size) {
        return Err(CliError::Invalid(anyhow!(
            "--part-size must be between 5MiB and 5GiB"
        )));
    }
    let mut cfg = common::client_config(&args.conn).map_err(CliError::Invalid)?;
    cfg.rdma_protocol = args.nic.protocol().map_err(CliError::Invalid)?;
    let nics = args.nic.names().map_err(CliError::Invalid)?;
    let libraries = match t.gpu {
        None => common::libraries(&nics),
        Some(gpu) => nics
            .iter()
            .map(|nic| {
                Hipobj::new(&hipobj::Config {
                    gpu_device: gpu,
                    ..hipobj::Config::with_nic(nic)
                })
                .map(Arc::new)
                .with_context(|| format!("starting the client library on GPU {gpu}, NIC {nic}"))
            })
            .collect(),
    };
    let libs = match libraries {
        Ok(l) => l,
        Err(e) if t.require_rdma => return Err(CliError::RdmaRequired(e)),
        Err(e) => {
            note(&format!("note: plain HTTP only: {e:#}"));
            Vec::new()
        }
    };
    cfg.require_rdma = t.require_rdma;
    cfg.part_size = t.part_size as usize;
    cfg.concurrency = t.concurrency.into();
    cfg.rdma_memory = libs.first().cloned();
    let s3 = common::client(cfg.clone())?;
    let mut nic_s3 = vec![s3.clone()];
    for lib in libs.iter().skip(1) {
        let mut c = cfg.clone();
        c.rdma_memory = Some(lib.clone());
        nic_s3.push(common::client(c)?);
    }
    let ctx = Ctx {
        rt,
        s3,
        nic_s3,
        libs,
        part_size: t.part_size as usize,
        concurrency: t.concurrency.into(),
        gpu: t.gpu,
    };
    let start = Instant::now();
    let copied = copy(&ctx, &args, src_s3, dst_s3);
    // Whatever the outcome: the servers release this process's RDMA pairs
    // now rather than when their probes find it gone.
    for s3 in &ctx.nic_s3 {
        ctx.rt.block_on(s3.close());
    }
    let (what, from, to, summary) = copied?;
    let secs = start.elapsed().as_secs_f64();
    if let (Some(reason), Some(_)) = (&summary.fallback_reason, ctx.libs.first()) {
        note(&format!("note: plain HTTP: {reason}"));
    }
    print_line(&format!(
        "{what}: {from} -> {to}: {} bytes ({}) in {secs:.3} s, {:.1} MiB/s, {} part{}, path: {}",
        summary.bytes,
        human(summary.bytes),
        mib_per_s(summary.bytes, secs),
        summary.parts,
        if summary.parts == 1 { "" } else { "s" },
        summary.path.map_or("none", Path::as_str),
    ))
}

/// The copy itself: what was done, from where, to where, and its summary.
fn copy(
    ctx: &Ctx<'_>,
    args: &CpArgs,
    src_s3: Option<S3Uri>,
    dst_s3: Option<S3Uri>,
) -> Result<(&'static str, String, String, Summary), CliError> {
    Ok(match (src_s3, dst_s3) {
        (None, Some(mut uri)) => {
            let file = PathBuf::from(&args.src);
            if uri.key.is_empty() || uri.key.ends_with('/') {
                let name = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or_else(|| CliError::Invalid(anyhow!("{:?} names no file", args.src)))?;
                uri.key.push_str(name);
            }
            let s = upload(ctx, &file, &uri)
                .with_context(|| format!("copying {} to {uri}", file.display()))?;
            ("upload", args.src.clone(), uri.to_string(), s)
        }
        (Some(uri), None) => {
            if uri.key.is_empty() || uri.key.ends_with('/') {
                return Err(CliError::Invalid(anyhow!("{uri} names no object")));
            }
            let mut file = PathBuf::from(&args.dst);
            if args.dst.ends_with('/') || file.is_dir() {
                let name = uri.key.rsplit('/').next().unwrap_or(&uri.key);
                file.push(name);
            }
            let s = download(ctx, &uri, &file)
                .with_context(|| format!("copying {uri} to {}", file.display()))?;
            ("download", uri.to_string(), file.display().to_string(), s)
        }
        _ => unreachable!("checked above"),
    })
}

/// Copies `len` bytes of `f` at `file_off` into the buffer's start.
fn file_to_buffer(
    f: &File,
    file_off: u64,
    reg: &Registered<'_, '_>,
    len: usize,
    chunk: &mut [u8],
) -> anyhow::Result<()> {
    let mut pos = 0;
    while pos < len {
        let n = chunk.len().min(len - pos);
        f.read_exact_at(&mut chunk[..n], file_off + pos as u64)
            .context("reading the file (did it shrink?)")?;
        reg.write(pos, &chunk[..n])?;
        pos += n;
    }
    Ok(())
}

/// Copies the buffer's first `len` bytes into `f` at `file_off`.
fn buffer_to_file(
    reg: &Registered<'_, '_>,
    len: usize,
    f: &File,
    file_off: u64,
    chunk: &mut [u8],
) -> anyhow::Result<()> {
    let mut pos = 0;
    while pos < len {
        let n = chunk.len().min(len - pos);
        reg.read(pos, &mut chunk[..n])?;
        f.write_all_at(&chunk[..n], file_off + pos as u64)
            .context("writing the file")?;
        pos += n;
    }
    Ok(())
}

/// Runs `part` for each of the parts of `size` bytes on worker threads,
/// each with a registered buffer of `part_size` bytes on one NIC of
/// `ctx.libs`: part i goes through NIC i mod n, `--concurrency` workers (at
/// least one per NIC) take a NIC's parts in order. The Outcomes by part
/// number, or the first error (the other workers stop taking parts).
fn run_parts<F>(ctx: &Ctx<'_>, size: u64, pb: &ProgressBar, part: F) -> anyhow::Result<Vec<Outcome>>
where
    F: Fn(&S3Client, &Registered<'_, 'static>, &mut [u8], u64, usize) -> anyhow::Result<Outcome>
        + Sync,
{
    let ps = ctx.part_size as u64;
    let parts = size.div_ceil(ps);
    let nics = ctx.libs.len().max(1);
    let workers = (ctx.concurrency.max(nics) as u64).min(parts) as usize;
    // Per NIC, how many of its parts were taken: NIC k's j-th is part j·n + k.
    let next: Vec<AtomicU64> = (0..nics).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let first_err: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let done: Mutex<Vec<(u64, Outcome)>> = Mutex::new(Vec::new());
    let fail = |e: anyhow::Error| {
        stop.store(true, Ordering::SeqCst);
        first_err
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    };
    std::thread::scope(|s| {
        for w in 0..workers {
            let (next, fail, done) = (&next, &fail, &done);
            let (stop, part) = (&stop, &part);
            s.spawn(move || {
                let nic = w % nics;
                let r = (|| -> anyhow::Result<()> {
                    let lib = &ctx.libs[nic];
                    let reg = ctx.buffer(lib, ctx.part_size)?;
                    let mut chunk = vec![0u8; CHUNK.min(ctx.part_size)];
                    while !stop.load(Ordering::SeqCst) {
                        let i = next[nic].fetch_add(1, Ordering::SeqCst) * nics as u64 + nic as u64;
                        if i >= parts {
                            break;
                        }
                        debug_assert_eq!(common::nic_of_part(i, nics), nic);
                        let off = i * ps;
                        let len = ps.min(size - off) as usize;
                        let o = part(&ctx.nic_s3[nic], &reg, &mut chunk, off, len).with_context(
                            || format!("part {} (bytes {off}..{})", i + 1, off + len as u64),
                        )?;
                        pb.inc(len as u64);
                        done.lock().unwrap_or_else(|p| p.into_inner()).push((i, o));
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    fail(e);
                }
            });
        }
    });
    if let Some(e) = first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    if done.len() as u64 != parts {
        bail!("{} of {parts} parts were moved", done.len());
    }
    done.sort_by_key(|d| d.0);
    Ok(done.into_iter().map(|d| d.1).collect())
}

fn summarize(outs: &[Outcome], bytes: u64) -> Summary {
    let mut path = None;
    let mut reason = None;
    for o in outs {
        path = Some(join_paths(path, o.path));
        if reason.is_none() {
            reason.clone_from(&o.fallback_reason);
        }
    }
    Summary {
        bytes,
        path,
        parts: outs.len() as u64,
        fallback_reason: reason,
    }
}

fn upload(ctx: &Ctx<'_>, file: &FsPath, uri: &S3Uri) -> anyhow::Result<Summary> {
    let f = File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        bail!("{} is not a regular file", file.display());
    }
    let size = meta.len();
    let (b, k) = (uri.bucket.as_str(), uri.key.as_str());
    let s3 = &ctx.s3;
    let Some(lib) = ctx.libs.first() else {
        if size > MAX_SINGLE_PUT {
            bail!("without the client library, files over 5 GiB cannot be copied");
        }
        let o = ctx.rt.block_on(s3.put_object_http_file(b, k, file))?;
        return Ok(summarize(&[o], size));
    };
    if size == 0 {
        let o = ctx
            .rt
            .block_on(s3.put_object_http(b, k, bytes::Bytes::new()))?;
        return Ok(summarize(&[o], 0));
    }
    let ps = ctx.part_size as u64;
    let parts = size.div_ceil(ps);
    if parts > MAX_PARTS {
        bail!("{size} bytes in parts of {ps} would be {parts} parts, more than {MAX_PARTS}: raise --part-size");
    }
    let pb = common::progress(size);
    if parts == 1 {
        let reg = ctx.buffer(lib, size as usize)?;
        let mut chunk = vec![0u8; CHUNK.min(size as usize)];
        file_to_buffer(&f, 0, &reg, size as usize, &mut chunk)?;
        let o = ctx
            .rt
            .block_on(s3.put_object(b, k, &reg, 0, size as usize))?;
        pb.finish_and_clear();
        return Ok(summarize(&[o], size));
    }
    let id = ctx.rt.block_on(s3.create_multipart_upload(b, k))?;
    let abort = |e: anyhow::Error| -> anyhow::Error {
        if let Err(ae) = ctx.rt.block_on(s3.abort_multipart_upload(b, k, &id)) {
            note(&format!("warning: aborting upload {id}: {ae}"));
        }
        e
    };
    let outs = run_parts(ctx, size, &pb, |s3, reg, chunk, off, len| {
        file_to_buffer(&f, off, reg, len, chunk)?;
        let n = (off / ps + 1) as u32;
        Ok(ctx.rt.block_on(s3.upload_part(b, k, &id, n, reg, 0, len))?)
    })
    .map_err(abort)?;
    let completed = outs
        .iter()
        .enumerate()
        .map(|(i, o)| {
            Ok(CompletedPart {
                part_number: i as u32 + 1,
                etag: o
                    .etag
                    .clone()
                    .ok_or_else(|| anyhow!("part {} was answered without an ETag", i + 1))?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(abort)?;
    ctx.rt
        .block_on(s3.complete_multipart_upload(b, k, &id, &completed))
        .map_err(|e| abort(e.into()))?;
    pb.finish_and_clear();
    Ok(summarize(&outs, size))
}

/// A temporary file beside `dst`, removed on drop unless kept.
struct TempOut {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn download(ctx: &Ctx<'_>, uri: &S3Uri, dst: &FsPath) -> anyhow::Result<Summary> {
    let (b, k) = (uri.bucket.as_str(), uri.key.as_str());
    let s3 = &ctx.s3;
    let info = ctx.rt.block_on(s3.head_object(b, k))?;
    let size = info.size;
    let name = dst
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{} names no file", dst.display()))?;
    let mut tmp = TempOut {
        path: dst.with_file_name(format!(".{name}.hipobj-{}.part", std::process::id())),
        keep: false,
    };
    let f = File::create(&tmp.path).with_context(|| format!("creating {}", tmp.path.display()))?;
    let pb = common::progress(size);
    let summary = match ctx.libs.first() {
        None => {
            let o = ctx.rt.block_on(async {
                let mut w = tokio::fs::File::from_std(f.try_clone()?);
                s3.get_object_http(b, k, Selection::Whole, &mut w).await
            })?;
            summarize(&[o], size)
        }
        Some(_) if size == 0 => Summary {
            bytes: 0,
            path: None,
            parts: 0,
            fallback_reason: None,
        },
        Some(lib) if size <= ctx.part_size as u64 => {
            let reg = ctx.buffer(lib, size as usize)?;
            let o = ctx.rt.block_on(s3.get_object(b, k, &reg, 0, None))?;
            if o.bytes != size {
                bail!(
                    "the object changed during the copy: {} bytes, not {size}",
                    o.bytes
                );
            }
            let mut chunk = vec![0u8; CHUNK.min(size as usize)];
            buffer_to_file(&reg, size as usize, &f, 0, &mut chunk)?;
            summarize(&[o], size)
        }
        Some(_) => {
            f.set_len(size)?;
            let outs = run_parts(ctx, size, &pb, |s3, reg, chunk, off, len| {
                let last = off + len as u64 - 1;
                let o = ctx
                    .rt
                    .block_on(s3.get_object(b, k, reg, 0, Some((off, last))))?;
                if o.bytes != len as u64 || o.object_size.is_some_and(|n| n != size) {
                    bail!("the object changed during the copy");
                }
                buffer_to_file(reg, len, &f, off, chunk)?;
                Ok(o)
            })?;
            if let Some(declared) = info
                .checksum_crc64nvme
                .as_deref()
                .filter(|d| hipobj_s3::is_full_object(d))
            {
                let actual = file_crc(&f, size)?;
                let path = summarize(&outs, size).path.unwrap_or(Path::Mixed);
                hipobj_s3::verify_checksum(declared, &actual, path)?;
            }
            summarize(&outs, size)
        }
    };
    pb.finish_and_clear();
    drop(f);
    std::fs::rename(&tmp.path, dst)
        .with_context(|| format!("renaming {} to {}", tmp.path.display(), dst.display()))?;
    tmp.keep = true;
    Ok(summary)
}

/// The CRC64NVME header value of the first `size` bytes of `f`.
fn file_crc(f: &File, size: u64) -> anyhow::Result<String> {
    let mut crc = hipobj_s3::Crc64Nvme::new();
    let mut chunk = vec![0u8; CHUNK];
    let mut pos = 0u64;
    while pos < size {
        let n = (CHUNK as u64).min(size - pos) as usize;
        f.read_exact_at(&mut chunk[..n], pos)?;
        crc.update(&chunk[..n]);
        pos += n as u64;
    }
    Ok(crc.header_value())
}
