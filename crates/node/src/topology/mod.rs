//! Topology changes: bootstrap, replace, decommission, removenode, cleanup,
//! and the movement plans that preview them.
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

pub mod bootstrap;
pub mod cleanup;
pub mod decommission;
pub mod preview;
pub mod removenode;
pub mod saved;
pub mod transfers;

pub use transfers::{fetch_everywhere, transfers};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::{HostId, ReplicationStrategy, Ring};
use ringstore_proto::v1 as pb;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};

/// Refuses to start a movement while another is under way.
pub fn ensure_no_movement(context: &NodeContext) -> Result<()> {
    match movements_under_way(&context.view()) {
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

/// Waits `ring_delay`: long enough for every node to have seen what this
/// node just gossiped.
pub async fn wait_ring_delay(context: &NodeContext) {
    tokio::time::sleep(Duration::from_millis(context.config.ring_delay_ms)).await;
}

/// How long a node announcing a movement waits for every live node to have
/// seen it, before it proceeds anyway (with a warning).
const ANNOUNCE_PATIENCE: Duration = Duration::from_secs(30);

/// Waits until every live node holds this node's current metadata (asked
/// over the internode port): from then on every coordinator sends writes to
/// the pending replicas, so data may move. `ring_delay` alone only makes this
/// likely; this makes it checked. Gives up after `ANNOUNCE_PATIENCE`, with
/// a warning (a node that cannot be asked is about to be seen down).
pub async fn wait_until_announced(context: &NodeContext) {
    let deadline = tokio::time::Instant::now() + ANNOUNCE_PATIENCE;
    loop {
        let view = context.view();
        let Some(mine) = view.member(context.host_id).map(|m| m.metadata.stamp) else {
            return;
        };
        let peers: Vec<_> = view
            .up_members()
            .filter(|m| m.metadata.host_id != context.host_id)
            .map(|m| (m.metadata.host_id, m.metadata.internode_addr))
            .collect();
        let asks = peers.iter().map(|&(host, address)| async move {
            let request = pb::MetadataSeenRequest {
                host_id: context.host_id.to_string(),
            };
            let answer = tokio::time::timeout(
                Duration::from_secs(2),
                context.peers.client(address).metadata_seen(request),
            )
            .await;
            let seen = match answer {
                Ok(Ok(response)) => {
                    let r = response.into_inner();
                    r.known && (r.generation, r.version) >= (mine.generation.0, mine.version)
                }
                _ => false,
            };
            (host, seen)
        });
        let behind: Vec<HostId> = futures::future::join_all(asks)
            .await
            .into_iter()
            .filter(|(_, seen)| !seen)
            .map(|(host, _)| host)
            .collect();
        if behind.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                ?behind,
                "some live nodes have not seen this node's announcement; proceeding"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until this node's view holds, of every live peer, at least the
/// metadata that peer has of itself now (asked over the internode port):
/// every state change a peer made before the question — a node that turned
/// `Normal`, say — is then in the view. [`wait_until_announced`] is the other
/// direction. Gives up after `ANNOUNCE_PATIENCE` on peers that do not answer
/// or whose news does not arrive, with a warning.
pub async fn wait_until_caught_up(context: &NodeContext) {
    let view = context.view();
    let peers: Vec<_> = view
        .up_members()
        .filter(|m| m.metadata.host_id != context.host_id)
        .map(|m| (m.metadata.host_id, m.metadata.internode_addr))
        .collect();
    let asks = peers.iter().map(|&(host, address)| async move {
        let request = pb::MetadataSeenRequest {
            host_id: host.to_string(),
        };
        let answer = tokio::time::timeout(
            Duration::from_secs(2),
            context.peers.client(address).metadata_seen(request),
        )
        .await;
        match answer {
            Ok(Ok(response)) if response.get_ref().known => {
                let r = response.into_inner();
                Some((host, (r.generation, r.version)))
            }
            _ => None,
        }
    });
    let answers = futures::future::join_all(asks).await;
    let mut missing: Vec<HostId> = answers
        .iter()
        .zip(&peers)
        .filter(|(answer, _)| answer.is_none())
        .map(|(_, &(host, _))| host)
        .collect();
    let wanted: Vec<(HostId, (u64, u64))> = answers.into_iter().flatten().collect();
    let mut views = context.membership.watch_view();
    let deadline = tokio::time::Instant::now() + ANNOUNCE_PATIENCE;
    loop {
        let view = context.view();
        let behind: Vec<HostId> = wanted
            .iter()
            .filter(|&&(host, stamp)| {
                view.member(host).is_none_or(|m| {
                    (m.metadata.stamp.generation.0, m.metadata.stamp.version) < stamp
                })
            })
            .map(|&(host, _)| host)
            .collect();
        if behind.is_empty() && missing.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            missing.extend(behind);
            tracing::warn!(
                ?missing,
                "this node's view has not caught up with some live peers; proceeding"
            );
            return;
        }
        if behind.is_empty() {
            // Only unanswered peers are left: their news is what gossip holds.
            tracing::warn!(
                ?missing,
                "some live peers did not say what they hold of themselves; proceeding"
            );
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), views.changed()).await;
    }
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
/// replication factor (in any data center).
pub fn ensure_enough_replicas(context: &NodeContext, after: &Ring) -> Result<()> {
    for keyspace in context.keyspaces() {
        let strategy = &keyspace.strategy;
        let mut per_dc: BTreeMap<String, u32> = BTreeMap::new();
        for host in after.hosts() {
            *per_dc.entry(host.location.dc.to_string()).or_default() += 1;
        }
        let short = match strategy {
            ReplicationStrategy::Simple { rf } => (after.hosts().len() as u32) < rf.get(),
            ReplicationStrategy::NetworkTopology { rf_per_dc } => rf_per_dc
                .iter()
                .any(|(dc, rf)| per_dc.get(dc.as_str()).copied().unwrap_or(0) < *rf),
        };
        if short {
            return Err(NodeError::FailedPrecondition(format!(
                "keyspace {} replicates to more nodes than would remain ({}): lower its replication first",
                keyspace.name,
                after.hosts().len()
            )));
        }
    }
    Ok(())
}
