//! `hipobj`: tools for S3 over RDMA.
//!
//! Exit status: 0 on success, 2 for invalid arguments or input (as clap
//! uses for usage errors), 1 when a command fails otherwise.

mod exit;
mod json;
mod numbers;
mod reply_cmd;
mod token_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tools for S3 over RDMA (hipObject and cuObject wire formats).
#[derive(Debug, Parser)]
#[command(name = "hipobj", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode or encode an x-amz-rdma-token value.
    #[command(subcommand)]
    Token(token_cmd::TokenCmd),
    /// Parse an x-amz-rdma-reply value.
    #[command(subcommand)]
    Reply(reply_cmd::ReplyCmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Token(cmd) => token_cmd::run(cmd),
        Command::Reply(cmd) => reply_cmd::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}
