//! `ringstore scan`: a keyspace's rows in token order, through the client
//! library's scans; and [`rows`], which `export` shares.

use std::io::Write;

use anyhow::Context;
use clap::Args;
use futures::StreamExt;
use futures::stream::BoxStream;
use ringstore_client::{ScanSpec, Token};
use ringstore_proto::v1 as pb;
use ringstore_replication::ConsistencyLevel;

use crate::cli::{parse_level, whole};
use crate::client::Connection;
use crate::commands::data::cluster;
use crate::failure::{Failure, Outcome};

/// Arguments of `ringstore scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The range's exclusive start token (default: the smallest token).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub start_token: Option<i64>,
    /// The range's inclusive end token (default: the largest token).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub end_token: Option<i64>,
    /// Stop after this many rows.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// The consistency level of every page.
    #[arg(long, default_value = "ONE", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// Print keys and values as hex (otherwise their bytes as they are).
    #[arg(long)]
    pub hex: bool,
    /// Rows asked for per page (1 to 10,000).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub page_size: u32,
    /// Read each range from one of its replicas, a few ranges at once (the
    /// ring learned from `--host`), rather than have `--host` coordinate.
    #[arg(long)]
    pub token_aware: bool,
}

/// The rows of `keyspace` in (token, key) order, `page_size` a page at
/// `consistency`: of `(start, end]` (either defaulting to the ring's end)
/// in one paged range when a token is given, else the whole ring in
/// pieces. With `token_aware` each piece is read from a replica of it, a
/// few at once; otherwise `--host` coordinates, the ring in one piece.
pub async fn rows(
    connection: &Connection,
    keyspace: &str,
    (start, end): (Option<i64>, Option<i64>),
    page_size: u32,
    consistency: ConsistencyLevel,
    token_aware: bool,
) -> Result<BoxStream<'static, ringstore_client::Result<pb::ScanRow>>, Failure> {
    let client = cluster(connection, token_aware).await?;
    let spec = ScanSpec {
        keyspace: keyspace.to_string(),
        consistency: ringstore_client::level_to_pb(consistency),
        page_size: Some(page_size),
    };
    if start.is_none() && end.is_none() {
        return Ok(client.scan(spec).boxed());
    }
    let range = (
        Token(start.unwrap_or(Token::MIN.0)),
        Token(end.unwrap_or(Token::MAX.0)),
    );
    Ok(client.scan_range(spec, range).boxed())
}

/// `scan`: one `KEY VALUE` line per row.
pub async fn run(connection: &Connection, args: &ScanArgs, out: &mut impl Write) -> Outcome {
    let rows = rows(
        connection,
        &args.keyspace,
        (args.start_token, args.end_token),
        args.page_size,
        args.consistency,
        args.token_aware,
    )
    .await?;
    let limit = args
        .limit
        .map_or(usize::MAX, |n| n.try_into().unwrap_or(usize::MAX));
    let mut rows = rows.take(limit);
    while let Some(row) = rows.next().await {
        write_row(out, &row?, args.hex).context("writing to standard output")?;
    }
    out.flush().context("writing to standard output")?;
    Ok(())
}

fn write_row(out: &mut impl Write, row: &pb::ScanRow, hex: bool) -> std::io::Result<()> {
    if hex {
        writeln!(out, "{} {}", hex::encode(&row.key), hex::encode(&row.value))
    } else {
        out.write_all(&row.key)?;
        out.write_all(b" ")?;
        out.write_all(&row.value)?;
        out.write_all(b"\n")
    }
}
