//! `hipobj token`: decode and encode `x-amz-rdma-token` values.

use anyhow::{anyhow, Context};
use clap::{Subcommand, ValueEnum};
use hipobj_wire::{detect, Gid, Token, Transport};

use crate::exit::{print_line, CliError};
use crate::json::TokenJson;
use crate::numbers::parse_number;

/// `hipobj token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Decode a token value of any dialect (hipObject 88-hex token, cuObject
    /// DC descriptor, either with the legacy :addr:size suffix) and print it
    /// as one line of JSON.
    Decode {
        /// The x-amz-rdma-token value, exactly as sent (nothing is trimmed).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Encode a hipObject token and print its 88 hex digits.
    ///
    /// Numbers are decimal, or hex with a 0x prefix (e.g. 4096 or 0x1000).
    Encode(EncodeArgs),
}

/// The fields of a hipObject token.
#[derive(Debug, clap::Args)]
pub struct EncodeArgs {
    /// Transport: rc (Reliable Connection) or dc (Dynamic Connection).
    #[arg(long, value_enum)]
    transport: TransportArg,
    /// QP number (the DCT number for dc); decimal or 0x hex.
    #[arg(long, value_parser = parse_number::<u32>)]
    qp_num: u32,
    /// GID: 32 hex digits, e.g. 00000000000000000000ffffc0a8012a.
    #[arg(long, value_parser = parse_gid)]
    gid: Gid,
    /// Memory region rkey; decimal or 0x hex.
    #[arg(long, value_parser = parse_number::<u32>)]
    rkey: u32,
    /// Remote virtual address; decimal or 0x hex.
    #[arg(long, value_parser = parse_number::<u64>)]
    addr: u64,
    /// Length in bytes (0 on RC: a connection request); decimal or 0x hex.
    #[arg(long, value_parser = parse_number::<u64>)]
    len: u64,
    /// NIC port number; decimal or 0x hex.
    #[arg(long, default_value = "1", value_parser = parse_number::<u8>)]
    port: u8,
    /// LID (0 on RoCE); decimal or 0x hex.
    #[arg(long, default_value = "0", value_parser = parse_number::<u16>)]
    lid: u16,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TransportArg {
    Rc,
    Dc,
}

fn parse_gid(s: &str) -> Result<Gid, String> {
    Gid::from_hex(s).ok_or_else(|| format!("{s:?} is not a GID: expected 32 hex digits"))
}

/// Runs a `token` subcommand.
pub fn run(cmd: TokenCmd) -> Result<(), CliError> {
    match cmd {
        TokenCmd::Decode { value } => {
            let detected = detect(&value)
                .context("invalid x-amz-rdma-token value")
                .map_err(CliError::Invalid)?;
            let line = serde_json::to_string(&TokenJson::from(&detected))
                .map_err(|e| CliError::Failed(anyhow!(e)))?;
            print_line(&line)
        }
        TokenCmd::Encode(a) => {
            let token = Token {
                transport: match a.transport {
                    TransportArg::Rc => Transport::Rc,
                    TransportArg::Dc => Transport::Dc,
                },
                qp_num: a.qp_num,
                gid: a.gid,
                rkey: a.rkey,
                addr: a.addr,
                len: a.len,
                port: a.port,
                lid: a.lid,
            };
            print_line(&token.encode())
        }
    }
}
