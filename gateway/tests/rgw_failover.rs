//! Two radosgw daemons of one Ceph cluster behind one gateway
//! (`--upstream a,b`), one killed (SIGKILL) a third of the way into a load
//! of RDMA and plain clients (PUT, GET, multipart). The cluster is started
//! here with `scripts/ceph-rgw start DIR 2`. It runs only with
//! `REQUIRE_RGW=1` (then Ceph must be installed), as `.ci/run`'s RGW step
//! sets it, and is skipped (passing) otherwise; `HIPOBJ_FAILOVER_SECS`
//! sets the load's length (60 s by default).
//!
//! What must hold: a request fails only where the retry policy cannot help
//! (a streamed body in flight to the daemon that died: the gateway cannot
//! replay it and answers 502; a client retries as an SDK would), and only
//! around the kill; every operation succeeds within three tries; afterwards
//! every object's bytes are what its last successful PUT sent, through the
//! gateway and straight from the surviving daemon: none lost, none torn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hipobj_testkit::process::gateway_with;
use hipobj_testkit::rdma::{client, pattern, RdmaOps};
use hipobj_testkit::s3::{xml_field, S3};
use http::Method;

use crate::external_common::workspace_root;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"))
}

/// A cluster of `scripts/ceph-rgw`, stopped on drop.
struct Cluster {
    dir: PathBuf,
    env: HashMap<String, String>,
    _tmp: tempfile::TempDir,
}

