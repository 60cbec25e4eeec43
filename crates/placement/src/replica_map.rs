//! Replica sets for every range of a ring, precomputed for one strategy.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::host::HostId;
use crate::ring::{HostIndex, Ring, RingHost};
use crate::strategy::{ReplicationStrategy, Walker};
use crate::token::{Token, TokenRange};

/// The replicas of every range of a ring under one strategy, computed once when
/// the map is built, so that a lookup is one binary search.
///
/// Invariant: `offsets` has one entry per ring token plus one, and the replicas
/// of the range ending at ring token `i` are `replicas[offsets[i]..offsets[i+1]]`,
/// in placement order (primary first).
#[derive(Clone, Debug)]
pub struct ReplicaMap {
    ring: Arc<Ring>,
    strategy: ReplicationStrategy,
    offsets: Vec<u32>,
    replicas: Vec<HostIndex>,
}

impl ReplicaMap {
    /// Computes the replicas of every range of `ring` under `strategy`.
    pub fn new(ring: Arc<Ring>, strategy: &ReplicationStrategy) -> ReplicaMap {
        let walker = Walker::new(strategy, ring.hosts().iter().map(|h| &h.location));
        let owners = ring.owners();
        let mut offsets = Vec::with_capacity(owners.len() + 1);
        // A range has at most one replica per host, whatever the factor asks
        // (a client may ask for billions: that must not size the allocation).
        let per_range = (strategy.total_rf() as usize).min(ring.hosts().len());
        let mut replicas = Vec::with_capacity(owners.len() * per_range);
        let mut positions = Vec::new();
        offsets.push(0);
        for start in 0..owners.len() {
            positions.clear();
            walker.walk(owners.len(), start, |p| owners[p], &mut positions);
            replicas.extend(positions.iter().map(|&p| owners[p]));
            offsets.push(replicas.len() as u32);
        }
        ReplicaMap {
            ring,
            strategy: strategy.clone(),
            offsets,
            replicas,
        }
    }

    /// The ring this map was computed for.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// The strategy this map was computed for.
    pub fn strategy(&self) -> &ReplicationStrategy {
        &self.strategy
    }

    /// The replicas of the range holding `token`. Empty on the empty ring.
    pub fn replicas(&self, token: Token) -> Replicas<'_> {
        match self.ring.position_of(token) {
            Some(position) => self.replicas_at(position),
            None => Replicas {
                ring: &self.ring,
                range: TokenRange::new(Token::MIN, Token::MIN),
                indices: &[],
            },
        }
    }

    /// Every range of the ring with its replicas, in token order of the range ends.
    pub fn ranges(&self) -> impl Iterator<Item = Replicas<'_>> {
        (0..self.ring.token_count()).map(|p| self.replicas_at(p))
    }

    /// Effective ownership: for each host, the fraction of the token space it
    /// holds a replica of. Sums to the number of replicas per range (the rf,
    /// capped by the hosts available); this is `nodetool status <ks>`'s
    /// `Owns (effective)`.
    pub fn effective_ownership(&self) -> BTreeMap<HostId, f64> {
        let mut owned = vec![0.0; self.ring.hosts().len()];
        for range in self.ranges() {
            let fraction = range.range.fraction();
            for &host in range.indices {
                owned[host as usize] += fraction;
            }
        }
        self.ring.hosts().iter().map(|h| h.id).zip(owned).collect()
    }

    fn replicas_at(&self, position: usize) -> Replicas<'_> {
        let from = self.offsets[position] as usize;
        let to = self.offsets[position + 1] as usize;
        Replicas {
            ring: &self.ring,
            range: self.ring.range_at(position),
            indices: &self.replicas[from..to],
        }
    }
}

/// The replicas of one range, borrowed from a [`ReplicaMap`].
#[derive(Clone, Copy, Debug)]
pub struct Replicas<'a> {
    ring: &'a Ring,
    range: TokenRange,
    indices: &'a [HostIndex],
}

impl<'a> Replicas<'a> {
    /// The range these replicas hold.
    pub fn range(&self) -> TokenRange {
        self.range
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether there are none (only on the empty ring).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The replica hosts in placement order, primary first.
    pub fn hosts(&self) -> impl ExactSizeIterator<Item = &'a RingHost> + 'a {
        let ring = self.ring;
        self.indices.iter().map(move |&i| ring.host_at(i))
    }

    /// The replicas' host ids in placement order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = HostId> + 'a {
        self.hosts().map(|h| h.id)
    }

    /// Whether `host` is one of the replicas.
    pub fn contains(&self, host: HostId) -> bool {
        self.hosts().any(|h| h.id == host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Location;
    use crate::ring::RingMember;

    fn ring() -> Arc<Ring> {
        let member = |n: u128, rack: &str, tokens: &[i64]| {
            RingMember::new(
                HostId::from_u128(n),
                Location::new("dc1", rack),
                tokens.iter().copied().map(Token).collect(),
            )
        };
        Arc::new(
            Ring::new(
                1,
                [
                    member(1, "a", &[-300, 100]),
                    member(2, "a", &[-200, 200]),
                    member(3, "b", &[-100, 300]),
                ],
            )
            .unwrap(),
        )
    }

    #[test]
    fn lookup_returns_the_replicas_of_the_range_holding_the_token() {
        let map = ReplicaMap::new(ring(), &ReplicationStrategy::simple(2).unwrap());
        let ids = |t| map.replicas(Token(t)).ids().collect::<Vec<_>>();
        let h = HostId::from_u128;
        assert_eq!(ids(-250), vec![h(2), h(3)]);
        assert_eq!(ids(150), vec![h(2), h(3)]);
        assert_eq!(ids(301), vec![h(1), h(2)], "wraps to the first token");
        assert_eq!(
            map.replicas(Token(0)).range(),
            TokenRange::new(Token(-100), Token(100))
        );
    }

    #[test]
    fn effective_ownership_sums_to_the_replica_count() {
        let map = ReplicaMap::new(ring(), &ReplicationStrategy::simple(2).unwrap());
        let total: f64 = map.effective_ownership().values().sum();
        assert!((total - 2.0).abs() < 1e-9);
        let nts = ReplicaMap::new(
            ring(),
            &ReplicationStrategy::network_topology([("dc1", 2)]).unwrap(),
        );
        // Two racks, rf 2: rack b's only host holds everything.
        assert!((nts.effective_ownership()[&HostId::from_u128(3)] - 1.0).abs() < 1e-9);
    }

    /// Found by fuzzing: a keyspace created with a replication factor of
    /// `u32::MAX` sized this allocation by it (terabytes: the process aborted),
    /// and factors summing past `u32::MAX` overflowed.
    #[test]
    fn a_huge_replication_factor_places_every_host_once_without_overflow() {
        let huge = [
            ReplicationStrategy::simple(u32::MAX).unwrap(),
            ReplicationStrategy::network_topology([("dc1", u32::MAX), ("dc2", 1)]).unwrap(),
        ];
        assert_eq!(huge[1].total_rf(), u32::MAX, "the sum saturates");
        for strategy in huge {
            let map = ReplicaMap::new(ring(), &strategy);
            assert_eq!(map.replicas(Token(0)).ids().count(), 3);
        }
    }

    #[test]
    fn empty_ring_has_no_replicas() {
        let map = ReplicaMap::new(
            Arc::new(Ring::empty(0)),
            &ReplicationStrategy::simple(3).unwrap(),
        );
        assert!(map.replicas(Token(7)).is_empty());
        assert!(map.effective_ownership().is_empty());
    }
}
