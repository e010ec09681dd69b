//! `hipobj conformance`: a suite any RDMA S3 server can be run against.
//!
//! Each check has a stable id, cites the rule it tests (a section of
//! `docs/protocol.md`), and reports PASS, FAIL (what was expected and what
//! came: status, S3 error code, `x-amz-rdma-reply`, bytes) or SKIP (a
//! dialect the server declines with 501, a check the operator did not
//! enable). The suite makes a bucket of its own (or uses `--bucket`),
//! removes what it wrote, and exits 0 only if nothing failed; 2 for bad
//! arguments; 3 when the server has no RDMA at all (its handshake answered
//! without `x-amz-rdma-reply`). The checks are listed in
//! `docs/conformance.md`.

mod ctx;
mod dialects;
mod grammar;
mod nics;
mod partial;
mod put;
mod ranges;
mod rc_v2;
mod rehandshake;
mod report;
mod status;

use std::time::{Duration, SystemTime};

use anyhow::anyhow;
use hipobj_s3::ListOptions;

use crate::aws::ConnArgs;
use crate::common::{self, NicArgs};
use crate::exit::{note, print_line, CliError};
use ctx::{Ctx, Handshake};
use report::{CheckResult, Line, Report};

/// `hipobj conformance` flags.
#[derive(Debug, clap::Args)]
pub struct ConformanceArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub nic: NicArgs,
    /// The token dialects to check: rc (hipObject RC, the connect-first
    /// handshake; every transfer check uses it), dc (hipObject DC), cuobject
    /// (the 81-character descriptor and the legacy :addr:size suffix), v2
    /// (hipobj-rc-v2: PREPARE and READY), all.
    #[arg(long, value_enum, default_value_t = DialectArg::All)]
    pub dialect: DialectArg,
    /// Run only the checks matching these patterns (comma-separated; `*`
    /// matches anything; a bare prefix such as `get` matches `get.*`).
    #[arg(long, value_name = "PATTERN")]
    pub only: Option<String>,
    /// Skip the checks matching these patterns (as --only).
    #[arg(long, value_name = "PATTERN")]
    pub skip: Option<String>,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Use this bucket (it must exist; only the suite's keys under
    /// `hipobj-conformance/` are written and removed) instead of making one.
    #[arg(long)]
    pub bucket: Option<String>,
    /// The server's staging chunk size, for the chunk-size-plus-and-minus-one
    /// checks (hipobj-gateway's default is 8 MiB).
    #[arg(long, value_parser = crate::size::parse_size, default_value = "8MiB")]
    pub chunk_size: u64,
    /// A shell command that restarts the server (and returns once it serves
    /// again): enables the re-handshake check, else it is SKIP.
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// A second access key the server accepts, for the check that a pair
    /// made under one key is refused under another.
    #[arg(long, requires = "alt_secret_key")]
    pub alt_access_key: Option<String>,
    /// The second access key's secret.
    #[arg(long, requires = "alt_access_key")]
    pub alt_secret_key: Option<String>,
    /// The DC access key of the suite's DC targets (cuObject's default).
    #[arg(long, value_parser = parse_u64, default_value = "0xffeeddcc")]
    pub dc_key: u64,
    /// List the checks (id and rule) and exit.
    #[arg(long)]
    pub list: bool,
}

/// `--dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DialectArg {
    Rc,
    Dc,
    Cuobject,
    V2,
    All,
}

/// The dialect a check needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Rc,
    Dc,
    CuObject,
    V2,
}

impl DialectArg {
    fn allows(self, d: Dialect) -> bool {
        matches!(
            (self, d),
            (DialectArg::All, _)
                | (DialectArg::Rc, Dialect::Rc)
                | (DialectArg::Dc, Dialect::Dc)
                | (DialectArg::Cuobject, Dialect::CuObject)
                | (DialectArg::V2, Dialect::V2)
        )
    }
}

/// A check: its id, the rule, the dialect it needs, and the code.
pub struct Check {
    pub id: &'static str,
    pub rule: &'static str,
    pub dialect: Dialect,
    /// Moves a GiB: the one to `--skip` where time matters.
    pub big: bool,
    pub run: Box<dyn Fn(&mut Ctx) -> CheckResult>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("id", &self.id).finish()
    }
}

impl Check {
    fn new(
        id: &'static str,
        rule: &'static str,
        dialect: Dialect,
        run: impl Fn(&mut Ctx) -> CheckResult + 'static,
    ) -> Check {
        Check {
            id,
            rule,
            dialect,
            big: false,
            run: Box::new(run),
        }
    }

    fn big(mut self) -> Check {
        self.big = true;
        self
    }
}

