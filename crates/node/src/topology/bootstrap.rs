//! Bootstrap and replacement: a node announced as `Joining` with its tokens
//! streams every range it gains, then announces `Normal`.
//!
//! A fresh node's tokens come from [`join::join`](crate::topology::join::join)
//! (balanced allocation or `initial_token`); a replacement takes the dead
//! node's tokens ([`replace`]). Either way the tokens and the operation's
//! name are saved before anything is gossiped, so a node restarted mid-way
//! comes back `Joining` and resumes from its stream checkpoints
//! ([`resume`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{Liveness, NodeState, Takeovers};
use ringstore_placement::HostId;
use ringstore_streaming::StreamOperation;

use crate::error::{Result, TopologyError};
use crate::streaming::fetch::fetch_ranges;
use crate::topology::catch_up::wait_until_caught_up;
use crate::topology::host::TopologyHost;
use crate::topology::persisted::{save_takeovers, save_tokens, set_unfinished_bootstrap};
use crate::topology::proposals::finish_survivors_proposals;
use crate::topology::transfers::transfers;
use crate::topology::waits::{
    wait_for_no_movement, wait_ring_delay, wait_until_announced, wait_until_connected,
};
/// How long a joining node waits for its schema to match the cluster's.
const SCHEMA_PATIENCE: Duration = Duration::from_secs(30);
/// How long a replacement looks for the node it replaces in gossip.
const FIND_PATIENCE: Duration = Duration::from_secs(30);

/// Streams the ranges this `Joining` node gains (its tokens gossiped at least
/// `ring_delay` ago), then announces `Normal` and forgets the checkpoints.
pub async fn stream_and_complete<H: TopologyHost>(
    context: &Arc<H>,
    operation: StreamOperation,
) -> Result<()> {
    wait_until_announced(&**context).await;
    // The transfers are computed from the view: it must hold every member
    // the peers hold, down ones included (see `catch_up`).
    wait_until_caught_up(&**context).await;
    wait_for_schema(&**context).await;
    let view = context.view();
    let replaced = view
        .member(context.host_id())
        .and_then(|m| m.metadata.takeovers.replaces);
    let pending = view
        .pending_ring
        .clone()
        .ok_or(TopologyError::NoPendingRing { doing: "joining" })?;
    let unavailable: Vec<HostId> = replaced.into_iter().collect();
    let fetches = transfers(&**context, &view.ring, &pending, &unavailable)
        .remove(&context.host_id())
        .unwrap_or_default();
    let ranges = fetches.len();
    let totals = fetch_ranges(context, operation, fetches).await?;
    tracing::info!(
        %operation,
        ranges,
        bytes = totals.bytes,
        cells = totals.entries,
        "streamed every gained range"
    );
    if let Some(dead) = replaced {
        // A replacement streamed each range from one survivor: have every
        // survivor finish what the dead node helped choose (`proposals.rs`),
        // then sync it among all its new replicas.
        finish_survivors_proposals(context, &view.ring, &pending, dead).await?;
        context
            .sync_gained_ranges(&view.ring, &pending, Some(context.host_id()))
            .await?;
    }
    set_unfinished_bootstrap(context.store(), None).await?;
    context
        .membership()
        .update_local(|m| m.state = NodeState::Normal)
        .await?;
    Ok(())
}

/// Resumes a bootstrap this node was running when it stopped: it starts
/// `Joining` with its saved tokens, so it only has to wait for gossip and
/// stream what its checkpoints do not cover.
pub async fn resume<H: TopologyHost>(context: Arc<H>, operation: StreamOperation) -> Result<()> {
    tracing::info!(%operation, "resuming an unfinished bootstrap");
    wait_until_connected(&*context).await;
    wait_ring_delay(&*context).await;
    wait_for_no_movement(&*context).await;
    stream_and_complete(&context, operation).await
}

