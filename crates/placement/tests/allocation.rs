//! The allocation targets: balanced tokens keep effective ownership within
//! 10% (max/min) while a cluster grows one host at a time; weights scale
//! ownership; random tokens are shown for comparison.

use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::StdRng;
use ringstore_placement::allocation::{balanced_tokens, random_tokens};
use ringstore_placement::{HostId, Location, ReplicaMap, ReplicationStrategy, Ring, RingMember};

const NUM_TOKENS: usize = 16;

/// How a growth experiment places each new host's tokens.
#[derive(Clone, Copy)]
enum Allocator {
    Balanced,
    Random(u64),
}

/// max/min effective ownership of `strategy` over `ring`.
fn spread(ring: &Ring, strategy: &ReplicationStrategy) -> f64 {
    let owned = ReplicaMap::new(Arc::new(ring.clone()), strategy).effective_ownership();
    let max = owned.values().copied().fold(f64::MIN, f64::max);
    let min = owned.values().copied().fold(f64::MAX, f64::min);
    max / min
}

/// Grows a ring to `hosts` hosts, racks assigned round-robin, and returns
/// `(host count, max/min)` after each host for which `measure(count)` holds.
fn grow(
    hosts: usize,
    racks: usize,
    strategy: &ReplicationStrategy,
    allocator: Allocator,
    measure: impl Fn(usize) -> bool,
) -> Vec<(usize, f64)> {
    let mut ring = Ring::empty(0);
    let mut rng = StdRng::seed_from_u64(match allocator {
        Allocator::Random(seed) => seed,
        Allocator::Balanced => 0,
    });
    let mut spreads = Vec::new();
    for n in 0..hosts {
        let host = HostId::from_u128(n as u128 + 1);
        let location = Location::new("dc1", format!("rack{}", n % racks + 1));
        let tokens = match allocator {
            Allocator::Balanced => balanced_tokens(&ring, host, &location, NUM_TOKENS, strategy),
            Allocator::Random(_) => random_tokens(&ring, NUM_TOKENS, &mut rng),
        }
        .unwrap();
        assert_eq!(tokens.len(), NUM_TOKENS);
        ring = ring
            .with_member(n as u64 + 1, RingMember::new(host, location, tokens))
            .unwrap();
        if measure(n + 1) {
            spreads.push((n + 1, spread(&ring, strategy)));
        }
    }
    spreads
}

fn worst(spreads: &[(usize, f64)]) -> (usize, f64) {
    spreads
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap()
}

#[test]
fn balanced_tokens_keep_one_rack_within_ten_percent_from_3_to_64_hosts() {
    let strategy = ReplicationStrategy::simple(3).unwrap();
    let balanced = grow(64, 1, &strategy, Allocator::Balanced, |n| n >= 3);
    let random = grow(64, 1, &strategy, Allocator::Random(1), |n| n >= 3);
    println!("one rack, RF 3, 16 tokens: hosts, balanced max/min, random max/min");
    for (b, r) in balanced.iter().zip(&random) {
        println!("{:3} {:.3} {:.3}", b.0, b.1, r.1);
    }
    let (at, ratio) = worst(&balanced);
    println!(
        "worst balanced {ratio:.3} at {at} hosts; worst random {:.3}",
        worst(&random).1
    );
    assert!(ratio <= 1.10, "max/min {ratio:.3} at {at} hosts");
}

#[test]
fn balanced_tokens_keep_three_equal_racks_within_ten_percent_up_to_63_hosts() {
    let strategy = ReplicationStrategy::network_topology([("dc1", 3)]).unwrap();
    let equal_racks = |n: usize| n.is_multiple_of(3);
    let balanced = grow(63, 3, &strategy, Allocator::Balanced, equal_racks);
    let random = grow(63, 3, &strategy, Allocator::Random(1), equal_racks);
    println!("three racks, NTS dc1=3, 16 tokens: hosts, balanced max/min, random max/min");
    for (b, r) in balanced.iter().zip(&random) {
        println!("{:3} {:.3} {:.3}", b.0, b.1, r.1);
    }
    let (at, ratio) = worst(&balanced);
    println!(
        "worst balanced {ratio:.3} at {at} hosts; worst random {:.3}",
        worst(&random).1
    );
    assert!(ratio <= 1.10, "max/min {ratio:.3} at {at} hosts");
}

/// Grows `hosts` weight-1 hosts with the balanced allocator, adds one weight-4
/// host (4 × 16 tokens), and returns its primary ownership over the mean of the others'.
fn weight_four_ratio(hosts: usize, strategy: &ReplicationStrategy) -> f64 {
    let mut ring = Ring::empty(0);
    let location = Location::new("dc1", "rack1");
    for n in 0..=hosts {
        let host = HostId::from_u128(n as u128 + 1);
        let count = if n == hosts {
            4 * NUM_TOKENS
        } else {
            NUM_TOKENS
        };
        let tokens = balanced_tokens(&ring, host, &location, count, strategy).unwrap();
        ring = ring
            .with_member(
                n as u64 + 1,
                RingMember::new(host, location.clone(), tokens),
            )
            .unwrap();
    }
    let owned = ring.primary_ownership();
    let heavy = owned[&HostId::from_u128(hosts as u128 + 1)];
    let light_mean = (owned.values().sum::<f64>() - heavy) / hosts as f64;
    heavy / light_mean
}

#[test]
fn a_weight_four_host_owns_four_times_a_weight_one_host() {
    for (hosts, rf) in [(8, 1), (12, 1), (12, 3), (20, 3)] {
        let ratio = weight_four_ratio(hosts, &ReplicationStrategy::simple(rf).unwrap());
        println!(
            "{hosts} weight-1 hosts + one weight-4 host, RF {rf}: primary ownership ratio {ratio:.3}"
        );
        assert!(
            (ratio / 4.0 - 1.0).abs() <= 0.10,
            "{hosts} hosts, RF {rf}: ratio {ratio:.3}"
        );
    }
}
