//! `ringstore import`: the JSON lines of `export` written back in batches
//! through the client library (see [`BatchSender`]), each row with its own
//! timestamp and expiry (so a re-import is idempotent, and safe for the
//! library to retry, and a TTL ends at the same moment), at most `--rate`
//! rows per second, with a progress bar on a terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringstore_replication::ConsistencyLevel;

use crate::cli::{parse_level, whole};
use crate::client::Connection;
use crate::commands::batch::{BatchSender, finish, open_lines};
use crate::commands::jsonl;
use crate::failure::Outcome;

/// Arguments of `ringstore import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The keyspace (it must exist).
    pub keyspace: String,
    /// The file `export` wrote; `-` reads standard input.
    pub file: PathBuf,
    /// The consistency level of every write.
    #[arg(long, default_value = "QUORUM", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// At most this many rows per second (0: as fast as the cluster takes them).
    #[arg(long, value_name = "ROWS", default_value_t = 0)]
    pub rate: u64,
    /// Rows per `Batch` request (at most the node's max_batch_mutations).
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub batch_size: usize,
    /// Send each batch to a replica of its first key (the ring learned from
    /// `--host`), rather than have `--host` coordinate it.
    #[arg(long)]
    pub token_aware: bool,
}

/// A progress bar over the file's bytes on stderr, hidden when stderr is
/// not a terminal or the input has no known size.
fn progress_bar(path: &Path) -> ProgressBar {
    let size = std::fs::metadata(path).ok().map(|m| m.len());
    match size {
        Some(size) if std::io::stderr().is_terminal() && path != Path::new("-") => {
            let style = ProgressStyle::with_template(
                "[{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr())
                .with_style(style)
        }
        _ => ProgressBar::hidden(),
    }
}

/// `import`: writes every row; prints the count. Malformed lines and failed
/// rows are reported by line number on stderr and make the exit status 2
/// (the other rows are imported; importing again is harmless).
pub async fn run(connection: &Connection, args: &ImportArgs, out: &mut impl Write) -> Outcome {
    let mut sender = BatchSender::new(
        connection,
        &args.keyspace,
        args.consistency,
        args.batch_size,
        args.rate,
        args.token_aware,
    )
    .await?;
    let bar = progress_bar(&args.file);
    let mut malformed = 0u64;
    let mut reader = open_lines(&args.file)?;
    let mut line = String::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .with_context(|| format!("reading line {}", number + 1))?;
        if read == 0 {
            break;
        }
        number += 1;
        bar.inc(read as u64);
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match jsonl::decode(text) {
            Ok(record) => sender.push(number, record.into_mutation()).await?,
            Err(reason) => {
                malformed += 1;
                bar.suspend(|| eprintln!("line {number}: {reason:#}"));
            }
        }
        if number.is_multiple_of(1000) {
            bar.set_message(format!("{} rows", sender.applied));
        }
    }
    sender.flush().await?;
    bar.finish_and_clear();
    writeln!(out, "{} rows imported", sender.applied).map_err(anyhow::Error::from)?;
    finish(malformed, sender.failed)
}
