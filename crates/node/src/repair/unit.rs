//! Repairing one unit of work, a (keyspace, range), on the current ring:
//! the range is cut where the ring's replica sets change, each piece is
//! repaired among its replicas, and, when every replica took part, each
//! piece is recorded as repaired on all of them.

use ringstore_placement::{HostId, TokenRange};
use ringstore_repair::{RepairOptions, UnitReport, UnitState};
use ringstore_storage::{KeyspaceId, Timestamp};
use uuid::Uuid;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::repair::range::{RangeRepair, end_session};
use crate::topology::movements_under_way;

/// Repairs `range` of `keyspace` with `options`, recording it as repaired
/// as of `began` (unless a dry run or DC-local, which do not reach every
/// replica). What became of it.
pub async fn repair_unit(
    context: &NodeContext,
    keyspace: KeyspaceId,
    range: TokenRange,
    options: RepairOptions,
    began: Timestamp,
) -> UnitState {
    let state = match try_repair_unit(context, keyspace, range, options, began).await {
        Ok(report) => UnitState::Done(report),
        Err(error) => {
            tracing::warn!(%range, %error, "repair of a range failed");
            UnitState::Failed(error.to_string())
        }
    };
    context.repair.stats.count(&state);
    state
}

async fn try_repair_unit(
    context: &NodeContext,
    keyspace: KeyspaceId,
    range: TokenRange,
    options: RepairOptions,
    began: Timestamp,
) -> Result<UnitReport> {
    if let Some(movements) = movements_under_way(&context.view()) {
        return Err(NodeError::FailedPrecondition(format!(
            "range movements are under way ({movements}); repair once they are over"
        )));
    }
    let definition = context
        .keyspaces()
        .into_iter()
        .find(|k| k.id == keyspace)
        .ok_or_else(|| NodeError::KeyspaceNotFound(context.keyspace_name(keyspace)))?;
    let (_, map) = context.placement(&definition);
    let mut pieces: Vec<(TokenRange, Vec<HostId>)> = Vec::new();
    for replicas in map.ranges() {
        for piece in replicas.range().intersection(&range) {
            let hosts = replicas
                .hosts()
                .filter(|h| !options.dc_local || h.location.dc.as_str() == context.config.dc)
                .map(|h| h.id)
                .collect();
            pieces.push((piece, hosts));
        }
    }
    let record = !options.dry_run && !options.dc_local;
    let mut total = UnitReport::default();
    for (piece, hosts) in pieces {
        let report = repair_piece(context, keyspace, piece, &hosts, options, began, record).await?;
        total.mismatched_keys += report.mismatched_keys;
        total.rows_sent += report.rows_sent;
        total.bytes += report.bytes;
    }
    Ok(total)
}

/// Repairs one piece among `hosts` in a session of its own, and ends the
/// session on every replica (recording the piece if `record`).
pub async fn repair_piece(
    context: &NodeContext,
    keyspace: KeyspaceId,
    piece: TokenRange,
    hosts: &[HostId],
    options: RepairOptions,
    began: Timestamp,
    record: bool,
) -> Result<UnitReport> {
    let session = Uuid::new_v4();
    let outcome = match RangeRepair::new(context, session, keyspace, piece, hosts, options) {
        Ok(repair) => repair.run().await,
        Err(error) => Err(error),
    };
    let repaired = match (&outcome, record) {
        (Ok(_), true) => vec![(keyspace, piece)],
        _ => Vec::new(),
    };
    let ended = end_session(context, session, hosts, &repaired, began).await;
    let report = outcome?;
    ended?;
    Ok(report)
}