/// Every check, in the order they run.
pub fn all_checks() -> Vec<Check> {
    let mut v = dialects::checks();
    v.extend(grammar::checks());
    v.extend(ranges::checks());
    v.extend(put::checks());
    v.extend(status::checks());
    v.extend(partial::checks());
    v.extend(rehandshake::checks());
    v.extend(nics::checks());
    v.extend(rc_v2::checks());
    v
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?}: {e}"))
}

/// Whether `id` matches one of the comma-separated `patterns`.
fn matches_any(patterns: &str, id: &str) -> bool {
    patterns
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| {
            if p.contains('*') {
                glob(p.as_bytes(), id.as_bytes())
            } else {
                id == p || id.strip_prefix(p).is_some_and(|r| r.starts_with('.'))
            }
        })
}

/// `*` matches any run of characters; everything else itself.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s
            .split_first()
            .is_some_and(|(d, t)| c == d && glob(rest, t)),
    }
}

/// What runs: the checks selected, and why the others do not.
fn select(
    args: &ConformanceArgs,
    checks: Vec<Check>,
) -> Result<Vec<(Check, Option<String>)>, CliError> {
    let mut out = Vec::new();
    let mut any = false;
    for c in checks {
        if let Some(only) = &args.only {
            if !matches_any(only, c.id) {
                continue;
            }
        }
        if let Some(skip) = &args.skip {
            if matches_any(skip, c.id) {
                continue;
            }
        }
        any = true;
        let why = (!args.dialect.allows(c.dialect))
            .then(|| format!("dialect {:?} not selected (--dialect)", c.dialect));
        out.push((c, why));
    }
    if !any {
        return Err(CliError::Invalid(anyhow!(
            "no check matches --only {:?} and --skip {:?} (see --list)",
            args.only.as_deref().unwrap_or(""),
            args.skip.as_deref().unwrap_or("")
        )));
    }
    Ok(out)
}

/// Runs the suite.
pub fn run(args: ConformanceArgs, rt: &tokio::runtime::Handle) -> Result<(), CliError> {
    if args.list {
        for c in all_checks() {
            print_line(&format!("{:<34} {}", c.id, c.rule))?;
        }
        return Ok(());
    }
    let selected = select(&args, all_checks())?;
    let chunk = usize::try_from(args.chunk_size)
        .ok()
        .filter(|n| *n >= 2)
        .ok_or_else(|| CliError::Invalid(anyhow!("--chunk-size must be at least 2 bytes")))?;
    let mut cfg = common::client_config(&args.conn).map_err(CliError::Invalid)?;
    // The suite's checks are of the handshake flow: that is its protocol
    // unless one is named; the v2 dialect's checks have a client of their
    // own.
    cfg.rdma_protocol = if args.nic.rdma_protocol.is_some()
        || std::env::var_os(hipobj_s3::settings::ENV_RDMA_PROTOCOL).is_some()
    {
        args.nic.protocol().map_err(CliError::Invalid)?
    } else {
        hipobj_s3::RdmaProtocol::Handshake
    };
    let nics = args.nic.names().map_err(CliError::Invalid)?;
    let libs = common::libraries(&nics).map_err(CliError::RdmaRequired)?;
    let lib = libs[0].clone();
    let rdma_client = |lib: &std::sync::Arc<hipobj::Hipobj>| {
        let mut rdma_cfg = cfg.clone().with_rdma(lib.clone());
        rdma_cfg.require_rdma = true;
        // Every check looks at the first answer: nothing is tried twice.
        rdma_cfg.attempts = 1;
        rdma_cfg.no_rdma_ttl = Duration::ZERO;
        common::client(rdma_cfg)
    };
    let s3 = rdma_client(&lib)?;
    let mut nics = vec![(lib.clone(), s3.clone())];
    for l in &libs[1..] {
        nics.push((l.clone(), rdma_client(l)?));
    }
    let plain = common::client(cfg.clone())?;
    let alt = match (&args.alt_access_key, &args.alt_secret_key) {
        (Some(ak), Some(sk)) => {
            let mut a = cfg.clone();
            a.access_key = ak.clone();
            a.secret_key = sk.clone();
            Some(common::client(a)?)
        }
        _ => None,
    };
    let (bucket, made) = match &args.bucket {
        Some(b) => (b.clone(), false),
        None => {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            let b = format!(
                "hipobj-conformance-{:x}{:06x}",
                std::process::id(),
                nanos & 0xff_ffff
            );
            rt.block_on(plain.create_bucket(&b))
                .map_err(|e| CliError::Failed(anyhow!(e).context(format!("making bucket {b}"))))?;
            (b, true)
        }
    };
    let mut c = Ctx::new(
        rt,
        lib,
        s3,
        plain,
        alt,
        bucket.clone(),
        chunk,
        args.restart_cmd.clone(),
        args.dc_key,
    );
    c.nics = nics;
    c.v2 = Some({
        let mut v2_cfg = cfg.clone().with_rdma(c.lib.clone());
        v2_cfg.rdma_protocol = hipobj_s3::RdmaProtocol::V2;
        v2_cfg.require_rdma = true;
        v2_cfg.attempts = 1;
        v2_cfg.no_rdma_ttl = Duration::ZERO;
        common::client(v2_cfg)?
    });
    let r = run_checks(&mut c, &args, selected);
    cleanup(&c, made);
    let lines = r?;
    let failed = lines.iter().filter(|l| l.result == "FAIL").count();
    if args.json {
        let report = Report {
            endpoint: c.s3.endpoint(),
            bucket: &bucket,
            checks: &lines,
            passed: lines.iter().filter(|l| l.result == "PASS").count(),
            failed,
            skipped: lines.iter().filter(|l| l.result == "SKIP").count(),
        };
        let doc =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::Failed(anyhow!(e)))?;
        print_line(&doc)?;
    } else {
        print_line(&format!(
            "{} checks: {} PASS, {failed} FAIL, {} SKIP",
            lines.len(),
            lines.iter().filter(|l| l.result == "PASS").count(),
            lines.iter().filter(|l| l.result == "SKIP").count()
        ))?;
    }
    if failed > 0 {
        return Err(CliError::Failed(anyhow!(
            "{failed} of {} checks failed",
            lines.len()
        )));
    }
    Ok(())
}

