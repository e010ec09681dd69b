//! The sections: throughput, latency, concurrency, one big object, and a
//! huge one in parts and ranges; each measures the three ways and yields
//! its rows of the report.

use anyhow::{bail, Context};
use hipobj_fabric::pattern;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::common::{check, fill, poison, verify, Env, Way, BUCKET, WAYS};
use crate::memory::{Cpu, Window};
use crate::size::human;

#[derive(Debug)]
pub(super) struct ThroughputRow {
    pub(super) size: u64,
    /// Seconds per round, `[way][put=0/get=1]`.
    pub(super) secs: [[Vec<f64>; 2]; 3],
    /// CPU used over all rounds, `[way][put=0/get=1]`.
    pub(super) cpu: [[Cpu; 2]; 3],
    pub(super) memory: Window,
}

#[derive(Debug)]
pub(super) struct LatencyRow {
    pub(super) way: Way,
    /// Milliseconds, sorted.
    pub(super) ms: Vec<f64>,
}

#[derive(Debug)]
pub(super) struct ConcurrencyRow {
    pub(super) way: Way,
    pub(super) put: bool,
    pub(super) ok: u64,
    pub(super) errors: u64,
    pub(super) first_error: Option<String>,
    pub(super) secs: f64,
    pub(super) bytes: u64,
    pub(super) lat_ms: Vec<f64>,
    pub(super) memory: Window,
    pub(super) verified: usize,
    /// CPU seconds each process used during the phase (the checks after
    /// it not included).
    pub(super) cpu: Cpu,
}

#[derive(Debug)]
pub(super) struct BigRow {
    pub(super) size: u64,
    pub(super) put_secs: f64,
    pub(super) get_secs: f64,
    pub(super) put_memory: Window,
    pub(super) get_memory: Window,
}

#[derive(Debug)]
pub(super) struct HugeRow {
    pub(super) size: u64,
    pub(super) part: u64,
    pub(super) parts: usize,
    pub(super) put_secs: f64,
    pub(super) complete_secs: f64,
    pub(super) get_secs: f64,
    pub(super) wall_secs: f64,
    /// The gateway's sampled peak RSS during each part's and range's
    /// request, KiB.
    pub(super) per_request_peak_kib: Vec<u64>,
    pub(super) memory: Window,
}

#[derive(Debug, Default)]
pub(super) struct Results {
    pub(super) throughput: Vec<ThroughputRow>,
    pub(super) latency: Vec<LatencyRow>,
    pub(super) concurrency: Vec<ConcurrencyRow>,
    /// The small-objects section: each size and its rows.
    pub(super) small: Vec<(u64, Vec<ConcurrencyRow>)>,
    pub(super) big: Option<BigRow>,
    pub(super) huge: Option<HugeRow>,
}

const SEED_TP: u64 = 0x7470;

