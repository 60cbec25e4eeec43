//! The waits of a topology change: each blocks until gossip (or the peers,
//! asked over the internode port) show what the next step needs — another
//! node reached, `ring_delay` passed, an announcement known everywhere,
//! no other range movement under way;
//! [`announced_movement`] is what a movement waits for once announced.
//! The wait until this node holds every member record its peers hold is
//! [`catch_up`](super::catch_up)'s.
//!
//! None of them fails (but `announced_movement`, when gossip shows no
//! pending ring after them): a wait that cannot be satisfied in reasonable time
//! either keeps waiting with an `info` line (it needs the cluster) or gives
//! up with a `warn` and lets the change proceed (it only made a race
//! unlikely). Which is which is said on each.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::{HostId, Ring};
use ringstore_proto::v1 as pb;

use crate::error::{Result, TopologyError};
use crate::topology::catch_up::wait_until_caught_up;
use crate::topology::host::TopologyHost;
use crate::topology::movement::alters_under_way;

/// Waits `ring_delay`: long enough for every node to have seen what this
/// node just gossiped.
pub async fn wait_ring_delay(context: &impl TopologyHost) {
    tokio::time::sleep(context.ring_delay()).await;
}

/// How long a node announcing a movement waits for every live node to have
/// seen it, before it proceeds anyway (with a warning).
const ANNOUNCE_PATIENCE: Duration = Duration::from_secs(30);

/// Waits until every live node holds this node's current metadata (asked
/// over the internode port): from then on every coordinator sends writes to
/// the pending replicas, so data may move. `ring_delay` alone only makes this
/// likely; this makes it checked. Gives up after `ANNOUNCE_PATIENCE`, with
/// a warning (a node that cannot be asked is about to be seen down).
///
/// A peer that has said it holds the current metadata is not asked again
/// (a record is never replaced by an older one): in a fresh cohort of 100
/// nodes announcing at once, each asked all 99 peers every 100 ms until the
/// last one had heard.
pub async fn wait_until_announced(context: &impl TopologyHost) {
    let deadline = tokio::time::Instant::now() + ANNOUNCE_PATIENCE;
    // The peers known to hold `confirmed_for` (this node's stamp then).
    let mut confirmed: BTreeSet<HostId> = BTreeSet::new();
    let mut confirmed_for = None;
    loop {
        let view = context.view();
        let Some(mine) = view.member(context.host_id()).map(|m| m.metadata.stamp) else {
            return;
        };
        let mine = (mine.generation.0, mine.version);
        if confirmed_for != Some(mine) {
            confirmed.clear();
            confirmed_for = Some(mine);
        }
        let peers = live_peers(context, &view);
        let asks = peers
            .iter()
            .filter(|(host, _)| !confirmed.contains(host))
            .map(|&(host, address)| async move {
                let seen = metadata_seen(context, address, context.host_id())
                    .await
                    .is_some_and(|stamp| stamp >= mine);
                (host, seen)
            });
        let mut behind = Vec::new();
        for (host, seen) in futures::future::join_all(asks).await {
            if seen {
                confirmed.insert(host);
            } else {
                behind.push(host);
            }
        }
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

/// The live members other than this node, with their internode addresses.
fn live_peers(context: &impl TopologyHost, view: &ClusterView) -> Vec<(HostId, SocketAddr)> {
    view.up_members()
        .filter(|m| m.metadata.host_id != context.host_id())
        .map(|m| (m.metadata.host_id, m.metadata.internode_addr))
        .collect()
}

/// The stamp (generation, version) of `host`'s metadata that the node at
/// `address` holds, asked over the internode port; `None` if it holds none
/// or did not answer within 2 s.
async fn metadata_seen(
    context: &impl TopologyHost,
    address: SocketAddr,
    host: HostId,
) -> Option<(u64, u64)> {
    let request = pb::MetadataSeenRequest {
        host_id: host.to_string(),
    };
    let answer = tokio::time::timeout(
        Duration::from_secs(2),
        context.peers().client(address).metadata_seen(request),
    )
    .await;
    match answer {
        Ok(Ok(response)) if response.get_ref().known => {
            let r = response.into_inner();
            Some((r.generation, r.version))
        }
        _ => None,
    }
}

/// Waits until no other node's range movement and no keyspace alter is
/// under way (one at a time).
pub async fn wait_for_no_movement(context: &impl TopologyHost) {
    let mut views = context.membership().watch_view();
    loop {
        let movements =
            super::movements_under_way(&context.view()).or_else(|| alters_under_way(context));
        let Some(movements) = movements else {
            return;
        };
        tracing::info!(%movements, "waiting for another range movement to finish");
        let _ = tokio::time::timeout(Duration::from_secs(1), views.changed()).await;
    }
}

/// Waits until gossip has reached another node, unless this node is its own
/// only seed (it starts a new cluster).
pub async fn wait_until_connected(context: &impl TopologyHost) {
    let own = context.gossip_address();
    if context.seeds().iter().all(|&seed| seed == own) {
        return;
    }
    let mut views = context.membership().watch_view();
    let started = tokio::time::Instant::now();
    while context.view().members.len() < 2 {
        if started.elapsed() > Duration::from_secs(5) {
            tracing::info!(seeds = ?context.seeds(), "waiting to reach the cluster through the seeds before choosing tokens");
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), views.changed()).await;
    }
}

/// Once the movement this node announced is known everywhere (`ring_delay`,
/// then [`wait_until_announced`]) and this node knows every member its
/// peers know ([`wait_until_caught_up`]): the view to move data by, and its
/// pending ring. `doing` names the movement for the error when there is none.
pub async fn announced_movement(
    context: &impl TopologyHost,
    doing: &'static str,
) -> Result<(Arc<ClusterView>, Arc<Ring>)> {
    wait_ring_delay(context).await;
    wait_until_announced(context).await;
    wait_until_caught_up(context).await;
    let view = context.view();
    let pending = view
        .pending_ring
        .clone()
        .ok_or(TopologyError::NoPendingRing { doing })?;
    Ok((view, pending))
}
