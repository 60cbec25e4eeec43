//! `ringstore`: one binary that runs a node and is the admin/client tool.
//!
//! Every subcommand lives in its own module under `commands/`. Errors reach
//! the user here, once, as `error: …` on stderr with a non-zero exit status.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Token(args) => commands::token::run(&args, &mut std::io::stdout().lock()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
