//! Properties of placement that must hold for every ring: movement plans are
//! exactly the diff of replica maps, joins move little, and NTS spreads racks.

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_placement::allocation::random_tokens;
use ringstore_placement::{
    HostId, Location, MovementPlan, ReplicaMap, ReplicationStrategy, Ring, RingMember, Token,
};

/// A ring of `hosts` hosts with `tokens` random tokens each, on `racks` racks
/// in each of `dcs` data centers, all chosen by `seed`.
fn random_ring(seed: u64, hosts: usize, tokens: usize, dcs: usize, racks: usize) -> Ring {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ring = Ring::empty(0);
    for n in 0..hosts {
        let location = Location::new(
            format!("dc{}", rng.random_range(0..dcs) + 1),
            format!("rack{}", rng.random_range(0..racks) + 1),
        );
        let member = RingMember::new(
            HostId::from_u128(n as u128 + 1),
            location,
            random_tokens(&ring, tokens, &mut rng).unwrap(),
        );
        ring = ring.with_member(n as u64 + 1, member).unwrap();
    }
    ring
}

fn map(ring: &Ring, strategy: &ReplicationStrategy) -> ReplicaMap {
    ReplicaMap::new(Arc::new(ring.clone()), strategy)
}

fn replica_set(map: &ReplicaMap, token: Token) -> BTreeSet<HostId> {
    map.replicas(token).ids().collect()
}

/// Strategies over up to two DCs named dc1, dc2.
fn any_strategy() -> impl Strategy<Value = ReplicationStrategy> {
    prop_oneof![
        (1u32..5).prop_map(|rf| ReplicationStrategy::simple(rf).unwrap()),
        (1u32..5, 0u32..4).prop_map(|(a, b)| {
            ReplicationStrategy::network_topology([("dc1", a), ("dc2", b)]).unwrap()
        }),
    ]
}

/// A topology change applied to a ring: join, leave, replace or weight change.
#[derive(Clone, Debug)]
enum Change {
    Join,
    Leave,
    Replace,
    Reweight,
}

fn apply(ring: &Ring, change: &Change, seed: u64) -> Ring {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let hosts = ring.hosts();
    let victim = &hosts[rng.random_range(0..hosts.len())];
    let new_host = HostId::from_u128(10_000);
    match change {
        Change::Join => {
            let tokens = random_tokens(ring, 8, &mut rng).unwrap();
            let location = Location::new("dc1", format!("rack{}", rng.random_range(1..4)));
            ring.with_member(99, RingMember::new(new_host, location, tokens))
                .unwrap()
        }
        Change::Leave => ring.without_host(99, victim.id),
        Change::Replace => {
            let tokens = ring.tokens_of(victim.id);
            ring.without_host(99, victim.id)
                .with_member(
                    99,
                    RingMember::new(new_host, victim.location.clone(), tokens),
                )
                .unwrap()
        }
        Change::Reweight => {
            let mut tokens = ring.tokens_of(victim.id);
            tokens.extend(random_tokens(ring, 8, &mut rng).unwrap());
            ring.with_member(
                99,
                RingMember::new(victim.id, victim.location.clone(), tokens),
            )
            .unwrap()
        }
    }
}

/// A random ring, a change applied to it, both placements and the plan
/// between them.
struct Scenario {
    seed: u64,
    before_ring: Ring,
    after_ring: Ring,
    before: ReplicaMap,
    after: ReplicaMap,
    plan: MovementPlan,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("seed", &self.seed)
            .field("before_ring", &self.before_ring)
            .field("after_ring", &self.after_ring)
            .field("strategy", self.before.strategy())
            .finish_non_exhaustive()
    }
}