impl Cluster {
    fn start(daemons: usize) -> Option<Cluster> {
        if std::env::var("REQUIRE_RGW").as_deref() != Ok("1") {
            // A minute of load and a cluster of its own: run on request
            // (.ci/run's RGW step sets it).
            eprintln!("rgw_failover: skipped: set REQUIRE_RGW=1 to run it (needs radosgw, ceph-mon, ceph-osd)");
            return None;
        }
        let have = ["radosgw", "ceph-mon", "ceph-osd"].iter().all(|b| {
            Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        if !have {
            assert!(
                std::env::var("REQUIRE_RGW").as_deref() != Ok("1"),
                "REQUIRE_RGW=1 but radosgw, ceph-mon or ceph-osd is not installed"
            );
            eprintln!("rgw_failover: skipped: Ceph (radosgw, ceph-mon, ceph-osd) is not installed");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cluster");
        let out = Command::new(workspace_root().join("scripts/ceph-rgw"))
            .arg("start")
            .arg(&dir)
            .arg(daemons.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/ceph-rgw start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(Cluster {
            dir,
            env,
            _tmp: tmp,
        })
    }

    fn var(&self, k: &str) -> &str {
        self.env
            .get(k)
            .unwrap_or_else(|| panic!("scripts/ceph-rgw printed no {k}"))
    }

    /// SIGKILLs radosgw number `n` (1-based).
    fn kill(&self, n: usize) {
        let pid = std::fs::read_to_string(self.dir.join(format!("rgw-r{n}.pid"))).unwrap();
        let st = Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(workspace_root().join("scripts/ceph-rgw"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// What the load saw.
#[derive(Default)]
struct Log {
    /// (seconds since start, what) of each failed try.
    failures: Vec<(f64, String)>,
    /// Operations that failed three tries.
    gave_up: Vec<String>,
    /// Each key's last successfully PUT bytes.
    objects: HashMap<String, Arc<Vec<u8>>>,
    /// Successful operations.
    ok: usize,
}

/// Runs `op` up to three times (1 s apart), logging each failed try.
fn tries(
    log: &Mutex<Log>,
    t0: Instant,
    what: &str,
    mut op: impl FnMut() -> Result<(), String>,
) -> bool {
    for attempt in 0..3 {
        match op() {
            Ok(()) => {
                log.lock().unwrap().ok += 1;
                return true;
            }
            Err(e) => {
                let at = t0.elapsed().as_secs_f64();
                log.lock()
                    .unwrap()
                    .failures
                    .push((at, format!("{what} (try {}): {e}", attempt + 1)));
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    log.lock().unwrap().gave_up.push(what.to_string());
    false
}

fn multipart(s3: &S3, path: &str, data: &[u8]) -> Result<(), String> {
    let created = s3.try_send(
        Method::POST,
        &format!("{path}?uploads"),
        &[],
        Vec::new(),
        false,
    )?;
    if created.status != 200 {
        return Err(format!("CreateMultipartUpload {}", created.status));
    }
    let id = xml_field(&created.body, "UploadId").ok_or("no UploadId")?;
    let mut parts = String::new();
    for (i, chunk) in data.chunks(5 << 20).enumerate() {
        let n = i + 1;
        let a = s3.try_send(
            Method::PUT,
            &format!("{path}?partNumber={n}&uploadId={id}"),
            &[],
            chunk.to_vec(),
            false,
        )?;
        if a.status != 200 {
            return Err(format!("UploadPart {n}: {}", a.status));
        }
        let etag = a.header("etag").ok_or("no ETag")?;
        parts.push_str(&format!(
            "<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
        ));
    }
    let done = s3.try_send(
        Method::POST,
        &format!("{path}?uploadId={id}"),
        &[],
        format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>").into_bytes(),
        false,
    )?;
    if done.status != 200 || !done.text().contains("CompleteMultipartUploadResult") {
        return Err(format!(
            "CompleteMultipartUpload {}: {}",
            done.status,
            done.text()
        ));
    }
    Ok(())
}

#[test]
fn a_radosgw_killed_under_load_loses_nothing() {
    let Some(cluster) = Cluster::start(2) else {
        return;
    };
    let secs: u64 = std::env::var("HIPOBJ_FAILOVER_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let endpoints = cluster.var("HIPOBJ_RGW_ENDPOINTS").to_string();
    let survivor = endpoints.split(',').nth(1).unwrap().to_string();
    let gw = gateway_with(
        bin(),
        &[
            "--upstream",
            &endpoints,
            "--upstream-access-key",
            cluster.var("HIPOBJ_RGW_ACCESS_KEY"),
            "--upstream-connect-timeout",
            "2s",
            "--upstream-backoff",
            "50ms,200ms",
            "--chunk-mib",
            "1",
            "--staging-buffers",
            "16",
        ],
        &[(
            "HIPOBJ_UPSTREAM_SECRET_KEY",
            cluster.var("HIPOBJ_RGW_SECRET_KEY"),
        )],
    );
    let url = gw.url.clone();
    S3::new(&url).create_bucket("failover");
    let log = Arc::new(Mutex::new(Log::default()));
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(secs);
    let kill_at = t0 + Duration::from_secs(secs / 3);
    let mut workers = Vec::new();
    // 4 RDMA clients: PUT by RDMA READ, GET back by RDMA WRITE.
    for w in 0..4u64 {
        let (url, log) = (url.clone(), log.clone());
        workers.push(std::thread::spawn(move || {
            let s3 = S3::new(&url);
            let lib = client();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let key = format!("/failover/rdma-{w}-{}", n % 4);
                let data = Arc::new(pattern(
                    w << 40 | n,
                    [4096, 1 << 20, (3 << 20) + 7][(n % 3) as usize],
                ));
                let put = tries(&log, t0, &format!("RDMA PUT {key}"), || {
                    let mut mem = data.to_vec();
                    let buf = lib.register_host(&mut mem).map_err(|e| e.to_string())?;
                    let mut ops = RdmaOps::new(&s3, Method::PUT, &key);
                    buf.put(0, data.len(), &mut ops)
                        .map_err(|e| format!("{e:?} {:?}", ops.last.as_ref().map(|a| a.status)))
                });
                if put {
                    log.lock()
                        .unwrap()
                        .objects
                        .insert(key.clone(), data.clone());
                    tries(&log, t0, &format!("RDMA GET {key}"), || {
                        let mut back = vec![0u8; data.len()];
                        {
                            let buf = lib.register_host(&mut back).map_err(|e| e.to_string())?;
                            let mut ops = RdmaOps::new(&s3, Method::GET, &key);
                            buf.get(0, data.len(), &mut ops)
                                .map_err(|e| format!("{e:?}"))?;
                        }
                        if back[..] != data[..] {
                            return Err("torn: the bytes are not what was PUT".into());
                        }
                        Ok(())
                    });
                }
                n += 1;
            }
        }));
    }
    // 3 plain clients and one multipart client.
    for w in 0..4u64 {
        let (url, log) = (url.clone(), log.clone());
        workers.push(std::thread::spawn(move || {
            let s3 = S3::new(&url);
            let mut n = 0u64;
            while Instant::now() < deadline {
                let key = format!("/failover/plain-{w}-{}", n % 4);
                let len = if w == 3 {
                    (11 << 20) + 5
                } else {
                    [1, 65_537, 2 << 20][(n % 3) as usize]
                };
                let data = Arc::new(pattern(0xF000 | w << 40 | n, len));
                let put = tries(&log, t0, &format!("PUT {key}"), || {
                    if w == 3 {
                        return multipart(&s3, &key, &data);
                    }
                    let a = s3.try_send(Method::PUT, &key, &[], data.to_vec(), false)?;
                    if a.status != 200 {
                        return Err(format!("{} {}", a.status, a.text()));
                    }
                    Ok(())
                });
                if put {
                    log.lock()
                        .unwrap()
                        .objects
                        .insert(key.clone(), data.clone());
                    tries(&log, t0, &format!("GET {key}"), || {
                        let a = s3.try_send(Method::GET, &key, &[], Vec::new(), false)?;
                        if a.status != 200 {
                            return Err(format!("{}", a.status));
                        }
                        if a.body[..] != data[..] {
                            return Err("torn".into());
                        }
                        Ok(())
                    });
                }
                n += 1;
            }
        }));
    }
    std::thread::sleep(kill_at.saturating_duration_since(Instant::now()));
    cluster.kill(1);
    let killed = t0.elapsed().as_secs_f64();
    eprintln!("rgw_failover: radosgw 1 killed at {killed:.1} s");
    for w in workers {
        w.join().unwrap();
    }
    let log = log.lock().unwrap();
    for (at, f) in &log.failures {
        eprintln!("rgw_failover: failed try at {at:.1} s: {f}");
    }
    assert!(
        log.gave_up.is_empty(),
        "operations that failed three tries: {:?}",
        log.gave_up
    );
    // Failures only around the kill: the requests in flight to the daemon
    // that died, and those sent before the gateway marked it down.
    for (at, f) in &log.failures {
        assert!(
            *at >= killed - 1.0 && *at <= killed + 15.0,
            "a try failed away from the kill ({killed:.1} s): at {at:.1} s: {f}"
        );
    }
    assert!(log.ok > 0);
    // Every object is what its last successful PUT sent, through the
    // gateway and straight from the surviving daemon.
    let gw_s3 = S3::new(&url);
    let direct = S3::with_keys(
        &survivor,
        cluster.var("HIPOBJ_RGW_ACCESS_KEY"),
        cluster.var("HIPOBJ_RGW_SECRET_KEY"),
    );
    for (key, data) in &log.objects {
        let a = gw_s3.get_plain(key);
        assert_eq!(a.status, 200, "{key} through the gateway");
        assert!(
            a.body[..] == data[..],
            "{key} through the gateway is not its last PUT"
        );
        let d = direct.get_plain(key);
        assert!(
            d.body[..] == data[..],
            "{key} straight from the store is not its last PUT"
        );
    }
    eprintln!(
        "rgw_failover: {} operations, {} failed tries (all retried), {} objects checked",
        log.ok,
        log.failures.len(),
        log.objects.len()
    );
}