/// Replaces the dead node that `address` names (a host id, or an IP address
/// it used): takes over its tokens as `Joining`, streams its ranges from the
/// surviving replicas, and turns `Normal`; the dead node is then out of the
/// ring for good.
pub async fn replace<H: TopologyHost>(context: Arc<H>, address: String) -> Result<()> {
    wait_until_connected(&*context).await;
    let dead = find_replaced(&*context, &address).await?;
    let view = context.view();
    let tokens = view.ring.tokens_of(dead);
    if tokens.is_empty() {
        return Err(TopologyError::NothingToReplace {
            dead,
            address: address.to_string(),
        }
        .into());
    }
    wait_for_no_movement(&*context).await;
    let operation = StreamOperation::Replace { replaced: dead };
    save_tokens(context.store(), &tokens).await?;
    let takeovers = Takeovers {
        replaces: Some(dead),
        ..Takeovers::default()
    };
    save_takeovers(context.store(), &takeovers).await?;
    set_unfinished_bootstrap(context.store(), Some(operation)).await?;
    tracing::info!(%dead, tokens = tokens.len(), "replacing a dead node");
    context
        .membership()
        .update_local(move |m| {
            m.tokens = tokens;
            m.state = NodeState::Joining;
            m.takeovers = takeovers;
        })
        .await?;
    wait_ring_delay(&*context).await;
    stream_and_complete(&context, operation).await
}

/// The member `address` names, once gossip knows it; it must be down.
async fn find_replaced(context: &impl TopologyHost, address: &str) -> Result<HostId> {
    let by_id = address.parse::<uuid::Uuid>().ok().map(HostId);
    let by_ip = address
        .parse::<IpAddr>()
        .ok()
        .or_else(|| address.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()));
    if by_id.is_none() && by_ip.is_none() {
        return Err(TopologyError::BadReplaceAddress {
            address: address.to_string(),
        }
        .into());
    }
    let deadline = tokio::time::Instant::now() + FIND_PATIENCE;
    loop {
        let view = context.view();
        let matching: Vec<_> = view
            .members
            .values()
            .filter(|m| {
                let md = &m.metadata;
                md.host_id != context.host_id()
                    && !view.removed.contains(&md.host_id)
                    && (Some(md.host_id) == by_id
                        || by_ip.is_some_and(|ip| {
                            [md.client_addr, md.internode_addr, md.gossip_addr]
                                .iter()
                                .any(|a| a.ip() == ip)
                        }))
            })
            .collect();
        // Several nodes may share an IP (ports differ): the dead one is meant.
        let dead = matching.iter().find(|m| m.liveness == Liveness::Down);
        match (dead, matching.first()) {
            (Some(member), _) => return Ok(member.metadata.host_id),
            (None, Some(member)) if tokio::time::Instant::now() >= deadline => {
                return Err(TopologyError::ReplacedNodeUp {
                    host: member.metadata.host_id,
                    address: address.to_string(),
                }
                .into());
            }
            (None, None) if tokio::time::Instant::now() >= deadline => {
                return Err(TopologyError::UnknownReplaceAddress {
                    address: address.to_string(),
                }
                .into());
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Pulls every live member's schema, then waits (boundedly) until every
/// live member gossips this node's schema version: the keyspaces to stream
/// are then known, and so are those clients will ask for once this node is
/// `Normal`. The pull comes first because gossip alone can mislead: a
/// version gossiped by a peer may lag its schema, and may then equal a
/// joiner's own (both empty, say).
async fn wait_for_schema(context: &impl TopologyHost) {
    context.pull_schema().await;
    let deadline = tokio::time::Instant::now() + SCHEMA_PATIENCE;
    loop {
        let mine = context.schema_version();
        let view = context.view();
        let lagging = view
            .up_members()
            .filter(|m| m.metadata.host_id != context.host_id())
            .any(|m| m.metadata.schema_version != mine);
        if !lagging {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "the schema still differs from other nodes'; streaming the keyspaces known here"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
