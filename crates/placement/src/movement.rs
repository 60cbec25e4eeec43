//! Movement plans: which ranges change replicas between two ring snapshots.

use crate::host::HostId;
use crate::replica_map::ReplicaMap;
use crate::token::{Token, TokenRange};

/// One range whose replica set differs between two snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeMovement {
    /// The range, `(start, end]`.
    pub range: TokenRange,
    /// Its replicas before the change, in placement order.
    pub before: Vec<HostId>,
    /// Its replicas after the change, in placement order.
    pub after: Vec<HostId>,
    /// Replicas that hold the range before but not after (in `before`'s order).
    pub losing: Vec<HostId>,
    /// Replicas that hold the range after but not before (in `after`'s order):
    /// the pending replicas while the change is under way, and the stream targets.
    pub gaining: Vec<HostId>,
}

/// The difference of two replica maps: every range whose replica *set* changes
/// (a change of order alone moves no data), in token order. Adjacent ranges with
/// the same before and after sets are merged.
///
/// The plan is exactly the diff of the maps: a token's replica set differs
/// between `before` and `after` if and only if the token lies in one of the
/// plan's ranges.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MovementPlan {
    /// The changed ranges.
    pub movements: Vec<RangeMovement>,
}

impl MovementPlan {
    /// The plan that turns placement `before` into placement `after`.
    pub fn between(before: &ReplicaMap, after: &ReplicaMap) -> MovementPlan {
        let mut bounds: Vec<Token> = before
            .ring()
            .tokens()
            .iter()
            .chain(after.ring().tokens())
            .copied()
            .collect();
        bounds.sort_unstable();
        bounds.dedup();

        let mut movements: Vec<RangeMovement> = Vec::new();
        for (i, &end) in bounds.iter().enumerate() {
            let start = bounds[(i + bounds.len() - 1) % bounds.len()];
            let old: Vec<HostId> = before.replicas(end).ids().collect();
            let new: Vec<HostId> = after.replicas(end).ids().collect();
            let losing: Vec<HostId> = old.iter().copied().filter(|h| !new.contains(h)).collect();
            let gaining: Vec<HostId> = new.iter().copied().filter(|h| !old.contains(h)).collect();
            if losing.is_empty() && gaining.is_empty() {
                continue;
            }
            if let Some(last) = movements.last_mut()
                && last.range.end == start
                && same_set(&last.before, &old)
                && same_set(&last.after, &new)
            {
                last.range.end = end;
                continue;
            }
            movements.push(RangeMovement {
                range: TokenRange::new(start, end),
                before: old,
                after: new,
                losing,
                gaining,
            });
        }
        merge_across_wrap(&mut movements);
        MovementPlan { movements }
    }

    /// Whether nothing moves.
    pub fn is_empty(&self) -> bool {
        self.movements.is_empty()
    }

    /// The fraction of the token space whose replica set changes, in [0, 1].
    pub fn changed_fraction(&self) -> f64 {
        self.movements.iter().map(|m| m.range.fraction()).sum()
    }

    /// The token space that must be copied to new replicas, in ring copies: each
    /// range's fraction times the number of replicas gaining it. Divided by the
    /// replication factor, it is the fraction of all replica data that moves.
    pub fn gained_fraction(&self) -> f64 {
        self.movements
            .iter()
            .map(|m| m.range.fraction() * m.gaining.len() as f64)
            .sum()
    }

    /// The movements in which `host` gains a range.
    pub fn gained_by(&self, host: HostId) -> impl Iterator<Item = &RangeMovement> {
        self.movements
            .iter()
            .filter(move |m| m.gaining.contains(&host))
    }

    /// The movements in which `host` loses a range.
    pub fn lost_by(&self, host: HostId) -> impl Iterator<Item = &RangeMovement> {
        self.movements
            .iter()
            .filter(move |m| m.losing.contains(&host))
    }

    /// What `host` must fetch: every range it gains, with the replicas to
    /// fetch it from in order of preference — the replicas that lose the
    /// range first (the one source sure to hold every write acknowledged
    /// under the old placement), then the range's other current replicas
    /// (for when the losing one is down), never `host` itself.
    pub fn fetches_for(&self, host: HostId) -> Vec<(TokenRange, Vec<HostId>)> {
        self.gained_by(host)
            .map(|m| {
                let staying = m.before.iter().filter(|h| !m.losing.contains(h));
                let sources = m
                    .losing
                    .iter()
                    .chain(staying)
                    .copied()
                    .filter(|&h| h != host)
                    .collect();
                (m.range, sources)
            })
            .collect()
    }
}

