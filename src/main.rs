//! `ringstore`: one binary that runs a node and is the admin/client tool.
//!
//! Every subcommand lives in its own module under `commands/`. Failures reach
//! the user here, once, on stderr, with the exit status of [`failure`].

mod cli;
mod client;
mod commands;
mod display;
mod failure;
mod logging;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::cli::{Cli, Command, StressArgs};
use crate::client::{ClientTls, Connection};
use crate::failure::{Failure, Outcome};

/// mimalloc instead of glibc's malloc: the node allocates per request (gRPC
/// frames, protobuf messages, replica lists), and glibc's `malloc`/`free`
/// took about a fifth of a node's CPU under load (issue #13's profile).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo logs to a file in its data directory, which it makes first.
    if !matches!(cli.command, Command::Demo(_)) {
        logging::init(matches!(cli.command, Command::Server(_)), cli.log_format);
    }
    let result = match &cli.command {
        Command::Token(args) => {
            commands::token::run(args, &mut std::io::stdout().lock()).map_err(Failure::Other)
        }
        Command::Certs(command) => {
            commands::certs::run(command, &mut std::io::stdout().lock()).map_err(Failure::Other)
        }
        _ => match runtime(&cli.command) {
            Ok(runtime) => runtime.block_on(run(&cli)),
            Err(error) => Err(Failure::Other(error.into())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let _ = std::io::stdout().flush();
            // A condition that did not hold was printed on stdout already.
            if !matches!(failure, Failure::NotApplied) {
                eprintln!("{failure}");
            }
            failure.exit_code()
        }
    }
}

/// The runtime `command` runs on: one worker per core, unless `stress
/// --threads N` asks for N.
fn runtime(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Stress(StressArgs {
        threads: Some(threads),
        ..
    }) = command
    {
        builder.worker_threads(threads.get());
    }
    builder.enable_all().build()
}

/// Runs the commands that need a runtime.
async fn run(cli: &Cli) -> Outcome {
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Command::Server(args) => return commands::server::run(args).await,
        Command::Demo(args) => return commands::demo::run(args, cli.log_format).await,
        _ => {}
    }
    let tls = ClientTls::from_files(
        cli.ca_cert.as_deref(),
        cli.client_cert.as_deref(),
        cli.client_key.as_deref(),
    )?;
    let credentials = client::credentials(cli.user.as_deref(), cli.password.as_deref())?;
    let connection = Connection::open(&cli.host, tls.as_ref(), credentials)
        .await?
        .with_request_timeout(Duration::from_secs_f64(cli.request_timeout));
    let outcome = run_on(cli, &connection, &mut out).await;
    match tls {
        Some(_) if cli.client_cert.is_none() => {
            outcome.map_err(|failure| failure.hint_client_certificate(&cli.host))
        }
        Some(_) => outcome,
        None => outcome.map_err(|failure| failure.hint_plaintext(&cli.host)),
    }
}

/// Runs a command against the node of `connection`.
async fn run_on(cli: &Cli, connection: &Connection, mut out: impl Write) -> Outcome {
    let connection = connection.clone();
    match &cli.command {
        Command::Status(args) => commands::status::run(&connection, args, &mut out).await,
        Command::Ring => commands::ring::run(&connection, &mut out).await,
        Command::Info(args) => commands::info::run(&connection, args, &mut out).await,
        Command::Version => commands::info::version(&connection, &mut out).await,
        Command::Flush => commands::info::flush(&connection).await,
        Command::Snapshot(args) => commands::snapshots::take(&connection, args, &mut out).await,
        Command::Listsnapshots => commands::snapshots::list(&connection, &mut out).await,
        Command::Clearsnapshot(args) => {
            commands::snapshots::clear(&connection, args, &mut out).await
        }
        Command::Restore(args) => commands::snapshots::restore(&connection, args, &mut out).await,
        Command::Drain => commands::info::drain(&connection, &mut out).await,
        Command::Reloadsecrets => commands::info::reload_secrets(&connection, &mut out).await,
        Command::Tpstats => commands::stats::tpstats(&connection, &mut out).await,
        Command::Proxyhistograms => commands::stats::proxyhistograms(&connection, &mut out).await,
        Command::Tablestats(args) => commands::stats::tablestats(&connection, args, &mut out).await,
        Command::Toppartitions(args) => {
            commands::toppartitions::run(&connection, args, &mut out).await
        }
        Command::Describecluster => commands::describecluster::run(&connection, &mut out).await,
        Command::Gossipinfo => commands::gossipinfo::run(&connection, &mut out).await,
        Command::Setlogginglevel(args) => {
            commands::info::set_logging_level(&connection, args, &mut out).await
        }
        Command::Getlogginglevels => commands::info::logging_levels(&connection, &mut out).await,
        Command::Describering(args) => {
            commands::describering::run(&connection, args, &mut out).await
        }
        Command::Getendpoints(args) => {
            commands::getendpoints::run(&connection, args, &mut out).await
        }
        Command::Put(args) => commands::data::put(&connection, args).await,
        Command::Get(args) => commands::data::get(&connection, args, &mut out).await,
        Command::Delete(args) => commands::data::delete(&connection, args).await,
        Command::Putif(args) => commands::cas::put_if(&connection, args, &mut out).await,
        Command::Deleteif(args) => commands::cas::delete_if(&connection, args, &mut out).await,
        Command::Getserial(args) => commands::cas::get_serial(&connection, args, &mut out).await,
        Command::Scan(args) => commands::scan::run(&connection, args, &mut out).await,
        Command::Export(args) => commands::export::run(&connection, args, &mut out).await,
        Command::Import(args) => commands::import::run(&connection, args, &mut out).await,
        Command::Batch(args) => commands::batch::run(&connection, args, &mut out).await,
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
        Command::Repair(args) => commands::repair::run(&connection, args, &mut out).await,
        Command::Garbagecollect(args) => {
            commands::repair::garbage_collect(&connection, args, &mut out).await
        }
        Command::Netstats => commands::netstats::show(&connection, &mut out).await,
        Command::Setstreamthroughput(args) => {
            commands::netstats::set_throughput(&connection, args).await
        }
        Command::Getstreamthroughput => {
            commands::netstats::get_throughput(&connection, &mut out).await
        }
        Command::Plan(command) => commands::plan::run(&connection, command, &mut out).await,
        Command::User(command) => commands::users::run(&connection, command, &mut out).await,
        Command::Grant(args) => commands::users::grant(&connection, args, true, &mut out).await,
        Command::Revoke(args) => commands::users::grant(&connection, args, false, &mut out).await,
        Command::Server(_) | Command::Token(_) | Command::Demo(_) | Command::Certs(_) => {
            unreachable!("handled above")
        }
    }
}
