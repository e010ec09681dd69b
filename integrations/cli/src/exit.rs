//! Command failures and the exit status each maps to.

use std::io::{self, Write};
use std::process::ExitCode;

/// Exit status for invalid arguments or input (clap's usage-error status).
pub const EXIT_INVALID: u8 = 2;
/// Exit status for any other failure.
pub const EXIT_FAILED: u8 = 1;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The input was invalid: exit status 2.
    Invalid(anyhow::Error),
    /// The command failed otherwise: exit status 1.
    Failed(anyhow::Error),
}

impl CliError {
    /// Prints the message to stderr and returns the exit status.
    pub fn report(self) -> ExitCode {
        let (e, code) = match self {
            CliError::Invalid(e) => (e, EXIT_INVALID),
            CliError::Failed(e) => (e, EXIT_FAILED),
        };
        // Nothing more can be done if stderr itself is gone.
        let _ = writeln!(io::stderr().lock(), "error: {e:#}");
        ExitCode::from(code)
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> CliError {
        CliError::Failed(e)
    }
}

/// Writes one line to stdout.
pub fn print_line(line: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Failed(anyhow::Error::new(e).context("writing to stdout")))
}
