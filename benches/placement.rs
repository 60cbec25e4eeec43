//! Placement benchmarks: the cost of finding where a key lives, and of
//! rebuilding the placement snapshot when the ring changes.
//!
//! Measured (`cargo bench --bench placement`):
//! - `token/16-byte key`: Cassandra's Murmur3 token of a 16-byte key (a UUID
//!   partition key), the first step of every request.
//! - `lookup/*`: from a precomputed token (or, for the baselines, the same 64-bit
//!   value) to its owner(s). The lookups cycle through 4,096 precomputed random
//!   tokens so that the figure is the lookup, not the RNG, and is not one hot
//!   cache line:
//!   - `ringstore NTS rf3 256x16`: [`ReplicaMap::replicas`] on 256 hosts × 16
//!     random tokens over 3 racks of `dc1`, NetworkTopologyStrategy dc1=3 —
//!     the full replica set, primary first. Goal: < 100 ns.
//!   - `ringstore primary 256x16`: [`Ring::primary_owner`] on the same ring,
//!     the single-owner lookup to compare with the baselines.
//!   - `hashring 256x16`: the `hashring` crate's `HashRing::get` on the very
//!     same vnodes (same positions, same keys, asserted to agree with ringstore),
//!     single owner only.
//!   - `jump 256`: jump consistent hash (`jumphash`) over 256 buckets, single
//!     owner only (jump hash has no vnodes, racks or replica sets).
//! - `snapshot/build *`: building a [`Ring`] from its members and the
//!   [`ReplicaMap`] of one keyspace, what a node does on every ring change.
//!   Goal: < 1 s for 1,000 hosts × 256 tokens.
//!
//! The baselines hash nothing: both are given an identity hasher, so that they
//! do the same work as ringstore's lookup from a token (a binary search, or the
//! jump loop). Key hashing is measured once, by `token/16-byte key`.

use std::hash::{BuildHasher, Hash, Hasher};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use hashring::HashRing;
use jumphash::CustomJumpHasher;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_placement::{
    HostId, Location, Murmur3Partitioner, ReplicaMap, ReplicationStrategy, Ring, RingMember, Token,
    allocation,
};

/// Precomputed lookup keys; a power of two so that cycling is a mask.
const KEYS: usize = 4096;
const SEED: u64 = 0x5eed_f00d;

/// `hosts` members of `dc1`, spread round-robin over 3 racks, each with `tokens`
/// random tokens from a seeded RNG.
fn members(hosts: u32, tokens: usize, seed: u64) -> Vec<RingMember> {
    let mut rng = StdRng::seed_from_u64(seed);
    let empty = Ring::empty(0);
    (0..hosts)
        .map(|n| {
            // 64-bit random tokens practically never collide (p ≈ 2e-9 at 256k
            // tokens), and `Ring::new` would refuse it if they did, so each host
            // draws its tokens against the empty ring rather than a growing one.
            let tokens = allocation::random_tokens(&empty, tokens, &mut rng).expect("tokens");
            RingMember::new(
                HostId::from_u128(u128::from(n) + 1),
                Location::new("dc1", format!("rack{}", n % 3)),
                tokens,
            )
        })
        .collect()
}

fn nts_rf3() -> ReplicationStrategy {
    ReplicationStrategy::network_topology([("dc1", 3)]).expect("valid strategy")
}

fn build(members: Vec<RingMember>, strategy: &ReplicationStrategy) -> ReplicaMap {
    let ring = Ring::new(1, members).expect("valid ring");
    ReplicaMap::new(Arc::new(ring), strategy)
}

fn lookup_tokens() -> Vec<Token> {
    let mut rng = StdRng::seed_from_u64(SEED ^ 1);
    (0..KEYS).map(|_| Token(rng.random::<i64>())).collect()
}

/// A token as an unsigned ring position with the same order (sign bit flipped),
/// so that `hashring`'s `u64` ring orders the vnodes exactly as ringstore does.
fn position(token: Token) -> u64 {
    (token.0 as u64) ^ (1 << 63)
}

/// A hasher that returns the `u64` it was given, so the baselines measure their
/// lookup, not SipHash. Other input is folded in, only to stay a valid `Hasher`.
#[derive(Clone, Copy, Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Clone, Copy, Default)]
struct IdentityBuilder;