pub(super) fn throughput(env: &Env, size: u64, rounds: usize) -> anyhow::Result<ThroughputRow> {
    let len = size as usize;
    // Page-aligned, as GPU memory and pinned host buffers are (a heap
    // vector's 16-byte skew halves the same-host copy: docs/benchmarks.md).
    let src = env.lib.alloc_host(len)?;
    fill(&src, SEED_TP ^ size, 0, len)?;
    let dst = env.lib.alloc_host(len)?;
    let mut secs: [[Vec<f64>; 2]; 3] = Default::default();
    let mut cpu: [[Cpu; 2]; 3] = Default::default();
    env.sampler.begin();
    for round in 0..rounds {
        for (i, way) in WAYS.iter().enumerate() {
            let key = format!("tp/{size}/{}", way.tag());
            let c0 = env.cpu();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(env.client(*way).put_object(BUCKET, &key, &src, 0, len))
                .with_context(|| format!("PUT {} on {}", human(size), way.label()))?;
            secs[i][0].push(t.elapsed().as_secs_f64());
            cpu[i][0].add_since(c0, env.cpu());
            check(&o, *way, size, "PUT")?;
        }
        for (i, way) in WAYS.iter().enumerate() {
            let key = format!("tp/{size}/{}", way.tag());
            poison(&dst, len)?;
            let c0 = env.cpu();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(env.client(*way).get_object(BUCKET, &key, &dst, 0, None))
                .with_context(|| format!("GET {} on {}", human(size), way.label()))?;
            secs[i][1].push(t.elapsed().as_secs_f64());
            cpu[i][1].add_since(c0, env.cpu());
            check(&o, *way, size, "GET")?;
            verify(&dst, SEED_TP ^ size, 0, len)
                .with_context(|| format!("GET {} on {}", human(size), way.label()))?;
            // A store that keeps no checksums (Ceph RGW 16) sends none:
            // the bytes are still checked against the pattern above.
            if !o.checksum_verified && env.store_checksums {
                bail!(
                    "GET {} on {}: the store sent no full-object CRC64NVME to check",
                    human(size),
                    way.label()
                );
            }
        }
        eprintln!(
            "  throughput {}: round {} of {rounds} done",
            human(size),
            round + 1
        );
    }
    let memory = env.sampler.window();
    for way in WAYS {
        env.delete(&format!("tp/{size}/{}", way.tag()));
    }
    Ok(ThroughputRow {
        size,
        secs,
        cpu,
        memory,
    })
}

pub(super) fn latency(env: &Env, count: usize) -> anyhow::Result<Vec<LatencyRow>> {
    const SIZE: usize = 4096;
    const SEED: u64 = 0x4c4154;
    let mut src_mem = vec![0u8; SIZE];
    pattern::fill(SEED, 0, &mut src_mem);
    let dst_mem = vec![0u8; SIZE];
    let src = env.lib.register_owned(src_mem)?;
    let dst = env.lib.register_owned(dst_mem)?;
    let key = "lat/4k";
    env.rt
        .block_on(env.direct.put_object(BUCKET, key, &src, 0, SIZE))
        .context("PUT of the 4 KiB object")?;
    let mut rows = Vec::new();
    for way in WAYS {
        let c = env.client(way);
        for _ in 0..20.min(count) {
            env.rt.block_on(c.get_object(BUCKET, key, &dst, 0, None))?;
        }
        let mut ms = Vec::with_capacity(count);
        for i in 0..count {
            if i == 0 {
                poison(&dst, SIZE)?;
            }
            let t = Instant::now();
            let o = env
                .rt
                .block_on(c.get_object(BUCKET, key, &dst, 0, None))
                .with_context(|| format!("4 KiB GET on {}", way.label()))?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            check(&o, way, SIZE as u64, "GET")?;
            if i == 0 {
                verify(&dst, SEED, 0, SIZE)?;
            }
        }
        verify(&dst, SEED, 0, SIZE)?;
        ms.sort_by(f64::total_cmp);
        rows.push(LatencyRow { way, ms });
    }
    env.delete(key);
    Ok(rows)
}

