//! The `Scan` RPC of the `Client` service: checks the request (keyspace,
//! range, page size, resume token), reads one page through
//! [`crate::scan`], and answers its live rows with a resume token.
//!
//! It takes the node as the coordinator's host ([`CoordinatorHost`]: the
//! page is read through the coordinator) and the schema's ([`SchemaHost`]:
//! the keyspace is looked up, pulling a lagging schema).

use std::sync::Arc;

use ringstore_placement::Token;
use ringstore_proto::v1 as pb;
use ringstore_replication::{ConsistencyLevel, ScanPoint};

use crate::coordinator::host::CoordinatorHost;
use crate::error::{RequestError, Result, ScanError};
use crate::scan::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, resume, scan_page};
use crate::schema::SchemaHost;
use crate::schema::sync::keyspace_catching_up;

/// The scan's range `(start, end]` from the request: the whole ring
/// (`(Token::MIN, Token::MAX]`, every key's token) by default.
fn range_of(r: &pb::ScanRequest) -> Result<(Token, Token)> {
    let start = Token(r.start_token.unwrap_or(i64::MIN));
    let end = Token(r.end_token.unwrap_or(i64::MAX));
    if start >= end {
        return Err(ScanError::EmptyRange { start, end }.into());
    }
    Ok((start, end))
}

fn page_size_of(r: &pb::ScanRequest) -> Result<usize> {
    match r.page_size {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(0) => Err(ScanError::ZeroPageSize.into()),
        Some(n) if n as usize > MAX_PAGE_SIZE => Err(ScanError::PageTooLarge {
            size: n,
            max: MAX_PAGE_SIZE,
        }
        .into()),
        Some(n) => Ok(n as usize),
    }
}

/// Serves one `Scan` page.
pub(crate) async fn run<H: CoordinatorHost + SchemaHost>(
    host: &Arc<H>,
    r: pb::ScanRequest,
    level: ConsistencyLevel,
) -> Result<pb::ScanResponse> {
    if r.keyspace.is_empty() {
        return Err(RequestError::EmptyKeyspaceName.into());
    }
    let keyspace = keyspace_catching_up(host.as_ref(), &r.keyspace).await?;
    level.check_valid_for_reads()?;
    let (start, end) = range_of(&r)?;
    let page_size = page_size_of(&r)?;
    let from = if r.resume_token.is_empty() {
        ScanPoint::AfterToken(start)
    } else {
        resume::decode(&r.resume_token, start, end)?
    };
    let page = scan_page(host, &keyspace, from, end, page_size, level).await?;
    let rows = page
        .rows
        .into_iter()
        .filter_map(|row| {
            Some(pb::ScanRow {
                token: row.token.0,
                timestamp_micros: row.cell.timestamp.0,
                expires_at_micros: row.cell.expires_at.map(|t| t.0),
                value: row.cell.value?,
                key: row.key,
            })
        })
        .collect();
    Ok(pb::ScanResponse {
        rows,
        resume_token: page.resume.as_ref().map(resume::encode).unwrap_or_default(),
    })
}
