//! Cleanup: deleting the local data of ranges this node no longer
//! replicates (after other nodes joined and took them over).
//!
//! # Safety
//! Cleanup deletes without tombstones, so it must never delete what this
//! node is about to own again. As Cassandra, it is refused while any range
//! movement is under way or the ring has pending ranges; and since a
//! movement may start while it runs, it checks again before every batch it
//! purges and stops (`FAILED_PRECONDITION`, with what it removed so far) if
//! the ring or the pending ring changed since it decided what to keep.
//!
//! The scan runs on the blocking pool (sled may block on I/O), handing
//! batches of doomed keys to the async side, which purges them.
//!
//! A stored cell that does not read back (the store counted and logged it)
//! is removed like any other when its key is outside the kept ranges: the
//! purge removes keys without reading their cells. Inside them it is kept,
//! for a write or a repair to replace; a damaged data key, whose token is
//! unknown, is kept too.

use std::sync::Arc;

use ringstore_membership::ClusterView;
use ringstore_placement::{ReplicaMap, Token, TokenRange};
use ringstore_storage::offload::{self, Feed};

use crate::error::{NodeError, Result, TopologyError};
use crate::schema::KeyspaceDef;
use crate::topology::host::TopologyHost;
use crate::topology::movements_under_way;
use ringstore_streaming::entry_bytes;

/// Keys deleted per storage batch.
const BATCH_KEYS: usize = 1_000;

/// What cleanup did to one keyspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// The keyspace.
    pub keyspace: String,
    /// Cells deleted.
    pub keys_removed: u64,
    /// Their size ([`entry_bytes`]).
    pub bytes_removed: u64,
    /// Cells kept.
    pub keys_kept: u64,
}

/// Keys the scan found outside this node's ranges, with their size.
#[derive(Default)]
struct Doomed {
    keys: Vec<Vec<u8>>,
    bytes: u64,
}

/// Cleans `keyspace` (every keyspace when `None`): deletes each local cell
/// whose token this node replicates neither in the ring nor in the pending
/// ring. Refused while a range movement is under way.
pub async fn cleanup<H: TopologyHost>(
    context: &Arc<H>,
    keyspace: Option<&str>,
) -> Result<Vec<Cleaned>> {
    let _operation = context
        .operation()
        .try_lock()
        .map_err(|_| TopologyError::OperationRunning)?;
    let keyspaces = match keyspace {
        Some(name) => vec![context.keyspace(name)?],
        None => context.keyspaces(),
    };
    let mut cleaned = Vec::new();
    for keyspace in keyspaces {
        cleaned.push(clean_keyspace(context, &keyspace).await?);
    }
    Ok(cleaned)
}

/// Refuses cleanup unless the ring is settled: not empty, no movement
/// under way, no pending ranges.
fn ensure_settled(view: &ClusterView) -> Result<()> {
    if view.ring.is_empty() {
        return Err(TopologyError::CleanupBeforeJoin.into());
    }
    if let Some(movements) = movements_under_way(view) {
        return Err(TopologyError::CleanupDuringMovement(movements).into());
    }
    if view.pending_ring.is_some() {
        return Err(TopologyError::CleanupWithPendingRanges.into());
    }
    Ok(())
}

/// Refuses to purge another batch if the ring or the pending ring changed
/// since `decided` (the view cleanup decided what to keep from).
fn ensure_unchanged(decided: &ClusterView, now: &ClusterView, so_far: &Cleaned) -> Result<()> {
    let same_ring = now.ring.checksum() == decided.ring.checksum();
    if same_ring && ensure_settled(now).is_ok() {
        return Ok(());
    }
    Err(TopologyError::RingChangedDuringCleanup {
        keyspace: so_far.keyspace.clone(),
        keys_removed: so_far.keys_removed,
    }
    .into())
}

/// Cleans one keyspace. The caller holds the node's topology operation lock
/// (`cleanup`, or the alter that is finishing).
pub(crate) async fn clean_keyspace<H: TopologyHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
) -> Result<Cleaned> {
    let view = context.view();
    ensure_settled(&view)?;
    if let Some(pending) = &keyspace.pending_strategy {
        return Err(TopologyError::CleanupDuringAlter {
            keyspace: keyspace.name.clone(),
            pending: pending.clone(),
        }
        .into());
    }
    let map = ReplicaMap::new(view.ring.clone(), &keyspace.strategy);
    let mut outcome = Cleaned {
        keyspace: keyspace.name.clone(),
        ..Cleaned::default()
    };
    let (batches, mut doomed) = offload::channel(2);
    let (store, id, me) = (context.store().clone(), keyspace.id, context.host_id());
    let scan = offload::spawn_blocking(move || {
        scan_for_doomed(
            &store,
            id,
            |token| map.replicas(token).contains(me),
            batches,
        )
    });
    while let Some(batch) = doomed.recv().await {
        let batch: Doomed = batch?;
        ensure_unchanged(&view, &context.view(), &outcome)?;
        outcome.keys_removed += context.store().purge(keyspace.id, &batch.keys).await? as u64;
        outcome.bytes_removed += batch.bytes;
    }
    outcome.keys_kept = scan.await.map_err(NodeError::task("the cleanup scan"))?;
    tracing::info!(
        keyspace = %keyspace.name,
        removed = outcome.keys_removed,
        kept = outcome.keys_kept,
        "cleanup done"
    );
    Ok(outcome)
}

/// Scans keyspace `id` (on a blocking thread) and sends the keys whose
/// tokens `keeps` rejects to `batches`, [`BATCH_KEYS`] at a time. Stops
/// early when the receiver is gone. How many keys it kept.
fn scan_for_doomed(
    store: &ringstore_storage::Store,
    id: ringstore_storage::KeyspaceId,
    keeps: impl Fn(Token) -> bool,
    batches: Feed<Result<Doomed>>,
) -> u64 {
    let mut kept = 0;
    let mut batch = Doomed::default();
    let whole_ring = TokenRange::new(Token::MIN, Token::MIN);
    let entries = match store.scan(id, whole_ring) {
        Ok(entries) => entries,
        Err(error) => {
            let _ = batches.send(Err(error.into()));
            return kept;
        }
    };
    for entry in entries {
        let (token, key, bytes) = match entry {
            Ok((token, key, cell)) => {
                let bytes = entry_bytes(&key, &cell);
                (token, key, bytes)
            }
            Err(ringstore_storage::StorageError::CorruptCell { key: Some(key), .. }) => {
                match ringstore_placement::Murmur3Partitioner::token(&key) {
                    Ok(token) => {
                        let bytes = key.len() as u64;
                        (token, key, bytes)
                    }
                    Err(_) => continue,
                }
            }
            Err(error) if error.is_damaged_entry() => continue,
            Err(error) => {
                let _ = batches.send(Err(error.into()));
                return kept;
            }
        };
        if keeps(token) {
            kept += 1;
            continue;
        }
        batch.bytes += bytes;
        batch.keys.push(key);
        let full = batch.keys.len() == BATCH_KEYS;
        if full && batches.send(Ok(std::mem::take(&mut batch))).is_err() {
            return kept;
        }
    }
    if !batch.keys.is_empty() {
        let _ = batches.send(Ok(batch));
    }
    kept
}
