//! The `forewarn` binary: parses the command line and hands over to
//! [`detector::run_cli`]. No logic lives here (mini-redis `bin/server.rs`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = detector::cli::Cli::parse();
    match detector::run_cli(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forewarn: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
