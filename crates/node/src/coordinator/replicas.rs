//! Which replicas a key has: its natural replicas on the view's ring, and
//! for a write the pending ones a range movement, a keyspace alter or a
//! ring that has just been replaced adds, all from one snapshot of the
//! view.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::{
    HostId, Murmur3Partitioner, PlacementError, ReplicaMap, ReplicationStrategy, Ring, Token,
};
use ringstore_replication::ReplicaCandidate;

use crate::error::{NodeError, Result};
use crate::schema::KeyspaceDef;

use super::host::CoordinatorHost;

/// The key's natural replicas in `view`, with their DCs and liveness.
pub(super) fn candidates(
    context: &impl CoordinatorHost,
    view: &ClusterView,
    keyspace: &KeyspaceDef,
    token: Token,
) -> Vec<ReplicaCandidate> {
    let map = context
        .replica_maps()
        .replica_map(&view.ring, keyspace.id, &keyspace.strategy);
    replica_candidates(view, &map, token, |_| true)
}

/// What a write goes to: the key's natural replicas and, during a range
/// movement or a keyspace alter, its pending replicas (those the pending
/// ring or the pending replication adds, on either ring), all from the one
/// `view`, so a ring switch cannot fall between them; and for `ring_delay`
/// after a switch, the live replicas only the replaced ring has (see
/// [`crate::settling_ring`]).
pub(super) fn write_candidates(
    context: &impl CoordinatorHost,
    view: &ClusterView,
    keyspace: &KeyspaceDef,
    key: &[u8],
) -> Result<(Vec<ReplicaCandidate>, Vec<ReplicaCandidate>)> {
    let token = token_of(key)?;
    let natural = candidates(context, view, keyspace, token);
    let mut pending: Vec<ReplicaCandidate> = Vec::new();
    let mut add = |ring: &Arc<Ring>, strategy: &ReplicationStrategy, only_live: bool| {
        let map = context
            .replica_maps()
            .replica_map(ring, keyspace.id, strategy);
        let extra = replica_candidates(view, &map, token, |host| {
            let known = natural.iter().chain(&pending).any(|n| n.host == host);
            !known && (!only_live || view.is_up(host))
        });
        pending.extend(extra);
    };
    let rings = std::iter::once(&view.ring).chain(&view.pending_ring);
    for (ring_index, ring) in rings.enumerate() {
        for (strategy_index, strategy) in keyspace.write_strategies().enumerate() {
            if ring_index == 0 && strategy_index == 0 {
                continue; // the natural replicas
            }
            add(ring, strategy, false);
        }
    }
    let settle = Duration::from_millis(context.ring_delay_ms());
    if let Some(replaced) = context.settling_ring().previous(&view.ring, settle) {
        for strategy in keyspace.write_strategies() {
            add(&replaced, strategy, true);
        }
    }
    Ok((natural, pending))
}

/// The replicas of `token` in `map` that pass `keep`, with their DCs and
/// their liveness in `view`.
pub(super) fn replica_candidates(
    view: &ClusterView,
    map: &ReplicaMap,
    token: Token,
    keep: impl Fn(HostId) -> bool,
) -> Vec<ReplicaCandidate> {
    map.replicas(token)
        .hosts()
        .filter(|h| keep(h.id))
        .map(|h| ReplicaCandidate::new(h.id, h.location.dc.clone(), view.is_up(h.id)))
        .collect()
}

pub(super) fn token_of(key: &[u8]) -> Result<Token> {
    Murmur3Partitioner::token(key).map_err(|error| match error {
        PlacementError::EmptyKey => NodeError::EmptyKey,
        source => NodeError::Placement {
            doing: "hashing the key",
            source,
        },
    })
}

pub(super) fn dc_of(context: &impl CoordinatorHost) -> ringstore_placement::Datacenter {
    context.dc().into()
}
