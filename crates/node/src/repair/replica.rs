//! The replica side of a repair: building a range's tree (at the validation
//! rate), answering node hashes, listing row versions, reading cells, and
//! ending a session. A stored cell that does not read back is treated as
//! absent on every one of these paths (`readable`), so a repair heals it.
//! What it uses of the node (the store, the repair state, the metrics)
//! comes through its [`RepairHost`].

use std::sync::Arc;

use ringstore_metrics::Stage;
use ringstore_placement::{Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_repair::{MerkleTree, TreeBuilder, row_hash};
use ringstore_storage::offload::{self, Feed};
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use ringstore_streaming::StreamThrottle;
use tokio::sync::mpsc;
use tonic::Status;
use uuid::Uuid;

use crate::convert::row_version_to_pb;
use crate::error::{NodeError, RangeRepairError, Result};
use crate::repair::RepairHost;

/// Bytes read between two calls to the validation throttle.
const THROTTLE_STEP: u64 = 64 * 1024;
/// The most bytes of keys and values one `ReadCells` answer carries (the
/// internode message limit is 64 MiB).
pub const MAX_READ_BYTES: usize = 48 << 20;
/// Rows per `ListRows` page.
const ROWS_PER_PAGE: usize = 1000;

/// Builds this replica's tree of `range` of `keyspace` at `depth`, keeps it
/// for `session`, and returns it.
pub async fn build_tree(
    host: &impl RepairHost,
    session: Uuid,
    keyspace: KeyspaceId,
    range: TokenRange,
    depth: u8,
) -> Result<Arc<MerkleTree>> {
    let _stage = host.metrics().stage(Stage::Compaction);
    let store = host.store().clone();
    let throttle = Arc::clone(&host.repair().validation);
    let runtime = tokio::runtime::Handle::current();
    let tree = offload::spawn_blocking(move || {
        scan_tree(&store, &throttle, &runtime, keyspace, range, depth)
    })
    .await
    .map_err(NodeError::task("building a repair tree"))??;
    let tree = Arc::new(tree);
    host.repair()
        .trees
        .insert(session, keyspace, Arc::clone(&tree));
    Ok(tree)
}

/// Scans the range into a tree, pacing the reads. Blocking.
fn scan_tree(
    store: &Store,
    throttle: &StreamThrottle,
    runtime: &tokio::runtime::Handle,
    keyspace: KeyspaceId,
    range: TokenRange,
    depth: u8,
) -> Result<MerkleTree> {
    let mut builder = TreeBuilder::new(range, depth);
    let mut unpaced = 0u64;
    for entry in store.scan(keyspace, range)? {
        let Some((token, key, cell)) = readable(entry)? else {
            continue;
        };
        let bytes = (key.len() + cell.value.as_ref().map_or(0, Vec::len)) as u64;
        builder.add(token, row_hash(&key, &cell), bytes);
        unpaced += bytes;
        if unpaced >= THROTTLE_STEP {
            pace(throttle, runtime, unpaced);
            unpaced = 0;
        }
    }
    Ok(builder.finish())
}

/// A scanned row as a repair sees it: a damaged one (a cell that does not
/// read back; the store counted and logged it) as absent, so the repair
/// finds this replica missing the row and writes the other replicas' newest
/// version here, which replaces the damaged copy (`Store::apply`). Never
/// hashed, listed or sent. Other errors end the scan, and the repair of the
/// range fails.
fn readable(
    entry: ringstore_storage::Result<(Token, Vec<u8>, ringstore_storage::Cell)>,
) -> Result<Option<(Token, Vec<u8>, ringstore_storage::Cell)>> {
    match entry {
        Ok(row) => Ok(Some(row)),
        Err(error) if error.is_damaged_entry() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Waits until the validation throttle lets `bytes` more be read. Not on a
/// simulation's thread, where the scan runs inline on the runtime's own
/// thread and cannot wait for it: simulations do not pace validation.
fn pace(throttle: &StreamThrottle, runtime: &tokio::runtime::Handle, bytes: u64) {
    if !offload::runs_inline() {
        runtime.block_on(throttle.acquire(bytes));
    }
}

/// The hashes of `nodes` of the tree kept for `session`.
pub fn tree_nodes(
    host: &impl RepairHost,
    session: Uuid,
    keyspace: KeyspaceId,
    range: TokenRange,
    nodes: &[u32],
) -> Result<Vec<u64>> {
    let tree = host
        .repair()
        .trees
        .get(session, keyspace, range)
        .ok_or(RangeRepairError::NoTree { range, session })?;
    nodes
        .iter()
        .map(|&node| {
            tree.node(node as usize).ok_or_else(|| {
                RangeRepairError::NoTreeNode {
                    depth: tree.depth(),
                    node,
                }
                .into()
            })
        })
        .collect()
}

/// Lists this replica's row versions in `ranges`, in token order, in pages
/// that a task fills (stopping when the receiver goes away).
pub fn list_rows(
    host: &impl RepairHost,
    keyspace: KeyspaceId,
    ranges: Vec<TokenRange>,
) -> mpsc::Receiver<Result<pb::ListRowsPage, Status>> {
    let (pages, receiver) = offload::channel(2);
    let store = host.store().clone();
    offload::spawn_blocking(move || {
        if let Err(error) = scan_rows(&store, keyspace, &ranges, &pages) {
            let _ = pages.send(Err(Status::from(error)));
        }
    });
    receiver
}

/// Scans `ranges` and sends their rows in pages. Blocking.
fn scan_rows(
    store: &Store,
    keyspace: KeyspaceId,
    ranges: &[TokenRange],
    pages: &Feed<Result<pb::ListRowsPage, Status>>,
) -> Result<()> {
    let mut page = Vec::with_capacity(ROWS_PER_PAGE);
    for &range in ranges {
        for entry in store.scan(keyspace, range)? {
            let Some((token, key, cell)) = readable(entry)? else {
                continue;
            };
            page.push(row_version_to_pb(token, key, &cell));
            if page.len() == ROWS_PER_PAGE {
                let rows = std::mem::replace(&mut page, Vec::with_capacity(ROWS_PER_PAGE));
                if pages.send(Ok(pb::ListRowsPage { rows })).is_err() {
                    return Ok(());
                }
            }
        }
    }
    if !page.is_empty() {
        let _ = pages.send(Ok(pb::ListRowsPage { rows: page }));
    }
    Ok(())
}

/// This replica's cells of `keys` (absent ones as `None`), in order. An
/// answer would outgrow [`MAX_READ_BYTES`] is refused: the caller asks for
/// fewer keys at a time (a repair coordinator asks for about 1 MiB).
pub async fn read_cells(
    host: &impl RepairHost,
    keyspace: KeyspaceId,
    keys: Vec<Vec<u8>>,
) -> Result<Vec<(Vec<u8>, Option<ringstore_storage::Cell>)>> {
    let store = host.store().clone();
    offload::spawn_blocking(move || {
        let mut bytes = 0usize;
        let mut cells = Vec::with_capacity(keys.len());
        for key in keys {
            // A damaged cell is absent here too (see `readable`).
            let cell = match store.read(keyspace, &key) {
                Err(error) if error.is_damaged_entry() => {
                    tracing::error!(
                        %keyspace,
                        key = %ringstore_storage::printable_key(&key),
                        %error,
                        "a repair met a stored cell that does not read back; it is repaired as missing"
                    );
                    None
                }
                read => read?,
            };
            bytes += key.len()
                + cell
                    .as_ref()
                    .and_then(|c| c.value.as_ref())
                    .map_or(0, Vec::len);
            if bytes > MAX_READ_BYTES {
                return Err(RangeRepairError::ReadTooLarge {
                    max: MAX_READ_BYTES,
                }
                .into());
            }
            cells.push((key, cell));
        }
        Ok(cells)
    })
    .await
    .map_err(NodeError::task("reading cells for a repair"))?
}

/// Ends `session` here: drops its trees and records `repaired` as repaired
/// as of `began`.
pub async fn end_session(
    host: &impl RepairHost,
    session: Uuid,
    repaired: &[(KeyspaceId, TokenRange)],
    began: Timestamp,
) -> Result<()> {
    host.repair().trees.end_session(session);
    if !repaired.is_empty() {
        host.repair().history.record(repaired, began).await?;
    }
    Ok(())
}
