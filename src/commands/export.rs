//! `ringstore export`: every live row of a keyspace (or of a token range),
//! through the client library's scans, as JSON lines on standard output (see
//! [`jsonl`](crate::commands::jsonl) for the format).

use std::io::Write;

use anyhow::Context;
use clap::Args;
use futures::StreamExt;
use ringstore_replication::ConsistencyLevel;

use crate::cli::{parse_level, whole};
use crate::client::Connection;
use crate::commands::jsonl::{self, Encoding};
use crate::commands::scan;
use crate::failure::Outcome;

/// Arguments of `ringstore export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The consistency level of every page.
    #[arg(long, default_value = "QUORUM", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// Write keys and values as hex (`key_hex`, `value_hex`) instead of base64.
    #[arg(long)]
    pub hex: bool,
    /// Rows asked for per page (1 to 10,000).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub page_size: u32,
    /// Only the range's rows: its exclusive start token.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub start_token: Option<i64>,
    /// Only the range's rows: its inclusive end token.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub end_token: Option<i64>,
    /// Read each range from one of its replicas, a few ranges at once (the
    /// ring learned from `--host`), rather than have `--host` coordinate.
    #[arg(long)]
    pub token_aware: bool,
}

/// `export`: one JSON object per row on `out`.
pub async fn run(connection: &Connection, args: &ExportArgs, out: &mut impl Write) -> Outcome {
    let encoding = if args.hex {
        Encoding::Hex
    } else {
        Encoding::Base64
    };
    let mut out = std::io::BufWriter::new(out);
    let mut rows = scan::rows(
        connection,
        &args.keyspace,
        (args.start_token, args.end_token),
        args.page_size,
        args.consistency,
        args.token_aware,
    )
    .await?;
    while let Some(row) = rows.next().await {
        writeln!(out, "{}", jsonl::encode(&row?, encoding))
            .context("writing to standard output")?;
    }
    out.flush().context("writing to standard output")?;
    Ok(())
}
