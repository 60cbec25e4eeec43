//! `ringstore`: one binary that runs a node and is the admin/client tool.
//!
//! Every subcommand lives in its own module under `commands/`. Failures reach
//! the user here, once, on stderr, with the exit status of [`failure`].

mod cli;
mod client;
mod commands;
mod display;
mod failure;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::client::Connection;
use crate::failure::{Failure, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Command::Server(_) | Command::Demo(_)));
    let result = match &cli.command {
        Command::Token(args) => {
            commands::token::run(args, &mut std::io::stdout().lock()).map_err(Failure::Other)
        }
        _ => match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(run(&cli)),
            Err(error) => Err(Failure::Other(error.into())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let _ = std::io::stdout().flush();
            eprintln!("{failure}");
            failure.exit_code()
        }
    }
}

/// Runs the commands that need a runtime.
async fn run(cli: &Cli) -> Outcome {
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Command::Server(args) => return commands::server::run(args).await,
        Command::Demo(args) => return commands::demo::run(args).await,
        _ => {}
    }
    let connection = Connection::open(&cli.host).await?;
    match &cli.command {
        Command::Status(args) => commands::status::run(&connection, args, &mut out).await,
        Command::Ring => commands::ring::run(&connection, &mut out).await,
        Command::Info(args) => commands::info::run(&connection, args, &mut out).await,
        Command::Version => commands::info::version(&connection, &mut out).await,
        Command::Flush => commands::info::flush(&connection).await,
        Command::Describecluster => commands::describecluster::run(&connection, &mut out).await,
        Command::Gossipinfo => commands::gossipinfo::run(&connection, &mut out).await,
        Command::Describering(args) => {
            commands::describering::run(&connection, args, &mut out).await
        }
        Command::Getendpoints(args) => {
            commands::getendpoints::run(&connection, args, &mut out).await
        }
        Command::Put(args) => commands::data::put(&connection, args).await,
        Command::Get(args) => commands::data::get(&connection, args, &mut out).await,
        Command::Delete(args) => commands::data::delete(&connection, args).await,
        Command::Keyspace(command) => commands::keyspace::run(&connection, command, &mut out).await,
        Command::Stress(args) => commands::stress::run(&connection, args, &mut out).await,
        Command::Hints => commands::hints::show(&connection, &mut out).await,
        Command::Metrics => commands::info::metrics(&connection, &mut out).await,
        Command::Enablehandoff => commands::hints::set(&connection, Some(true), None, None).await,
        Command::Disablehandoff => commands::hints::set(&connection, Some(false), None, None).await,
        Command::Pausehandoff => commands::hints::set(&connection, None, Some(true), None).await,
        Command::Resumehandoff => commands::hints::set(&connection, None, Some(false), None).await,
        Command::Sethintedhandoffthrottlekb(args) => {
            commands::hints::set(&connection, None, None, Some(args.kib_per_second)).await
        }
        Command::Truncatehints(args) => {
            commands::hints::truncate(&connection, args, &mut out).await
        }
        Command::Decommission => commands::topology::decommission(&connection, &mut out).await,
        Command::Removenode(args) => {
            commands::topology::removenode(&connection, args, &mut out).await
        }
        Command::Cleanup(args) => commands::topology::cleanup(&connection, args, &mut out).await,
        Command::Netstats => commands::netstats::show(&connection, &mut out).await,
        Command::Setstreamthroughput(args) => {
            commands::netstats::set_throughput(&connection, args).await
        }
        Command::Getstreamthroughput => {
            commands::netstats::get_throughput(&connection, &mut out).await
        }
        Command::Plan(command) => commands::plan::run(&connection, command, &mut out).await,
        Command::Server(_) | Command::Token(_) | Command::Demo(_) => unreachable!("handled above"),
    }
}

/// Logs to stderr: `info` for a server, `warn` for the tools (`RUST_LOG` overrides).
fn init_logging(server: bool) {
    let default = if server { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
