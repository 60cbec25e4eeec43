//! The replica side of a scan: one page of this node's cells after a point,
//! read on the blocking pool, bounded in rows and bytes.

use ringstore_placement::Token;
use ringstore_proto::v1 as pb;
use ringstore_replication::{RangeRow, ReplicaPage, RowPosition, ScanPoint};
use ringstore_storage::{KeyspaceId, Store};

use crate::error::{NodeError, Result, ScanError};
use crate::limits::check_key;
use crate::scan::MAX_PAGE_SIZE;

/// A `ReadRange` request checked: `((after, limit), last)`.
pub fn request_from_pb(r: &pb::ReadRangeRequest) -> Result<((ScanPoint, usize), Token)> {
    let limit = r.limit as usize;
    if limit == 0 || limit > MAX_PAGE_SIZE {
        return Err(ScanError::LimitOutOfRange {
            limit,
            max: MAX_PAGE_SIZE,
        }
        .into());
    }
    let (after, last) = (Token(r.after_token), Token(r.last_token));
    if last < after {
        return Err(ScanError::TokensReversed { after, last }.into());
    }
    let point = match &r.after_key {
        Some(key) => {
            check_key(key)?;
            ScanPoint::AfterRow(RowPosition {
                token: after,
                key: key.clone(),
            })
        }
        None => ScanPoint::AfterToken(after),
    };
    Ok(((point, limit), last))
}

/// This replica's rows of `keyspace` strictly after `after` up to token
/// `last`: at most `limit` rows (at least 1) and, past the first row, at most
/// `max_bytes` of keys and values; `complete` when no row follows up to
/// `last`. Tombstones and expired cells included. A stored entry that does
/// not read back (counted and logged by the store) fails the page with
/// `DATA_LOSS`: the coordinator reads the page from another replica, as
/// from one that failed, and never gets a page with a hole in it.
pub async fn read_range(
    store: &Store,
    keyspace: KeyspaceId,
    after: ScanPoint,
    last: Token,
    limit: usize,
    max_bytes: u64,
) -> Result<ReplicaPage> {
    let store = store.clone();
    let limit = limit.max(1);
    ringstore_storage::offload::spawn_blocking(move || {
        let (after_token, after_key) = match &after {
            ScanPoint::AfterToken(token) => (*token, None),
            ScanPoint::AfterRow(row) => (row.token, Some(row.key.as_slice())),
        };
        let mut scan = store.scan_after(keyspace, after_token, after_key, last)?;
        let mut rows = Vec::new();
        let mut bytes = 0u64;
        for entry in scan.by_ref() {
            let (token, key, cell) = entry?;
            let row = RangeRow { token, key, cell };
            bytes += row.bytes() as u64;
            rows.push(row);
            if rows.len() >= limit || bytes >= max_bytes {
                break;
            }
        }
        // A page that stopped at a limit is complete only if nothing follows.
        let complete = match scan.next() {
            None => true,
            Some(Ok(_)) => false,
            Some(Err(error)) => return Err(error.into()),
        };
        Ok(ReplicaPage { rows, complete })
    })
    .await
    .map_err(NodeError::task("reading a scan page"))?
}