pub(super) fn concurrency(
    env: &Env,
    clients: usize,
    requests: usize,
    size: u64,
) -> anyhow::Result<Vec<ConcurrencyRow>> {
    let len = size as usize;
    let mems: Vec<Vec<u8>> = (0..clients)
        .map(|w| {
            let mut m = vec![0u8; len];
            pattern::fill(0xc0 + w as u64, 0, &mut m);
            m
        })
        .collect();
    let regs = mems
        .into_iter()
        .map(|m| env.lib.register_owned(m))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    for way in WAYS {
        for put in [true, false] {
            let c = env.client(way);
            let tickets = AtomicU64::new(0);
            let lat = Mutex::new(Vec::new());
            let errors = AtomicU64::new(0);
            let first_error: Mutex<Option<String>> = Mutex::new(None);
            env.sampler.begin();
            let cpu_before = env.cpu();
            let start = Instant::now();
            std::thread::scope(|s| {
                for (w, reg) in regs.iter().enumerate() {
                    let (tickets, lat, errors, first_error) =
                        (&tickets, &lat, &errors, &first_error);
                    let handle = env.rt.handle().clone();
                    s.spawn(move || {
                        let key = format!("conc/{}/{w}", way.tag());
                        let mut mine = Vec::new();
                        while (tickets.fetch_add(1, Ordering::SeqCst) as usize) < requests {
                            let t = Instant::now();
                            let r = handle.block_on(async {
                                if put {
                                    c.put_object(BUCKET, &key, reg, 0, len).await
                                } else {
                                    c.get_object(BUCKET, &key, reg, 0, None).await
                                }
                            });
                            let r = r.map_err(anyhow::Error::from).and_then(|o| {
                                check(&o, way, size, if put { "PUT" } else { "GET" })
                            });
                            match r {
                                Ok(()) => mine.push(t.elapsed().as_secs_f64() * 1e3),
                                Err(e) => {
                                    errors.fetch_add(1, Ordering::SeqCst);
                                    first_error
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .get_or_insert(format!("{e:#}"));
                                }
                            }
                        }
                        lat.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
                    });
                }
            });
            let secs = start.elapsed().as_secs_f64();
            let mut cpu = Cpu::default();
            cpu.add_since(cpu_before, env.cpu());
            let memory = env.sampler.window();
            let mut lat_ms = lat.into_inner().unwrap_or_else(|p| p.into_inner());
            lat_ms.sort_by(f64::total_cmp);
            let ok = lat_ms.len() as u64;
            // After the GET phase: every client reads its object back into
            // a poisoned buffer and checks every byte.
            let mut verified = 0;
            if !put {
                for (w, reg) in regs.iter().enumerate() {
                    let key = format!("conc/{}/{w}", way.tag());
                    poison(reg, len)?;
                    let o = env.rt.block_on(c.get_object(BUCKET, &key, reg, 0, None))?;
                    check(&o, way, size, "GET")?;
                    verify(reg, 0xc0 + w as u64, 0, len)
                        .with_context(|| format!("client {w} on {}", way.label()))?;
                    verified += 1;
                }
            }
            eprintln!(
                "  concurrency {} {}: {ok} ok, {} errors in {secs:.1} s",
                way.label(),
                if put { "PUT" } else { "GET" },
                errors.load(Ordering::SeqCst)
            );
            rows.push(ConcurrencyRow {
                way,
                put,
                ok,
                errors: errors.load(Ordering::SeqCst),
                first_error: first_error.into_inner().unwrap_or_else(|p| p.into_inner()),
                secs,
                bytes: ok * size,
                lat_ms,
                memory,
                verified,
                cpu,
            });
        }
        for w in 0..clients {
            env.delete(&format!("conc/{}/{w}", way.tag()));
        }
    }
    Ok(rows)
}

pub(super) fn big(env: &Env, size: u64) -> anyhow::Result<BigRow> {
    const SEED: u64 = 0xb16;
    let len = size as usize;
    let reg = env.lib.alloc_host(len)?;
    fill(&reg, SEED, 0, len)?;
    let key = "big/object";
    env.sampler.begin();
    let t = Instant::now();
    let o = env
        .rt
        .block_on(env.rdma.put_object(BUCKET, key, &reg, 0, len))
        .with_context(|| format!("RDMA PUT of {}", human(size)))?;
    let put_secs = t.elapsed().as_secs_f64();
    check(&o, Way::Rdma, size, "PUT")?;
    if o.parts != 1 {
        bail!(
            "the {} PUT went in {} parts, not one request",
            human(size),
            o.parts
        );
    }
    let put_memory = env.sampler.window();
    poison(&reg, len)?;
    env.sampler.begin();
    let t = Instant::now();
    let o = env
        .rt
        .block_on(env.rdma.get_object(BUCKET, key, &reg, 0, None))
        .with_context(|| format!("RDMA GET of {}", human(size)))?;
    let get_secs = t.elapsed().as_secs_f64();
    let get_memory = env.sampler.window();
    check(&o, Way::Rdma, size, "GET")?;
    verify(&reg, SEED, 0, len)?;
    drop(reg);
    env.delete(key);
    Ok(BigRow {
        size,
        put_secs,
        get_secs,
        put_memory,
        get_memory,
    })
}

