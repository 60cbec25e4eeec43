//! Decommission: this node streams its ranges to the nodes taking them over,
//! hands its hints to another node, and leaves the ring.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::NodeState;
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::streaming::checkpoint::Checkpoints;
use crate::streaming::fetch::{FetchTotals, RangeFetch, fetch_ranges, range_to_pb};
use crate::topology::saved::mark_decommissioned;
use crate::topology::{ensure_enough_replicas, ensure_no_movement, transfers, wait_ring_delay};

/// What a decommission moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decommissioned {
    /// Ranges and bytes the new owners fetched.
    pub streamed: FetchTotals,
    /// Hints handed to another node.
    pub hints_handed_off: u64,
}

/// Attempts per receiver at having it fetch its ranges (it resumes each time).
const FETCH_ATTEMPTS: u32 = 5;

/// Decommissions this node: `Leaving`, then — after `ring_delay` — every node
/// gaining a range fetches it from here, the hints go to another node, and
/// the node announces `Left` and asks to be stopped. On failure before
/// `Left`, the node goes back to `Normal` and keeps its ranges.
pub async fn decommission(context: &Arc<NodeContext>) -> Result<Decommissioned> {
    let _operation = context.operation.try_lock().map_err(|_| {
        NodeError::FailedPrecondition("another topology operation is running on this node".into())
    })?;
    let view = context.view();
    let state = view.member(context.host_id).map(|m| m.metadata.state);
    if state != Some(NodeState::Normal) {
        return Err(NodeError::FailedPrecondition(format!(
            "only a NORMAL node can be decommissioned; this one is {}",
            state.map_or("unknown".into(), |s| s.to_string().to_uppercase())
        )));
    }
    ensure_no_movement(context)?;
    let after = view
        .ring
        .without_host(view.ring.epoch() + 1, context.host_id);
    ensure_enough_replicas(context, &after)?;

    tracing::info!("decommissioning: announcing LEAVING");
    context
        .membership
        .update_local(|m| m.state = NodeState::Leaving)
        .await?;
    match leave(context).await {
        Ok(done) => Ok(done),
        Err(error) => {
            tracing::error!(%error, "decommission failed; back to NORMAL");
            context
                .membership
                .update_local(|m| m.state = NodeState::Normal)
                .await?;
            Err(error)
        }
    }
}

async fn leave(context: &Arc<NodeContext>) -> Result<Decommissioned> {
    wait_ring_delay(context).await;
    let view = context.view();
    let pending = view
        .pending_ring
        .clone()
        .ok_or_else(|| NodeError::Internal("leaving, but gossip shows no pending ring".into()))?;
    let operation = format!("decommission:{}", context.host_id);
    let streamed = fetch_everywhere(
        context,
        &operation,
        transfers(context, &view.ring, &pending, &[]),
    )
    .await?;

    let recipient = view
        .up_members()
        .filter(|m| m.metadata.host_id != context.host_id && m.metadata.state == NodeState::Normal)
        .map(|m| m.metadata.internode_addr)
        .next();
    let hints_handed_off = match recipient {
        Some(address) => context.handoff.hand_off(context, address).await?,
        None => 0,
    };
    tracing::info!(
        ranges = streamed.ranges,
        bytes = streamed.bytes,
        hints_handed_off,
        "decommission streamed everything; announcing LEFT"
    );
    mark_decommissioned(&context.store).await?;
    context
        .membership
        .update_local(|m| m.state = NodeState::Left)
        .await?;
    // Let gossip carry LEFT before the node goes quiet.
    wait_ring_delay(context).await;
    context.stop_requested.send_replace(true);
    Ok(Decommissioned {
        streamed,
        hints_handed_off,
    })
}

/// Has every receiver of `transfers` fetch its ranges (this node directly,
/// others through `FetchRanges`), all at once; retries a receiver that fails.
pub async fn fetch_everywhere(
    context: &Arc<NodeContext>,
    operation: &str,
    transfers: std::collections::BTreeMap<HostId, Vec<RangeFetch>>,
) -> Result<FetchTotals> {
    let jobs = transfers.into_iter().map(|(receiver, fetches)| {
        let context = context.clone();
        let operation = operation.to_string();
        async move { fetch_on(&context, receiver, &operation, fetches).await }
    });
    let mut totals = FetchTotals::default();
    for outcome in futures::future::join_all(jobs).await {
        totals += outcome?;
    }
    Ok(totals)
}

async fn fetch_on(
    context: &Arc<NodeContext>,
    receiver: HostId,
    operation: &str,
    fetches: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    if receiver == context.host_id {
        let totals = fetch_ranges(context, operation, fetches).await?;
        Checkpoints::load(&context.store, operation)?
            .clear()
            .await?;
        return Ok(totals);
    }
    let request = pb::FetchRangesRequest {
        operation: operation.to_string(),
        ranges: fetches
            .iter()
            .map(|f| pb::FetchRange {
                keyspace_id: f.keyspace.to_string(),
                range: Some(range_to_pb(f.range)),
                sources: f.sources.iter().map(|s| s.to_string()).collect(),
            })
            .collect(),
    };
    let mut last_error = String::new();
    for attempt in 1..=FETCH_ATTEMPTS {
        let address = context
            .view()
            .member(receiver)
            .map(|m| m.metadata.internode_addr)
            .ok_or_else(|| NodeError::Internal(format!("no address known for {receiver}")))?;
        match context
            .peers
            .client(address)
            .fetch_ranges(request.clone())
            .await
        {
            Ok(response) => {
                let response = response.into_inner();
                return Ok(FetchTotals {
                    ranges: fetches.len() as u64,
                    bytes: response.bytes,
                    entries: response.entries,
                });
            }
            Err(status) => {
                last_error = status.message().to_string();
                tracing::warn!(%receiver, attempt, error = %last_error, "a receiver failed to fetch its ranges; asking again");
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
            }
        }
    }
    Err(NodeError::Internal(format!(
        "node {receiver} could not fetch its ranges: {last_error}"
    )))
}
