//! `hipobj reply`: parse `x-amz-rdma-reply` values.

use anyhow::{anyhow, Context};
use clap::Subcommand;
use hipobj_wire::Reply;

use crate::exit::{print_line, CliError};
use crate::json::ReplyJson;

/// `hipobj reply ...`
#[derive(Debug, Subcommand)]
pub enum ReplyCmd {
    /// Parse a reply value with hipObject's grammar (ok, err, 100-599, or
    /// 200:<token>) and print it as one line of JSON.
    Parse {
        /// The x-amz-rdma-reply value; trailing NUL, CR and LF are ignored.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

/// Runs a `reply` subcommand.
pub fn run(cmd: ReplyCmd) -> Result<(), CliError> {
    match cmd {
        ReplyCmd::Parse { value } => {
            let reply = Reply::parse(&value)
                .context("invalid x-amz-rdma-reply value")
                .map_err(CliError::Invalid)?;
            let line = serde_json::to_string(&ReplyJson::from(&reply))
                .map_err(|e| CliError::Failed(anyhow!(e)))?;
            print_line(&line)
        }
    }
}
