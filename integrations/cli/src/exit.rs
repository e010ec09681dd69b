//! Command failures and the exit status each maps to.

use std::io::{self, Write};
use std::process::ExitCode;

/// Exit status for invalid arguments or input (clap's usage-error status).
pub const EXIT_INVALID: u8 = 2;
/// Exit status for any other failure.
pub const EXIT_FAILED: u8 = 1;
/// Exit status when `--require-rdma` is set and a transfer would have
/// fallen back to plain HTTP (or RDMA cannot be used at all).
pub const EXIT_RDMA_REQUIRED: u8 = 3;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The input was invalid: exit status 2.
    Invalid(anyhow::Error),
    /// The command failed otherwise: exit status 1.
    Failed(anyhow::Error),
    /// RDMA was required and not used: exit status 3.
    RdmaRequired(anyhow::Error),
}

impl CliError {
    /// Prints the message to stderr and returns the exit status.
    pub fn report(self) -> ExitCode {
        let (e, code) = match self {
            CliError::Invalid(e) => (e, EXIT_INVALID),
            CliError::Failed(e) => (e, EXIT_FAILED),
            CliError::RdmaRequired(e) => (e, EXIT_RDMA_REQUIRED),
        };
        // Nothing more can be done if stderr itself is gone.
        let _ = writeln!(io::stderr().lock(), "error: {e:#}");
        ExitCode::from(code)
    }
}

impl From<anyhow::Error> for CliError {
    /// A failure: exit status 3 when an [`hipobj_s3::Error::RdmaRequired`]
    /// is among its causes, 2 for an invalid client configuration or
    /// argument, 1 otherwise.
    fn from(e: anyhow::Error) -> CliError {
        let s3 = e.chain().find_map(|c| c.downcast_ref::<hipobj_s3::Error>());
        match s3 {
            Some(hipobj_s3::Error::RdmaRequired { .. }) => CliError::RdmaRequired(e),
            Some(hipobj_s3::Error::Config(_)) => CliError::Invalid(e),
            _ => CliError::Failed(e),
        }
    }
}

impl From<hipobj_s3::Error> for CliError {
    fn from(e: hipobj_s3::Error) -> CliError {
        anyhow::Error::new(e).into()
    }
}

/// Writes one line to stdout.
pub fn print_line(line: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Failed(anyhow::Error::new(e).context("writing to stdout")))
}

/// Writes one line to stderr (a note beside the output), ignoring a closed
/// stderr.
pub fn note(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}
