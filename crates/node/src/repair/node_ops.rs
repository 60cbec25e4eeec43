//! Repair-based node operations (ScyllaDB's RBNO) for `removenode` and
//! `replace`.
//!
//! Streaming restores a dead node's ranges from one surviving replica each.
//! If the survivors differed (a hint lost, a write acknowledged by the dead
//! node and one survivor only), the new owner got one survivor's versions
//! and the newest version of some rows stays on fewer replicas than the
//! replication factor. So, once the streams are done, every gained range is
//! repaired among all of its new replicas: the newest version of each row,
//! wherever it survived, reaches every one of them.
//!
//! The topology operations call it with their context, which is a
//! [`RepairHost`]: repair does not import topology back.

use std::sync::Arc;

use ringstore_placement::{HostId, MovementPlan, ReplicaMap, Ring};
use ringstore_repair::{RepairOptions, UnitReport};

use crate::error::Result;
use crate::repair::RepairHost;
use crate::repair::unit::repair_piece;

/// Repairs, among their replicas on `after`, the ranges that some node
/// gains between `before` and `after` (only those `gainer` gains, if
/// given). Nothing is recorded in the repair history: the ring is still
/// changing.
pub async fn sync_gained_ranges(
    host: &impl RepairHost,
    before: &Arc<Ring>,
    after: &Arc<Ring>,
    gainer: Option<HostId>,
) -> Result<UnitReport> {
    let began = host.now();
    let mut total = UnitReport::default();
    for keyspace in host.keyspaces() {
        let old = ReplicaMap::new(before.clone(), &keyspace.strategy);
        let new = ReplicaMap::new(after.clone(), &keyspace.strategy);
        for movement in MovementPlan::between(&old, &new).movements {
            let gained = match gainer {
                Some(host) => movement.gaining.contains(&host),
                None => !movement.gaining.is_empty(),
            };
            if !gained {
                continue;
            }
            let report = repair_piece(
                host,
                keyspace.id,
                movement.range,
                &movement.after,
                RepairOptions::default(),
                began,
                false,
            )
            .await?;
            total.mismatched_keys += report.mismatched_keys;
            total.rows_sent += report.rows_sent;
            total.bytes += report.bytes;
        }
    }
    tracing::info!(
        keys = total.mismatched_keys,
        rows = total.rows_sent,
        "synced the gained ranges among all their new replicas"
    );
    Ok(total)
}