impl BuildHasher for IdentityBuilder {
    type Hasher = Identity;

    fn build_hasher(&self) -> Identity {
        Identity::default()
    }
}

/// A `hashring` vnode: its host and its ring position, which is all it hashes to.
#[derive(Clone, Copy, Debug)]
struct VNode {
    host: HostId,
    position: u64,
}

impl Hash for VNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.position);
    }
}

fn bench_token(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement");
    let key = *uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210).as_bytes();
    group.bench_function("token/16-byte key", |b| {
        b.iter(|| Murmur3Partitioner::token(black_box(&key)).expect("non-empty key"))
    });
    group.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement");
    let members = members(256, 16, SEED);
    let map = build(members.clone(), &nts_rf3());
    let ring = Arc::clone(map.ring());
    let tokens = lookup_tokens();
    let keys: Vec<u64> = tokens.iter().map(|&t| position(t)).collect();

    // The same 4,096 vnodes, by position. `get` finds the first vnode >= the key,
    // wrapping, which is ringstore's rule: check that they agree.
    let mut hashring = HashRing::with_hasher(IdentityBuilder);
    hashring.batch_add(
        members
            .iter()
            .flat_map(|m| {
                m.tokens.iter().map(|&t| VNode {
                    host: m.host,
                    position: position(t),
                })
            })
            .collect(),
    );
    for (&token, key) in tokens.iter().zip(&keys) {
        assert_eq!(
            hashring.get(key).map(|v| v.host),
            ring.primary_owner(token).map(|h| h.id)
        );
        assert_eq!(map.replicas(token).len(), 3);
    }

    let mut i = 0;
    group.bench_function("lookup/ringstore NTS rf3 256x16", |b| {
        b.iter(|| {
            i = (i + 1) & (KEYS - 1);
            let replicas = map.replicas(black_box(tokens[i]));
            (replicas.len(), replicas.ids().next())
        })
    });

    let mut i = 0;
    group.bench_function("lookup/ringstore primary 256x16", |b| {
        b.iter(|| {
            i = (i + 1) & (KEYS - 1);
            ring.primary_owner(black_box(tokens[i])).map(|h| h.id)
        })
    });

    // Single owner only: `HashRing::get_with_replicas` clones the whole ring
    // (all 4,096 vnodes) on every call and does not skip further vnodes of hosts
    // already chosen, so it neither costs nor returns what a replica-set lookup
    // should; a fair comparison is with `lookup/ringstore primary`.
    let mut i = 0;
    group.bench_function("lookup/hashring 256x16", |b| {
        b.iter(|| {
            i = (i + 1) & (KEYS - 1);
            hashring.get(black_box(&keys[i])).map(|v| v.host)
        })
    });

    // Single owner only: jump hash maps a key to one bucket and has no notion of
    // vnodes, racks or a replica walk.
    let jump = CustomJumpHasher::new(Identity::default());
    let mut i = 0;
    group.bench_function("lookup/jump 256", |b| {
        b.iter(|| {
            i = (i + 1) & (KEYS - 1);
            jump.slot(black_box(&keys[i]), 256)
        })
    });
    group.finish();
}

fn bench_snapshot(c: &mut Criterion) {
    let nts = nts_rf3();
    let simple = ReplicationStrategy::simple(3).expect("valid strategy");

    let mut group = c.benchmark_group("placement");
    let small = members(256, 16, SEED);
    group.bench_function("snapshot/build 256x16 NTS rf3", |b| {
        b.iter_batched(|| small.clone(), |m| build(m, &nts), BatchSize::SmallInput)
    });
    group.finish();

    // About 0.1–1 s per build: few samples, one build per batch.
    let mut group = c.benchmark_group("placement-large");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let large = members(1000, 256, SEED ^ 2);
    for (name, strategy) in [("NTS rf3", &nts), ("Simple rf3", &simple)] {
        group.bench_function(format!("snapshot/build 1000x256 {name}"), |b| {
            b.iter_batched(
                || large.clone(),
                |m| build(m, strategy),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_token, bench_lookup, bench_snapshot);
criterion_main!(benches);