/// Probes for RDMA, then runs each check, printing its line as it ends
/// (unless JSON).
fn run_checks(
    c: &mut Ctx,
    args: &ConformanceArgs,
    selected: Vec<(Check, Option<String>)>,
) -> Result<Vec<Line>, CliError> {
    match c.handshake("handshake") {
        Ok(Handshake::Paired(_)) => {}
        Ok(Handshake::NoRdma(a)) => {
            return Err(CliError::RdmaRequired(anyhow!(
                "the server has no RDMA: it answered the handshake with {} and no x-amz-rdma-reply",
                a.status
            )))
        }
        // A refused handshake is the handshake check's FAIL.
        Err(_) => c.unpair(),
    }
    let mut lines = Vec::new();
    for (check, why) in selected {
        let r = match why {
            Some(why) => Ok(report::Outcome::Skip(why)),
            None => (check.run)(c),
        };
        let line = Line::new(check.id, check.rule, r);
        if !args.json {
            print_line(&line.text())?;
        }
        lines.push(line);
    }
    Ok(lines)
}

/// Removes the suite's objects (and its bucket, when it made it).
fn cleanup(c: &Ctx, made: bool) {
    let prefix = c.key("");
    let mut opts = ListOptions {
        prefix: Some(prefix),
        ..ListOptions::default()
    };
    loop {
        let page = match c.block(c.plain.list_objects_v2(&c.bucket, &opts)) {
            Ok(p) => p,
            Err(e) => {
                note(&format!("cleanup: listing {}: {e}", c.bucket));
                return;
            }
        };
        for o in &page.objects {
            if let Err(e) = c.block(c.plain.delete_object(&c.bucket, &o.key)) {
                note(&format!("cleanup: deleting {}: {e}", o.key));
            }
        }
        match page.next_continuation_token {
            Some(t) if page.is_truncated => opts.continuation_token = Some(t),
            _ => break,
        }
    }
    if made {
        if let Err(e) = c.block(c.plain.delete_bucket(&c.bucket)) {
            note(&format!("cleanup: deleting bucket {}: {e}", c.bucket));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches_any("get", "get.range.206"));
        assert!(matches_any("get.range.206", "get.range.206"));
        assert!(!matches_any("get.range", "get.ranges"));
        assert!(matches_any("status.*.400", "status.malformed-token.400"));
        assert!(!matches_any("status.*.400", "status.other-key.403"));
        assert!(matches_any("x, put.*", "put.whole"));
        assert!(!matches_any("", "put.whole"));
    }

    #[test]
    fn ids_are_unique_and_cite_rules() {
        let all = all_checks();
        let mut ids: Vec<_> = all.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
        assert!(all.iter().all(|c| c.rule.starts_with("docs/protocol.md, ")));
    }

    #[test]
    fn dialects_select_checks() {
        assert!(DialectArg::All.allows(Dialect::Dc));
        assert!(DialectArg::Rc.allows(Dialect::Rc));
        assert!(!DialectArg::Rc.allows(Dialect::CuObject));
        assert!(DialectArg::Cuobject.allows(Dialect::CuObject));
    }
}
