//! `hipobj ls`, `hipobj rm`, `hipobj mb`: the plain S3 operations around a
//! copy (no RDMA, no client library).

use anyhow::Context;
use hipobj_s3::ListOptions;
use tokio::runtime::Handle;

use crate::aws::ConnArgs;
use crate::common::{self, require_s3_uri};
use crate::exit::{print_line, CliError};

/// `hipobj ls [s3://bucket[/prefix]]`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// s3://bucket[/prefix]; without it, the buckets.
    pub uri: Option<String>,
    /// Every key under the prefix, not rolled up at `/`.
    #[arg(long, short)]
    pub recursive: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `hipobj rm s3://bucket/key...`.
#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// The objects to delete (deleting a missing key succeeds, as in S3).
    #[arg(required = true)]
    pub uris: Vec<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `hipobj mb s3://bucket`.
#[derive(Debug, clap::Args)]
pub struct MbArgs {
    /// The bucket to create.
    pub uri: String,
    #[command(flatten)]
    pub conn: ConnArgs,
}

fn plain_client(conn: &ConnArgs) -> Result<hipobj_s3::S3Client, CliError> {
    let cfg = common::client_config(conn).map_err(CliError::Invalid)?;
    Ok(common::client(cfg)?)
}

/// Runs `hipobj ls`: buckets as `DATE NAME`; objects as `DATE SIZE KEY`,
/// with `PRE prefix/` for the rolled-up prefixes.
pub fn ls(args: LsArgs, rt: &Handle) -> Result<(), CliError> {
    let uri = args
        .uri
        .as_deref()
        .map(require_s3_uri)
        .transpose()
        .map_err(CliError::Invalid)?;
    let s3 = plain_client(&args.conn)?;
    let Some(uri) = uri else {
        let buckets = rt
            .block_on(s3.list_buckets())
            .context("listing the buckets")?;
        for b in buckets {
            print_line(&format!(
                "{:<24} {}",
                b.creation_date.as_deref().unwrap_or("-"),
                b.name
            ))?;
        }
        return Ok(());
    };
    let mut opts = ListOptions {
        prefix: Some(uri.key.clone()).filter(|p| !p.is_empty()),
        delimiter: (!args.recursive).then(|| "/".to_string()),
        ..Default::default()
    };
    loop {
        let page = rt
            .block_on(s3.list_objects_v2(&uri.bucket, &opts))
            .with_context(|| format!("listing {uri}"))?;
        for p in &page.common_prefixes {
            print_line(&format!("{:<24} {:>12} {p}", "", "PRE"))?;
        }
        for o in &page.objects {
            print_line(&format!(
                "{:<24} {:>12} {}",
                o.last_modified.as_deref().unwrap_or("-"),
                o.size,
                o.key
            ))?;
        }
        match page.next_continuation_token {
            Some(t) if page.is_truncated => opts.continuation_token = Some(t),
            _ => break,
        }
    }
    Ok(())
}

/// Runs `hipobj rm`.
pub fn rm(args: RmArgs, rt: &Handle) -> Result<(), CliError> {
    let uris = args
        .uris
        .iter()
        .map(|u| {
            let uri = require_s3_uri(u)?;
            if uri.key.is_empty() {
                anyhow::bail!("{u:?} names no object");
            }
            Ok(uri)
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(CliError::Invalid)?;
    let s3 = plain_client(&args.conn)?;
    for uri in uris {
        rt.block_on(s3.delete_object(&uri.bucket, &uri.key))
            .with_context(|| format!("deleting {uri}"))?;
        print_line(&format!("delete: {uri}"))?;
    }
    Ok(())
}

/// Runs `hipobj mb`.
pub fn mb(args: MbArgs, rt: &Handle) -> Result<(), CliError> {
    let uri = require_s3_uri(&args.uri).map_err(CliError::Invalid)?;
    if !uri.key.is_empty() {
        return Err(CliError::Invalid(anyhow::anyhow!(
            "{:?}: a bucket takes no key",
            args.uri
        )));
    }
    let s3 = plain_client(&args.conn)?;
    rt.block_on(s3.create_bucket(&uri.bucket))
        .with_context(|| format!("creating s3://{}", uri.bucket))?;
    print_line(&format!("make_bucket: {}", uri.bucket))
}
