//! Fixtures shared by the crate's tests: the two reference keyspaces
//! (SimpleStrategy rf 3; NetworkTopologyStrategy {dc1: 3, dc2: 2}), replica
//! lists, and a proptest generator of arbitrary clusters.

use proptest::prelude::*;
use ringstore_placement::{Datacenter, HostId, ReplicationStrategy};

use crate::consistency::ConsistencyLevel;
use crate::plan::ReplicaCandidate;

/// Every level with the acks (or replies) it needs under SimpleStrategy rf 3.
pub(crate) const SIMPLE_RF3_COUNTS: [(ConsistencyLevel, u32); 9] = {
    use ConsistencyLevel::*;
    [
        (Any, 1),
        (One, 1),
        (Two, 2),
        (Three, 3),
        (Quorum, 2),
        (All, 3),
        (LocalOne, 1),
        (LocalQuorum, 2),
        (EachQuorum, 2),
    ]
};

pub(crate) fn dc(name: &str) -> Datacenter {
    Datacenter::from(name)
}

pub(crate) fn host(n: u128) -> HostId {
    HostId::from_u128(n)
}

pub(crate) fn simple_3() -> ReplicationStrategy {
    ReplicationStrategy::simple(3).unwrap()
}

pub(crate) fn nts_3_2() -> ReplicationStrategy {
    ReplicationStrategy::network_topology([("dc1", 3), ("dc2", 2)]).unwrap()
}

pub(crate) fn replica(n: u128, dc_name: &str, alive: bool) -> ReplicaCandidate {
    ReplicaCandidate::new(host(n), dc_name, alive)
}

/// SimpleStrategy rf 3 in one DC: hosts 1, 2, 3 in `dc1`, the ones in `dead` down.
pub(crate) fn simple_replicas(dead: &[u128]) -> Vec<ReplicaCandidate> {
    (1..=3)
        .map(|n| replica(n, "dc1", !dead.contains(&n)))
        .collect()
}

/// NTS {dc1: 3, dc2: 2}: hosts 1, 2, 3 in `dc1` and 4, 5 in `dc2`, in the
/// interleaved placement order 4, 1, 2, 5, 3; the ones in `dead` down.
pub(crate) fn nts_replicas(dead: &[u128]) -> Vec<ReplicaCandidate> {
    [(4, "dc2"), (1, "dc1"), (2, "dc1"), (5, "dc2"), (3, "dc1")]
        .into_iter()
        .map(|(n, dc_name)| replica(n, dc_name, !dead.contains(&n)))
        .collect()
}

/// A keyspace, a coordinator and one key's replicas, for property tests.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    pub strategy: ReplicationStrategy,
    pub local_dc: Datacenter,
    pub natural: Vec<ReplicaCandidate>,
    pub pending: Vec<ReplicaCandidate>,
}

const DCS: [&str; 3] = ["dc1", "dc2", "dc3"];

fn strategies() -> impl Strategy<Value = ReplicationStrategy> {
    prop_oneof![
        (1u32..=5).prop_map(|rf| ReplicationStrategy::simple(rf).unwrap()),
        (0u32..=4, 0u32..=3).prop_map(|(dc1, dc2)| {
            let dc1 = if dc1 + dc2 == 0 { 1 } else { dc1 };
            ReplicationStrategy::network_topology([("dc1", dc1), ("dc2", dc2)]).unwrap()
        }),
    ]
}

/// Arbitrary clusters: either strategy, a coordinator in dc1, dc2 or dc3
/// (which holds no replica), natural replicas in a random interleaving, at
/// most rf per DC (fewer when the ring is small), some down, and up to two
/// pending replicas.
pub(crate) fn scenarios() -> impl Strategy<Value = Scenario> {
    (
        strategies(),
        0..DCS.len(),
        proptest::collection::vec((0..2usize, proptest::bool::weighted(0.8)), 0..=8),
        proptest::collection::vec((0..2usize, any::<bool>()), 0..=2),
    )
        .prop_map(|(strategy, local, natural, pending)| {
            let mut per_dc = [0u32; 2];
            let mut next_host = 0u128;
            let mut fresh = |dc_index: usize, alive: bool| {
                next_host += 1;
                replica(next_host, DCS[dc_index], alive)
            };
            let natural = natural
                .into_iter()
                .filter(|&(dc_index, _)| {
                    let room = match &strategy {
                        ReplicationStrategy::Simple { rf } => rf.get() > per_dc.iter().sum(),
                        _ => strategy.rf_in(&dc(DCS[dc_index])) > per_dc[dc_index],
                    };
                    per_dc[dc_index] += u32::from(room);
                    room
                })
                .map(|(dc_index, alive)| fresh(dc_index, alive))
                .collect();
            let pending = pending
                .into_iter()
                .map(|(dc_index, alive)| fresh(dc_index, alive))
                .collect();
            Scenario {
                strategy,
                local_dc: dc(DCS[local]),
                natural,
                pending,
            }
        })
}
