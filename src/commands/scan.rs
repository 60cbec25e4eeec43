//! `ringstore scan`: a keyspace's rows in token order, following the pages
//! itself; and [`Pager`], which `export` shares.

use std::io::Write;

use anyhow::Context;
use clap::Args;
use ringstore_proto::v1 as pb;
use ringstore_replication::ConsistencyLevel;

use crate::cli::parse_level;
use crate::client::Connection;
use crate::commands::data::level;
use crate::failure::Outcome;

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
    #[arg(long, default_value = "ONE", value_parser = parse_level)]
    pub consistency: ConsistencyLevel,
    /// Print keys and values as hex (otherwise their bytes as they are).
    #[arg(long)]
    pub hex: bool,
    /// Rows asked for per page (1 to 10,000).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub page_size: u32,
}

/// Follows a scan's pages: each call to [`Pager::next_page`] asks for the
/// page after the last one, until the node says the range is done.
pub struct Pager {
    client: ringstore_proto::v1::client_client::ClientClient<crate::client::Transport>,
    request: pb::ScanRequest,
    done: bool,
}

impl Pager {
    /// A scan of `keyspace` over `(start, end]` (the whole ring by default).
    pub fn new(
        connection: &Connection,
        keyspace: &str,
        range: (Option<i64>, Option<i64>),
        page_size: u32,
        consistency: ConsistencyLevel,
    ) -> Pager {
        Pager {
            client: connection.client(),
            request: pb::ScanRequest {
                keyspace: keyspace.to_string(),
                start_token: range.0,
                end_token: range.1,
                page_size: Some(page_size),
                consistency: level(consistency),
                resume_token: Vec::new(),
            },
            done: false,
        }
    }

    /// The next page's rows (possibly none before the end: a page of
    /// tombstones); `None` once the scan is over.
    pub async fn next_page(&mut self) -> Result<Option<Vec<pb::ScanRow>>, tonic::Status> {
        if self.done {
            return Ok(None);
        }
        let response = self.client.scan(self.request.clone()).await?.into_inner();
        self.done = response.resume_token.is_empty();
        self.request.resume_token = response.resume_token;
        Ok(Some(response.rows))
    }
}

/// `scan`: one `KEY VALUE` line per row.
pub async fn run(connection: &Connection, args: &ScanArgs, out: &mut impl Write) -> Outcome {
    let mut pager = Pager::new(
        connection,
        &args.keyspace,
        (args.start_token, args.end_token),
        args.page_size,
        args.consistency,
    );
    let mut printed = 0u64;
    let limit = args.limit.unwrap_or(u64::MAX);
    while printed < limit {
        let Some(rows) = pager.next_page().await? else {
            break;
        };
        for row in rows.iter().take((limit - printed) as usize) {
            write_row(out, row, args.hex).context("writing to standard output")?;
            printed += 1;
        }
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