fn same_set(a: &[HostId], b: &[HostId]) -> bool {
    a.len() == b.len() && a.iter().all(|h| b.contains(h))
}

/// The first and last movements may be one range cut at the list's start.
fn merge_across_wrap(movements: &mut Vec<RangeMovement>) {
    if movements.len() < 2 {
        return;
    }
    let (first, last) = (&movements[0], &movements[movements.len() - 1]);
    if last.range.end == first.range.start
        && same_set(&last.before, &first.before)
        && same_set(&last.after, &first.after)
    {
        let last = movements.pop().expect("at least two movements");
        movements[0].range.start = last.range.start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Location;
    use crate::ring::{Ring, RingMember};
    use crate::strategy::ReplicationStrategy;
    use std::sync::Arc;

    fn member(n: u128, tokens: &[i64]) -> RingMember {
        RingMember::new(
            HostId::from_u128(n),
            Location::new("dc1", "r1"),
            tokens.iter().copied().map(Token).collect(),
        )
    }

    #[test]
    fn a_joining_node_fetches_from_the_replica_losing_each_range_first() {
        let before = map(
            vec![member(1, &[100]), member(2, &[200]), member(3, &[300])],
            2,
        );
        let after = map(
            vec![
                member(1, &[100]),
                member(2, &[200]),
                member(3, &[300]),
                member(4, &[150]),
            ],
            2,
        );
        let plan = MovementPlan::between(&before, &after);
        let joiner = HostId::from_u128(4);
        let fetches = plan.fetches_for(joiner);
        assert!(!fetches.is_empty());
        for (range, sources) in &fetches {
            let movement = plan
                .movements
                .iter()
                .find(|m| m.range == *range)
                .expect("a planned range");
            assert_eq!(sources[0], movement.losing[0], "the losing replica first");
            assert!(!sources.contains(&joiner));
            assert_eq!(sources.len(), movement.before.len());
        }
        assert!(plan.fetches_for(HostId::from_u128(1)).is_empty());
    }

    fn map(members: Vec<RingMember>, rf: u32) -> ReplicaMap {
        ReplicaMap::new(
            Arc::new(Ring::new(1, members).unwrap()),
            &ReplicationStrategy::simple(rf).unwrap(),
        )
    }

    #[test]
    fn a_join_with_rf_one_moves_the_range_below_the_new_token() {
        let before = map(vec![member(1, &[0]), member(2, &[1000])], 1);
        let after = map(
            vec![member(1, &[0]), member(2, &[1000]), member(3, &[500])],
            1,
        );
        let plan = MovementPlan::between(&before, &after);
        assert_eq!(plan.movements.len(), 1);
        let m = &plan.movements[0];
        assert_eq!(m.range, TokenRange::new(Token(0), Token(500)));
        assert_eq!(m.losing, vec![HostId::from_u128(2)]);
        assert_eq!(m.gaining, vec![HostId::from_u128(3)]);
    }

    #[test]
    fn identical_maps_have_an_empty_plan() {
        let a = map(vec![member(1, &[0]), member(2, &[10])], 2);
        let b = map(vec![member(2, &[10]), member(1, &[0])], 2);
        assert!(MovementPlan::between(&a, &b).is_empty());
    }

    #[test]
    fn first_node_gains_the_whole_ring() {
        let empty = ReplicaMap::new(
            Arc::new(Ring::empty(0)),
            &ReplicationStrategy::simple(1).unwrap(),
        );
        let one = map(vec![member(1, &[0, 100])], 1);
        let plan = MovementPlan::between(&empty, &one);
        assert_eq!(plan.movements.len(), 1, "merged across the wrap: {plan:?}");
        assert!((plan.changed_fraction() - 1.0).abs() < 1e-12);
        assert!((plan.gained_fraction() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn leaving_node_hands_its_ranges_to_the_next_replicas() {
        let before = map(
            vec![member(1, &[0]), member(2, &[100]), member(3, &[200])],
            2,
        );
        let after = map(vec![member(1, &[0]), member(3, &[200])], 2);
        let plan = MovementPlan::between(&before, &after);
        assert!(plan.gained_by(HostId::from_u128(2)).next().is_none());
        assert!(plan.lost_by(HostId::from_u128(2)).count() >= 1);
        for m in &plan.movements {
            assert_eq!(m.losing, vec![HostId::from_u128(2)]);
        }
    }
}
