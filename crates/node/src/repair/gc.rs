//! Garbage collection: purging this node's tombstones and expired cells
//! that the keyspace's [`GcRule`] allows, in a background pass every
//! `repair.gc_interval_seconds` and on `ringstore garbagecollect`.
//!
//! A pass scans a keyspace on the blocking pool and hands the purgeable
//! cells, in batches, to [`Store::purge_unchanged`], which removes a cell
//! only if it is still the one chosen: a write that lands meanwhile is kept.
//!
//! It reads the node through its [`RepairHost`] (store, repair history,
//! keyspaces, settings, clock).

use std::sync::Arc;
use std::time::Duration;

use ringstore_metrics::Stage;
use ringstore_placement::{Token, TokenRange};
use ringstore_repair::{GcRule, RepairHistory};
use ringstore_storage::offload::{self, Feed};
use ringstore_storage::{Cell, KeyspaceId, Store, Timestamp};

use crate::error::{NodeError, Result};
use crate::repair::RepairHost;
use crate::schema::KeyspaceDef;

/// Cells handed to the store per purge.
const PURGE_BATCH: usize = 1000;

/// What a pass did in one keyspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// The keyspace's name.
    pub keyspace: String,
    /// Cells looked at.
    pub scanned: u64,
    /// Cells purged.
    pub purged: u64,
    /// Tombstones and expired cells kept (not purgeable yet).
    pub deleted_kept: u64,
}

/// What the scan hands to the purging side.
enum Scanned {
    /// Purgeable cells.
    Batch(Vec<(Vec<u8>, Cell)>),
    /// The scan is over: cells scanned, deleted cells kept.
    Done { scanned: u64, kept: u64 },
}

/// The rule of `keyspace` on this node.
pub fn rule_of(host: &dyn RepairHost, keyspace: &KeyspaceDef) -> GcRule {
    let config = host.repair_config();
    GcRule {
        mode: config.tombstone_gc,
        gc_grace: Duration::from_secs(keyspace.gc_grace_seconds.into()),
        propagation_delay: Duration::from_secs(config.propagation_delay_seconds),
    }
}

/// Purges what may be purged in `keyspaces`, now.
pub async fn collect(host: &impl RepairHost, keyspaces: &[KeyspaceDef]) -> Result<Vec<Collected>> {
    collect_in(host, keyspaces).await
}

async fn collect_in(host: &dyn RepairHost, keyspaces: &[KeyspaceDef]) -> Result<Vec<Collected>> {
    let mut reports = Vec::with_capacity(keyspaces.len());
    for keyspace in keyspaces {
        reports.push(collect_keyspace(host, keyspace).await?);
    }
    Ok(reports)
}

async fn collect_keyspace(host: &dyn RepairHost, keyspace: &KeyspaceDef) -> Result<Collected> {
    let _stage = host.metrics().stage(Stage::Compaction);
    let rule = rule_of(host, keyspace);
    let history = host.repair().history.snapshot();
    let (batches, mut scanned) = offload::channel(2);
    let store = host.store().clone();
    let id = keyspace.id;
    let now = host.now();
    let scan =
        offload::spawn_blocking(move || scan_purgeable(&store, id, &rule, &history, now, &batches));
    let mut report = Collected {
        keyspace: keyspace.name.clone(),
        ..Collected::default()
    };
    while let Some(message) = scanned.recv().await {
        match message {
            Scanned::Batch(cells) => {
                let purged = host.store().purge_unchanged(id, cells).await? as u64;
                report.purged += purged;
                host.repair()
                    .stats
                    .purged
                    .fetch_add(purged, std::sync::atomic::Ordering::Relaxed);
            }
            Scanned::Done { scanned, kept } => {
                report.scanned = scanned;
                report.deleted_kept = kept;
            }
        }
    }
    scan.await
        .map_err(NodeError::task("the garbage-collection scan"))??;
    Ok(report)
}

/// Scans `keyspace` and sends its purgeable cells in batches. Blocking.
fn scan_purgeable(
    store: &Store,
    keyspace: KeyspaceId,
    rule: &GcRule,
    history: &RepairHistory,
    now: Timestamp,
    batches: &Feed<Scanned>,
) -> Result<()> {
    let whole_ring = TokenRange::new(Token::MIN, Token::MIN);
    let (mut scanned, mut kept) = (0u64, 0u64);
    let mut batch = Vec::new();
    for entry in store.scan(keyspace, whole_ring)? {
        let (token, key, cell) = match entry {
            Ok(row) => row,
            // Nothing to purge in a cell that does not read back (the
            // store counted and logged it): a write or a repair replaces it.
            Err(error) if error.is_damaged_entry() => continue,
            Err(error) => return Err(error.into()),
        };
        scanned += 1;
        if cell.deletion_time().is_none_or(|deleted| deleted > now) {
            continue;
        }
        if !rule.purgeable(&cell, history.repaired_at(keyspace, token), now) {
            kept += 1;
            continue;
        }
        batch.push((key, cell));
        if batch.len() == PURGE_BATCH
            && batches
                .send(Scanned::Batch(std::mem::take(&mut batch)))
                .is_err()
        {
            return Ok(());
        }
    }
    if !batch.is_empty() {
        let _ = batches.send(Scanned::Batch(batch));
    }
    let _ = batches.send(Scanned::Done { scanned, kept });
    Ok(())
}

/// Runs a pass over every keyspace every `repair.gc_interval_seconds`
/// (never when it is 0), until the node stops.
pub async fn run(host: Arc<dyn RepairHost>) {
    let every = host.repair_config().gc_interval_seconds;
    if every == 0 {
        return;
    }
    let mut ticker = tokio::time::interval(Duration::from_secs(every));
    ticker.tick().await;
    loop {
        ticker.tick().await;
        match collect_in(&*host, &host.keyspaces()).await {
            Ok(reports) => {
                let purged: u64 = reports.iter().map(|r| r.purged).sum();
                if purged > 0 {
                    tracing::info!(
                        purged,
                        "garbage collection purged tombstones and expired cells"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "garbage collection failed"),
        }
    }
}