pub(super) fn huge(env: &Env, size: u64, part: u64) -> anyhow::Result<HugeRow> {
    const SEED: u64 = 0x40e;
    let parts = size.div_ceil(part) as usize;
    let reg = env.lib.alloc_host(part as usize)?;
    let key = "huge/object";
    let wall = Instant::now();
    env.sampler.begin();
    let base = env.sampler.window();
    let upload_id = env
        .rt
        .block_on(env.rdma.create_multipart_upload(BUCKET, key))?;
    let mut per_request_peak_kib = Vec::new();
    let mut completed = Vec::new();
    let mut put_secs = 0.0;
    let result: anyhow::Result<()> = (|| {
        for i in 0..parts {
            let off = i as u64 * part;
            let n = (size - off).min(part) as usize;
            fill(&reg, SEED, off, n)?;
            let before = env.sampler.window().peak_kib;
            env.sampler.begin();
            let t = Instant::now();
            let o = env
                .rt
                .block_on(
                    env.rdma
                        .upload_part(BUCKET, key, &upload_id, (i + 1) as u32, &reg, 0, n),
                )
                .with_context(|| format!("RDMA UploadPart {}", i + 1))?;
            put_secs += t.elapsed().as_secs_f64();
            let w = env.sampler.window();
            per_request_peak_kib.push(w.peak_kib);
            // Keep the section's window: restart it at the larger peak.
            let _ = before;
            check(&o, Way::Rdma, n as u64, "UploadPart")?;
            completed.push(hipobj_s3::CompletedPart {
                part_number: (i + 1) as u32,
                etag: o
                    .etag
                    .clone()
                    .context("UploadPart answered without an ETag")?,
            });
            eprintln!("  {}: part {} of {parts} sent", human(size), i + 1);
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = env
            .rt
            .block_on(env.rdma.abort_multipart_upload(BUCKET, key, &upload_id));
        return Err(e);
    }
    // Through the gateway like every other request: s3s-fs joins the parts
    // before it answers (36 s for 10 GiB), within the gateway's
    // --upstream-long-op-timeout; no object bytes move in this request.
    let t = Instant::now();
    env.rt
        .block_on(
            env.rdma
                .complete_multipart_upload(BUCKET, key, &upload_id, &completed),
        )
        .context("CompleteMultipartUpload")?;
    let complete_secs = t.elapsed().as_secs_f64();
    let mut get_secs = 0.0;
    for i in 0..parts {
        let off = i as u64 * part;
        let n = (size - off).min(part);
        env.sampler.begin();
        let t = Instant::now();
        let o = env
            .rt
            .block_on(
                env.rdma
                    .get_object(BUCKET, key, &reg, 0, Some((off, off + n - 1))),
            )
            .with_context(|| format!("RDMA range GET {}", i + 1))?;
        get_secs += t.elapsed().as_secs_f64();
        per_request_peak_kib.push(env.sampler.window().peak_kib);
        check(&o, Way::Rdma, n, "range GET")?;
        verify(&reg, SEED, off, n as usize)?;
        eprintln!(
            "  {}: range {} of {parts} read and checked",
            human(size),
            i + 1
        );
    }
    let wall_secs = wall.elapsed().as_secs_f64();
    drop(reg);
    env.delete(key);
    let peak = per_request_peak_kib.iter().copied().max().unwrap_or(0);
    let end = env.sampler.window();
    Ok(HugeRow {
        size,
        part,
        parts,
        put_secs,
        complete_secs,
        get_secs,
        wall_secs,
        per_request_peak_kib,
        memory: Window {
            start_kib: base.start_kib,
            peak_kib: peak.max(end.peak_kib),
            end_kib: end.end_kib,
            hwm_kib: end.hwm_kib,
            ..end
        },
    })
}
