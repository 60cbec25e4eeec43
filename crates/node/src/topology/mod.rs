//! Topology changes: bootstrap, replace, decommission, removenode, cleanup,
//! keyspace alters, and the movement plans that preview them.
//!
//! # Design
//! A change is announced in gossip before any data moves: the joining node
//! gossips `Joining` with its tokens (a replacement also names the node it
//! replaces), a leaving node `Leaving`, a node running `removenode` the dead
//! node it is removing. From that metadata every node derives the same
//! *pending ring* ([`ClusterView::pending_ring`](ringstore_membership::ClusterView)),
//! and coordinators send each write to the key's pending replicas too,
//! waiting for one more ack per pending replica (see
//! [`coordinator`](crate::coordinator)). After `ring_delay`, and once every
//! live node has confirmed that it holds the announcement
//! ([`wait_until_announced`]), the ranges move ([`transfers()`]): each receiver
//! pulls each range it gains from the replica that loses it
//! ([`streaming`](crate::streaming)). Only then does the
//! change complete in gossip (`Normal`, `Left`, removed), and the pending
//! ring becomes the ring. A write acknowledged at any point is therefore on
//! the old replicas (and streamed) or on the new ones (written directly).
//!
//! One range movement at a time: a node does not start one while gossip
//! shows another under way ([`ClusterView::movements`](ringstore_membership::ClusterView::movements));
//! a joining node waits its turn, `decommission` and `removenode` are
//! refused with the movement that is in the way.
//!
//! # Caveats
//! - Two nodes starting a movement within one gossip round of each other may
//!   both proceed; the placement stays consistent (both pending sets are
//!   written), but the estimate of each is off.
//! - A node that dies while it joins or leaves stays so in gossip; restart
//!   it (it resumes) or remove it.
//!
//! # Files
//! - `join.rs`: a fresh node's join (waiting for its turn, choosing
//!   tokens), deciding by `join_turn.rs` (pure: who goes next, which tokens
//!   a new cluster's cohort takes), then `bootstrap.rs` (streaming what it
//!   gains; also replacement and resuming).
//! - `decommission.rs`, `removenode.rs`, `cleanup.rs`: the other changes.
//! - `alter.rs`: a keyspace's replication changed on an unchanged ring,
//!   moved the same way (announce, stream, commit, clean up).
//! - `transfers.rs`: who fetches which range from whom, and having them do
//!   it; `preview.rs`: the movement plans of `plan`.
//! - `waits.rs`: the waits between steps; `persisted.rs`: what a node keeps
//!   across restarts (tokens, an unfinished bootstrap, takeovers).

pub mod alter;
pub mod bootstrap;
pub mod cleanup;
pub mod decommission;
pub mod join;
pub mod join_turn;
pub mod persisted;
pub mod preview;
pub mod removenode;
pub mod transfers;
pub mod waits;

pub use transfers::{fetch_everywhere, transfers};
pub use waits::{wait_ring_delay, wait_until_announced};

use std::collections::BTreeMap;
use std::sync::Arc;

use ringstore_membership::ClusterView;
use ringstore_placement::{ReplicationStrategy, Ring};

use crate::context::NodeContext;
use crate::error::{NodeError, Result};

/// Refuses to start a movement while another is under way (a join,
/// leave, removal or replacement in gossip, or a keyspace alter).
pub fn ensure_no_movement(context: &NodeContext) -> Result<()> {
    let under_way = movements_under_way(&context.view()).or_else(|| alters_under_way(context));
    match under_way {
        None => Ok(()),
        Some(movements) => Err(NodeError::FailedPrecondition(format!(
            "another range movement is under way ({movements}); only one at a time: \
             try again once it is done"
        ))),
    }
}

/// The range movements live nodes of `view` show under way (joins,
/// leaves, removals, replacements), described for an error; `None` if none.
pub fn movements_under_way(view: &ClusterView) -> Option<String> {
    let movements = view.movements();
    if movements.is_empty() {
        return None;
    }
    Some(
        movements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The keyspace alters the schema shows under way, described for an error
/// or a log line; `None` if none.
pub fn alters_under_way(context: &NodeContext) -> Option<String> {
    let alters: Vec<String> = context
        .keyspaces()
        .into_iter()
        .filter_map(|k| {
            let pending = k.pending_strategy.as_ref()?;
            Some(format!("alter of keyspace {} to {pending}", k.name))
        })
        .collect();
    (!alters.is_empty()).then(|| alters.join(", "))
}

/// Once the movement this node announced is known everywhere (`ring_delay`,
/// then [`wait_until_announced`]): the view to move data by, and its
/// pending ring. `doing` names the movement for the error when there is none.
pub async fn announced_movement(
    context: &NodeContext,
    doing: &str,
) -> Result<(Arc<ClusterView>, Arc<Ring>)> {
    wait_ring_delay(context).await;
    wait_until_announced(context).await;
    let view = context.view();
    let pending = view
        .pending_ring
        .clone()
        .ok_or_else(|| NodeError::Internal(format!("{doing}, but gossip shows no pending ring")))?;
    Ok((view, pending))
}

/// Refuses a change that would leave fewer nodes than a keyspace's
/// replication factor (in any data center), the pending one of an alter
/// included.
pub fn ensure_enough_replicas(context: &NodeContext, after: &Ring) -> Result<()> {
    for keyspace in context.keyspaces() {
        if keyspace
            .write_strategies()
            .any(|s| !strategy_fits(after, s))
        {
            return Err(NodeError::FailedPrecondition(format!(
                "keyspace {} replicates to more nodes than would remain ({}): lower its replication first",
                keyspace.name,
                after.hosts().len()
            )));
        }
    }
    Ok(())
}

/// Whether `ring` has enough nodes for `strategy`: its replication factor in
/// all (SimpleStrategy), or in each data center it names (NTS).
pub fn strategy_fits(ring: &Ring, strategy: &ReplicationStrategy) -> bool {
    let mut per_dc: BTreeMap<String, u32> = BTreeMap::new();
    for host in ring.hosts() {
        *per_dc.entry(host.location.dc.to_string()).or_default() += 1;
    }
    match strategy {
        ReplicationStrategy::Simple { rf } => (ring.hosts().len() as u32) >= rf.get(),
        ReplicationStrategy::NetworkTopology { rf_per_dc } => rf_per_dc
            .iter()
            .all(|(dc, rf)| per_dc.get(dc.as_str()).copied().unwrap_or(0) >= *rf),
    }
}