prop_compose! {
    fn any_scenario()(
        seed in any::<u64>(),
        hosts in 2usize..12,
        tokens in 1usize..8,
        strategy in any_strategy(),
        change in prop_oneof![
            Just(Change::Join), Just(Change::Leave), Just(Change::Replace), Just(Change::Reweight)
        ],
    ) -> Scenario {
        let before_ring = random_ring(seed, hosts, tokens, 2, 3);
        let after_ring = apply(&before_ring, &change, seed);
        let (before, after) = (map(&before_ring, &strategy), map(&after_ring, &strategy));
        let plan = MovementPlan::between(&before, &after);
        Scenario { seed, before_ring, after_ring, before, after, plan }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn movement_plan_is_the_diff_of_the_replica_maps(scenario in any_scenario()) {
        let Scenario { seed, before_ring, after_ring, before, after, plan } = scenario;

        // Probe every boundary, its neighbours, and random tokens.
        let mut rng = StdRng::seed_from_u64(seed);
        let mut probes: Vec<Token> = (0..200).map(|_| Token(rng.random())).collect();
        for &t in before_ring.tokens().iter().chain(after_ring.tokens()) {
            probes.extend([t, t.advance(1), t.advance(u64::MAX)]);
        }
        for token in probes {
            let (old, new) = (replica_set(&before, token), replica_set(&after, token));
            let covering: Vec<_> = plan.movements.iter().filter(|m| m.range.contains(token)).collect();
            prop_assert!(covering.len() <= 1, "movements overlap at {}", token);
            match covering.first() {
                None => prop_assert_eq!(&old, &new, "unchanged outside the plan at {}", token),
                Some(m) => {
                    prop_assert_ne!(&old, &new, "changed inside the plan at {}", token);
                    prop_assert_eq!(&m.before.iter().copied().collect::<BTreeSet<_>>(), &old);
                    prop_assert_eq!(&m.after.iter().copied().collect::<BTreeSet<_>>(), &new);
                    let losing: BTreeSet<_> = old.difference(&new).copied().collect();
                    let gaining: BTreeSet<_> = new.difference(&old).copied().collect();
                    prop_assert_eq!(m.losing.iter().copied().collect::<BTreeSet<_>>(), losing);
                    prop_assert_eq!(m.gaining.iter().copied().collect::<BTreeSet<_>>(), gaining);
                }
            }
        }
    }

    #[test]
    fn every_gained_token_is_fetched_from_a_replica_that_held_it(scenario in any_scenario()) {
        let Scenario { seed, after_ring, before, after, plan, .. } = scenario;
        let mut rng = StdRng::seed_from_u64(seed);
        let probes: Vec<Token> = (0..300).map(|_| Token(rng.random())).collect();
        for host in after_ring.hosts().iter().map(|h| h.id) {
            let fetches = plan.fetches_for(host);
            for &token in &probes {
                let (old, new) = (replica_set(&before, token), replica_set(&after, token));
                let gains = new.contains(&host) && !old.contains(&host);
                let covering: Vec<_> = fetches.iter().filter(|(r, _)| r.contains(token)).collect();
                // Exactly the tokens the host gains are fetched, once.
                prop_assert_eq!(covering.len(), usize::from(gains), "{} at {}", host, token);
                if let Some((_, sources)) = covering.first() {
                    // From every replica that held the token, a loser first.
                    prop_assert_eq!(sources.iter().copied().collect::<BTreeSet<_>>(), old.clone());
                    let losers: BTreeSet<_> = old.difference(&new).copied().collect();
                    if !losers.is_empty() {
                        prop_assert!(losers.contains(&sources[0]), "a losing replica first");
                    }
                }
            }
        }
    }

    #[test]
    fn with_rf_one_a_join_moves_only_the_ranges_just_below_its_tokens(
        seed in any::<u64>(),
        hosts in 1usize..12,
        tokens in 1usize..16,
    ) {
        let strategy = ReplicationStrategy::simple(1).unwrap();
        let before_ring = random_ring(seed, hosts, tokens, 1, 1);
        let after_ring = apply(&before_ring, &Change::Join, seed);
        let joined = HostId::from_u128(10_000);
        let new_tokens = after_ring.tokens_of(joined);
        let plan = MovementPlan::between(&map(&before_ring, &strategy), &map(&after_ring, &strategy));
        // Each movement is a run of ranges (previous token, new token]: it starts
        // at a ring token and every ring token it contains is one of the new ones.
        for movement in &plan.movements {
            prop_assert!(after_ring.tokens().binary_search(&movement.range.start).is_ok());
            for &t in after_ring.tokens().iter().filter(|&&t| movement.range.contains(t)) {
                prop_assert!(new_tokens.contains(&t), "{} holds old token {}", movement.range, t);
            }
            prop_assert!(new_tokens.contains(&movement.range.end));
            prop_assert_eq!(&movement.gaining, &vec![joined]);
        }
        // And together they are all of those ranges.
        let owned = after_ring.primary_ownership()[&joined];
        prop_assert!((plan.changed_fraction() - owned).abs() < 1e-9);
    }

    #[test]
    fn nts_never_puts_two_replicas_on_one_rack_when_rf_is_at_most_the_rack_count(
        seed in any::<u64>(),
        hosts in 1usize..16,
        tokens in 1usize..8,
        racks in 1usize..5,
        rf1 in 1u32..5,
        rf2 in 1u32..5,
    ) {
        let ring = random_ring(seed, hosts, tokens, 2, racks);
        let strategy = ReplicationStrategy::network_topology([("dc1", rf1), ("dc2", rf2)]).unwrap();
        let replicas = map(&ring, &strategy);
        for range in replicas.ranges() {
            for (dc, rf) in [("dc1", rf1), ("dc2", rf2)] {
                let dc_hosts: Vec<_> = ring.hosts().iter().filter(|h| h.location.dc.as_str() == dc).collect();
                let dc_racks: BTreeSet<_> = dc_hosts.iter().map(|h| &h.location.rack).collect();
                let chosen: Vec<_> = range.hosts().filter(|h| h.location.dc.as_str() == dc).collect();
                prop_assert_eq!(chosen.len(), (rf as usize).min(dc_hosts.len()));
                if rf as usize <= dc_racks.len() {
                    let chosen_racks: BTreeSet<_> = chosen.iter().map(|h| &h.location.rack).collect();
                    prop_assert_eq!(chosen_racks.len(), chosen.len(), "two replicas on one rack");
                }
            }
        }
    }

    #[test]
    fn nts_with_one_dc_and_one_rack_equals_simple_strategy(
        seed in any::<u64>(),
        hosts in 1usize..16,
        tokens in 1usize..8,
        rf in 1u32..6,
    ) {
        let ring = random_ring(seed, hosts, tokens, 1, 1);
        let simple = map(&ring, &ReplicationStrategy::simple(rf).unwrap());
        let nts = map(&ring, &ReplicationStrategy::network_topology([("dc1", rf)]).unwrap());
        for (a, b) in simple.ranges().zip(nts.ranges()) {
            prop_assert_eq!(a.ids().collect::<Vec<_>>(), b.ids().collect::<Vec<_>>());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn adding_one_host_to_n_moves_about_one_over_n_plus_one(
        seed in any::<u64>(),
        hosts in 1usize..24,
    ) {
        let strategy = ReplicationStrategy::simple(1).unwrap();
        let before_ring = random_ring(seed, hosts, 256, 1, 1);
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(1));
        let joined = RingMember::new(
            HostId::from_u128(10_000),
            Location::new("dc1", "rack1"),
            random_tokens(&before_ring, 256, &mut rng).unwrap(),
        );
        let after_ring = before_ring.with_member(1, joined).unwrap();
        let moved = MovementPlan::between(&map(&before_ring, &strategy), &map(&after_ring, &strategy))
            .changed_fraction();
        let expected = 1.0 / (hosts as f64 + 1.0);
        prop_assert!((moved / expected - 1.0).abs() <= 0.25, "moved {moved:.4}, expected {expected:.4}");
    }
}
