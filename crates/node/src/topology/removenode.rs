//! Removenode: restoring a dead node's replicas from the survivors, then
//! removing it from the ring for good.

use std::sync::Arc;

use ringstore_membership::Liveness;
use ringstore_placement::HostId;

use crate::error::{Result, TopologyError};
use crate::topology::host::TopologyHost;
use crate::topology::movement::{ensure_enough_replicas, ensure_no_movement};
use crate::topology::persisted::save_takeovers;
use crate::topology::proposals::finish_survivors_proposals;
use crate::topology::transfers::{fetch_everywhere, transfers};
use crate::topology::waits::announced_movement;
use ringstore_streaming::{FetchTotals, StreamOperation};

/// Removes dead node `dead`: announces the removal (its ranges get pending
/// replicas), waits `ring_delay`, has every new owner fetch its share from the
/// surviving replicas and every survivor finish its compare-and-sets of
/// those ranges (`proposals.rs`), then gossips `dead` as removed. Any live
/// node may run it.
pub async fn removenode<H: TopologyHost>(context: &Arc<H>, dead: HostId) -> Result<FetchTotals> {
    let _operation = context
        .operation()
        .try_lock()
        .map_err(|_| TopologyError::OperationRunning)?;
    let view = context.view();
    if dead == context.host_id() {
        return Err(TopologyError::CannotRemoveSelf.into());
    }
    let member = view.member(dead).ok_or(TopologyError::UnknownNode(dead))?;
    if member.liveness == Liveness::Up {
        return Err(TopologyError::LiveNodeCannotBeRemoved(dead).into());
    }
    if view.removed.contains(&dead) || !view.ring.contains_host(dead) {
        return Err(TopologyError::AlreadyRemoved(dead).into());
    }
    ensure_no_movement(&**context)?;
    let after = view.ring.without_host(view.ring.epoch() + 1, dead);
    ensure_enough_replicas(&**context, &after)?;

    tracing::info!(%dead, "removing a dead node: announcing the removal");
    context
        .membership()
        .update_local(move |m| m.takeovers.removing = Some(dead))
        .await?;
    let outcome = restore(context, dead).await;
    let mut takeovers = view
        .member(context.host_id())
        .map(|m| m.metadata.takeovers.clone())
        .unwrap_or_default();
    takeovers.removing = None;
    if outcome.is_ok() {
        takeovers.removed.push(dead);
        save_takeovers(context.store(), &takeovers).await?;
    }
    context
        .membership()
        .update_local(move |m| m.takeovers = takeovers)
        .await?;
    outcome
}

async fn restore<H: TopologyHost>(context: &Arc<H>, dead: HostId) -> Result<FetchTotals> {
    let (view, pending) = announced_movement(&**context, "removing").await?;
    let operation = StreamOperation::RemoveNode { removed: dead };
    let totals = fetch_everywhere(
        context,
        operation,
        transfers(&**context, &view.ring, &pending, &[dead]),
    )
    .await?;
    tracing::info!(%dead, ranges = totals.ranges, bytes = totals.bytes, "restored the dead node's replicas");
    // Each range came from one survivor: have every survivor finish what the
    // dead node helped choose, then sync it among all its new replicas.
    finish_survivors_proposals(context, &view.ring, &pending, dead).await?;
    context
        .sync_gained_ranges(&view.ring, &pending, None)
        .await?;
    Ok(totals)
}
