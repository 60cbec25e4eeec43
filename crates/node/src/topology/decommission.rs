//! Decommission: this node streams its ranges to the nodes taking them over,
//! hands its hints to another node, and leaves the ring.

use std::sync::Arc;

use ringstore_membership::NodeState;

use crate::error::{Result, TopologyError};
use crate::topology::host::TopologyHost;
use crate::topology::movement::{ensure_enough_replicas, ensure_no_movement};
use crate::topology::persisted::mark_decommissioned;
use crate::topology::transfers::{fetch_everywhere, transfers};
use crate::topology::waits::{announced_movement, wait_ring_delay, wait_until_announced};
use ringstore_streaming::{FetchTotals, StreamOperation};

/// What a decommission moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decommissioned {
    /// Ranges and bytes the new owners fetched.
    pub streamed: FetchTotals,
    /// Hints handed to another node.
    pub hints_handed_off: u64,
}

/// Decommissions this node: `Leaving`, then — after `ring_delay` — every node
/// gaining a range fetches it from here, the hints go to another node, and
/// the node announces `Left` and asks to be stopped. On failure before
/// `Left`, the node goes back to `Normal` and keeps its ranges.
pub async fn decommission<H: TopologyHost>(context: &Arc<H>) -> Result<Decommissioned> {
    let _operation = context
        .operation()
        .try_lock()
        .map_err(|_| TopologyError::OperationRunning)?;
    let view = context.view();
    let state = view.member(context.host_id()).map(|m| m.metadata.state);
    if state != Some(NodeState::Normal) {
        return Err(TopologyError::NotNormal { state }.into());
    }
    ensure_no_movement(&**context)?;
    let after = view
        .ring
        .without_host(view.ring.epoch() + 1, context.host_id());
    ensure_enough_replicas(&**context, &after)?;

    tracing::info!("decommissioning: announcing LEAVING");
    context
        .membership()
        .update_local(|m| m.state = NodeState::Leaving)
        .await?;
    match leave(context).await {
        Ok(done) => Ok(done),
        Err(error) => {
            tracing::error!(%error, "decommission failed; back to NORMAL");
            context
                .membership()
                .update_local(|m| m.state = NodeState::Normal)
                .await?;
            Err(error)
        }
    }
}

async fn leave<H: TopologyHost>(context: &Arc<H>) -> Result<Decommissioned> {
    let (view, pending) = announced_movement(&**context, "leaving").await?;
    let operation = StreamOperation::Decommission {
        leaving: context.host_id(),
    };
    let streamed = fetch_everywhere(
        context,
        operation,
        transfers(&**context, &view.ring, &pending, &[]),
    )
    .await?;

    let recipient = view
        .up_members()
        .filter(|m| {
            m.metadata.host_id != context.host_id() && m.metadata.state == NodeState::Normal
        })
        .map(|m| m.metadata.internode_addr)
        .next();
    let hints_handed_off = match recipient {
        Some(address) => context.hand_off_hints(address).await?,
        None => 0,
    };
    tracing::info!(
        ranges = streamed.ranges,
        bytes = streamed.bytes,
        hints_handed_off,
        "decommission streamed everything; announcing LEFT"
    );
    mark_decommissioned(context.store()).await?;
    context
        .membership()
        .update_local(|m| m.state = NodeState::Left)
        .await?;
    // Let gossip carry LEFT to every live node (checked, as for the
    // announcement of the movement), then keep taking writes for one more
    // `ring_delay`: the coordinators' settling windows, which open when they
    // learn of LEFT, send writes here too until then (see `settling_ring`;
    // the simulation, seed 1815, saw LEFT take longer than `ring_delay` to
    // reach a node whose disk was full).
    wait_ring_delay(&**context).await;
    wait_until_announced(&**context).await;
    wait_ring_delay(&**context).await;
    context.request_stop();
    Ok(Decommissioned {
        streamed,
        hints_handed_off,
    })
}
